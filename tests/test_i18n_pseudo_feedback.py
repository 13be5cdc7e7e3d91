"""The decisive test of the marking of the grader's feedback and of the runtime's words (issue 23):
the tests that build the cases of course.evidence (why a run does not count),
course.comparison,
course.instructor.scoring (the feedback of the hidden tests) and the runtime's errors run again,
here, under the pseudo-locale. Wherever one of this group's modules hands words out (a run's
problems, notes, prediction problem and name; scoring's failures, passing and printed lines; the
differences and the coverage course.comparison names; a CourseError one of them
raises), every
line must carry the markers: a line without them never went through `_()`. The markers are then
taken off, so that the replayed test's own English assertions still hold: the message a student
reads is the English one, translated, not another.

Words that other modules hand over (the scheduler's records, course.cluster.accounting) are left
to those modules' marking; lines that frame them (`note: ...`) are this group's and are checked."""

from __future__ import annotations

import functools
import gettext
import inspect
import itertools
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from babel.messages import extract

from course import comparison, evidence, i18n
from course.cluster import accounting
from course.errors import CourseError
from course.instructor import scoring, scoring_accuracy, scoring_runs
from course.instructor.i18n_catalog import MARKED
from tests import (
    test_accuracy,
    test_checkpoint,
    test_costmodel,
    test_data,
    test_evidence,
    test_prediction_record,
    test_scoring,
    test_watchdog,
)
from tests.test_i18n_pseudo import unmarked

ROOT = Path(__file__).resolve().parent.parent
GROUP = (
    "course/evidence.py",
    "course/evidence_run.py",
    "course/prediction_evidence.py",
    "course/comparison.py",
    "course/instructor/scoring.py",
    "course/instructor/scoring_accuracy.py",
    "course/instructor/scoring_runs.py",
    "course/runtime/harness.py",
    "course/runtime/checkpoint.py",
    "course/runtime/snapshot_integrity.py",
    "course/runtime/watchdog.py",
    "course/runtime/data.py",
)
GROUP_FILES = {str(ROOT / module) for module in GROUP}

# The tests replayed: every test of the grading modules (the evidence's and scoring's cases) and,
# of the other modules, the tests that build a case of this group's words.
REPLAYED: dict[Any, tuple[str, ...] | None] = {
    test_evidence: None,
    test_scoring: None,
    test_accuracy: None,
    test_prediction_record: None,
    test_costmodel: ("test_the_prediction_scores_within_the_factor_of_grading_toml",),
    test_checkpoint: (
        "test_a_run_folder_another_process_trains_in_is_refused_not_shared",
        "test_a_snapshot_written_after_its_job_ended_does_not_count",
        "test_results_written_after_the_job_ended_do_not_count",
    ),
    test_watchdog: ("test_a_limit_that_is_no_number_of_minutes_is_refused_with_how_to_set_it",),
    test_data: (
        "test_auto_prefers_real_data_and_says_what_to_run_without_any",
        "test_damaged_data_set_gives_the_command_to_rebuild_it",
        "test_unsafe_names_are_refused",
        "test_labels_out_of_range_are_named_as_such",
        "test_an_empty_data_set_is_refused_when_read_and_listed",
    ),
}
# Not replayed: tests that start jobs, clusters or nbgrader apps (their words are those replayed
# here), and those that need a fixture of their own module (the report's, a site's).
LEFT_OUT_MARKS = {"slow", "integration", "slurm", "pbs", "gpu"}
FIXTURES = {"folder", "tmp_path", "capsys", "monkeypatch", "grading_config", "data_root"}
ParameterSet = type(pytest.param(None))


def _marks(function: Callable, module: Any) -> list:
    found = getattr(module, "pytestmark", [])
    return [*getattr(function, "pytestmark", []), *(found if isinstance(found, list) else [found])]


def _parameters(function: Callable) -> Iterator[tuple[str, dict, list]]:
    """(id, arguments, marks) of every parametrized case of `function` (one without parameters)."""
    axes = []
    for mark in getattr(function, "pytestmark", []):
        if mark.name != "parametrize":
            continue
        names = mark.args[0]
        names = [n.strip() for n in names.split(",")] if isinstance(names, str) else list(names)
        ids = mark.kwargs.get("ids")
        axis = []
        for i, value in enumerate(mark.args[1]):
            marks: list = []
            if isinstance(value, ParameterSet):
                value, marks = value.values, list(value.marks)
            elif len(names) == 1:
                value = (value,)
            shown = ids[i] if isinstance(ids, list | tuple) else str(i)
            axis.append((shown, dict(zip(names, value)), marks))
        axes.append(axis)
    for combination in itertools.product(*axes):
        yield (
            "-".join(shown for shown, _, _ in combination),
            {k: v for _, arguments, _ in combination for k, v in arguments.items()},
            [m for _, _, marks in combination for m in marks],
        )


def _cases() -> Iterator:
    for module, names in REPLAYED.items():
        for name, function in vars(module).items():
            if not (name.startswith("test_") and inspect.isfunction(function)):
                continue
            if function.__module__ != module.__name__:  # a test another module imported
                continue
            if names is not None and name not in names:
                continue
            if any(mark.name in LEFT_OUT_MARKS for mark in _marks(function, module)):
                continue
            for shown, arguments, marks in _parameters(function):
                needed = set(inspect.signature(function).parameters) - set(arguments)
                if needed - FIXTURES:
                    continue
                case = f"{module.__name__.removeprefix('tests.')}::{name}"
                yield pytest.param(
                    module,
                    function,
                    arguments,
                    marks=marks,  # an extended case is replayed in the extended tier
                    id=f"{case}[{shown}]" if shown else case,
                )


CASES = list(_cases())


def strip(text: str) -> str:
    """`text` without the pseudo-locale's markers: the English the replayed test expects."""
    return text.replace(i18n.MARK_OPEN, "").replace(i18n.MARK_CLOSE, "")


@functools.cache
def group_messages() -> frozenset[str]:
    """The message ids of this group's modules, as the catalog's extraction finds them."""
    found = set()
    for module in GROUP:
        for _, message, _, _ in extract.extract_from_file(
            "python", ROOT / module, keywords={"_": None}
        ):
            found.add(message)
    return frozenset(found)


class GroupPseudo(gettext.NullTranslations):
    """The pseudo-locale for this group's messages; every other message as it is."""

    def gettext(self, message: str) -> str:
        return i18n.pseudo(message) if message in group_messages() else message


class Seen:
    """The words this group's modules handed out while a test ran, each with where it came from."""

    def __init__(self) -> None:
        self.said: list[tuple[str, str]] = []
        self.others: set[str] = set()  # what other modules said (the scheduler's records)

    def __call__(self, where: str, text: str) -> str:
        if text:
            self.said.append((where, text))
        return strip(text)

    def unmarked(self) -> list[str]:
        return [
            f"{where}: {line}"
            for where, text in self.said
            if text not in self.others
            for line in unmarked(text)
        ]


def watch(monkeypatch, seen: Seen) -> None:
    """Take what this group's modules hand out through `seen`: recorded, markers taken off."""

    def traced(*args, **kwargs) -> evidence.Run:
        run = original_trace(*args, **kwargs)
        run.problems = [seen("problem", p) for p in run.problems]
        run.notes = [seen("note", n) for n in run.notes]
        if run.prediction_problem is not None:
            run.prediction_problem = seen("prediction problem", run.prediction_problem)
        return run

    original_trace = evidence.trace
    monkeypatch.setattr(evidence, "trace", traced)

    def returned(where: str, function: Callable) -> Callable:
        @functools.wraps(function)
        def wrapper(*args, **kwargs):
            found = function(*args, **kwargs)
            return (
                [seen(where, x) for x in found] if isinstance(found, list) else seen(where, found)
            )

        return wrapper

    monkeypatch.setattr(evidence.Run, "describe", returned("run", evidence.Run.describe))
    monkeypatch.setattr(
        comparison.Coverage, "describe", returned("coverage", comparison.Coverage.describe)
    )
    comparable = returned("difference", comparison.comparable)
    monkeypatch.setattr(comparison, "comparable", comparable)
    monkeypatch.setattr(scoring, "comparable", comparable)

    check = accounting.Accounting.check

    def checked(self, run):  # the scheduler's records: course.cluster.accounting's words
        problems, notes = check(self, run)
        seen.others.update(problems + notes)
        return problems, notes

    monkeypatch.setattr(accounting.Accounting, "check", checked)

    fail, passed = scoring.fail, scoring.passed

    def failing(message: str, hint: str = ""):
        __tracebackhide__ = True
        fail(seen("failure", message), seen("failure's hint", hint))

    for module in (scoring, scoring_accuracy, scoring_runs):  # scoring's modules
        monkeypatch.setattr(module, "fail", failing)
        monkeypatch.setattr(
            module,
            "print",
            lambda *values, **kwargs: print(*(seen("printed", str(v)) for v in values), **kwargs),
            raising=False,
        )
    monkeypatch.setattr(scoring, "passed", lambda message: passed(seen("passing line", message)))

    init = CourseError.__init__

    def raised(self, message: str, hint: str = "") -> None:
        if sys._getframe(1).f_code.co_filename in GROUP_FILES:
            message, hint = seen("error", message), seen("error's hint", hint)
        init(self, message, hint)

    monkeypatch.setattr(CourseError, "__init__", raised)


def test_the_group_is_marked_and_its_cases_are_found():
    assert set(GROUP) <= set(MARKED)
    replayed = {module for module, _, _ in (case.values for case in CASES)}
    assert replayed == set(REPLAYED), set(REPLAYED) - replayed
    named = {(m, f.__name__) for m, f, _ in (case.values for case in CASES)}
    for module, names in REPLAYED.items():
        assert names is None or {(module, name) for name in names} <= named, names


def replay(module, function, arguments: dict, request, tmp_path, monkeypatch) -> Seen:
    """Run the test `function` of `module` with `arguments` under the pseudo-locale, its
    fixtures as pytest would give them; what this group said."""
    grading = tmp_path / "grading.toml"  # the replayed module's, as tests/conftest.py writes it
    if hasattr(module, "GRADING"):
        grading.write_text(module.GRADING)
        monkeypatch.setenv("COURSE_GRADING_CONFIG", str(grading))
    fixtures = {
        name: grading if name == "grading_config" else request.getfixturevalue(name)
        for name in inspect.signature(function).parameters
        if name not in arguments
    }
    monkeypatch.setenv(i18n.VARIABLE, i18n.PSEUDO)
    # only this group's messages marked: the other modules' words stay the English the replayed
    # test expects (their own pseudo-locale tests judge them)
    monkeypatch.setattr(i18n, "translations", lambda lang: GroupPseudo())
    seen = Seen()
    watch(monkeypatch, seen)
    function(**fixtures, **arguments)  # its own assertions: the English, once the markers are off
    return seen


@pytest.mark.parametrize("module,function,arguments", CASES)
def test_every_line_this_group_says_in_a_replayed_case_is_translated(
    module, function, arguments, request, tmp_path, monkeypatch
):
    seen = replay(module, function, arguments, request, tmp_path, monkeypatch)
    if not seen.said:
        pytest.skip("the case says nothing of this group's")
    assert not seen.unmarked(), "\n".join(seen.unmarked())


def test_a_message_left_unmarked_is_found(request, tmp_path, monkeypatch):
    """The check itself: with course.evidence's messages unmarked, the replay names its line (and
    the English the replayed test expects is still the same)."""
    monkeypatch.setattr(evidence, "_", lambda message: message)
    function = test_scoring.test_a_run_without_its_job_log_gets_nothing
    seen = replay(test_scoring, function, {}, request, tmp_path, monkeypatch)
    [found] = [line for line in seen.unmarked() if "no job log *.o1" in line]
    assert found.startswith("problem: no job log *.o1 beside the notebooks"), found


def test_the_runtime_s_lines_on_a_damaged_snapshot_or_a_full_disk_are_translated(
    tmp_path, monkeypatch
):
    """What a job log shows a student when a snapshot is damaged or the disk fills (their cases
    run whole jobs in tests/test_snapshot_faults.py: here the lines alone)."""
    import errno
    import zipfile

    from course.runtime import checkpoint, harness, snapshot_integrity

    monkeypatch.setenv(i18n.VARIABLE, i18n.PSEUDO)
    sealed, unsealed = tmp_path / "snapshot_iter_96", tmp_path / "snapshot_iter_64"
    for snapshot in (sealed, unsealed):
        with zipfile.ZipFile(snapshot, "w") as archive:
            archive.writestr("updater/iteration.npy", b"x" * 64)
    snapshot_integrity.seal(sealed)
    sealed.write_bytes(sealed.read_bytes()[:-1] + b"!")  # a byte changed after writing
    unsealed.write_bytes(unsealed.read_bytes()[:40])  # truncated, and no digest to say so
    whys = [snapshot_integrity.problem(sealed), snapshot_integrity.problem(unsealed)]
    lines = [
        *whys,
        snapshot_integrity.damaged_line(sealed, strip(whys[0])),
        snapshot_integrity.damaged_line(unsealed, strip(whys[1]), rank=1),
        harness._failure(OSError(errno.ENOSPC, "No space left on device"), str(tmp_path)),
    ]
    with pytest.raises(CourseError) as raised:
        checkpoint._load(unsealed, None)
    lines += [raised.value.message, raised.value.hint]
    assert all(lines) and not unmarked("\n".join(lines)), lines
    assert all(line.startswith("course: " + i18n.MARK_OPEN) for line in lines[2:4]), lines

"""The decisive test of the marking (issue 23) for stages 2 and 3 (course/notebook/checks/multi_gpu,
multi_node, mn_local, mn_ranks): their checks, on the solutions and on every planted mistake of
tests/test_checks.py, run under the pseudo-locale, where every line a student sees must carry its
markers (tests/test_i18n_pseudo.py does stage 1). The tables are test_checks' own, read here.

Stage 2 and stage 3's learning_rate_schedule and resource_request run in this process; the other
stage-3 checks need MPI ranks (integration): one mistake per check in make test, the rest extended
(the words of each are test_checks.test_a_stage_3_mistake_fails_exactly_its_check's, in English)."""

from __future__ import annotations

import re

import pytest

from course import i18n
from course.instructor.i18n_catalog import MARKED
from course.lessons.core import multi_gpu
from course.notebook import checks
from course.notebook.checks import CheckFailed
from tests import test_checks
from tests.helpers import (
    STAGE_3_CELLS,
    check_cells,
    core_cases,
    notebook_module,
    replaced_once,
)
from tests.solutions import solution_functions
from tests.test_i18n_pseudo import unmarked
from tests.test_i18n_pseudo_scaling import bare

# (test of tests/test_checks.py whose parametrization lists stage 2's planted mistakes, check)
STAGE_2 = [
    (test_checks.test_make_train_iterators_mistakes, multi_gpu.train_iterators),
    (test_checks.test_make_devices_mistakes, multi_gpu.devices),
    (test_checks.test_scaled_learning_rate_that_is_not_linear, multi_gpu.learning_rate),
]


def _table(test) -> list[tuple[str, object]]:
    """(id, parameter set) of each case of `test`'s parametrization, with its marks: the id
    test_checks gives it, else its mistake's name."""
    [mark] = [mark for mark in test.pytestmark if mark.name == "parametrize"]
    cases = [case if hasattr(case, "marks") else pytest.param(*case) for case in mark.args[1]]
    ids = mark.kwargs.get("ids") or [case.values[0].__name__ for case in cases]
    return list(zip(ids, cases, strict=True))


STAGE_2_CASES = [
    pytest.param(check, *case.values, id=f"{check.__name__}: {name}")
    for test, check in STAGE_2
    for name, case in _table(test)
] + [
    pytest.param(
        multi_gpu.trainer, (old, new, hidden), words, marks=case.marks, id=f"trainer: {name}"
    )
    for name, case in _table(test_checks.test_multi_gpu_trainer_mistakes)
    for old, new, words, hidden in [case.values]
]
# The cells of notebook 03 whose checks are in this group (check_run_lines is
# course.lessons.run_part.checks').
CELLS = tuple(cell for cell in STAGE_3_CELLS if cell != "check_run_lines")
# The checks of stage 3 that run in this process, and the mistakes that fail them.
LOCAL = ("check_learning_rate_schedule", "check_resource_request")
LOCAL_CASES = [case for case, (_, cell, _) in test_checks.STAGE_3_MISTAKES.items() if cell in LOCAL]
# On MPI ranks: the planted mistakes, and the attacks on the checks' judgement (by check name).
RANKED = {
    **{
        case: (planted, cell, words)
        for case, (planted, cell, words) in test_checks.STAGE_3_MISTAKES.items()
        if cell not in LOCAL
    },
    **{
        case: ((name, source), f"check_{check}", words)
        for case, (name, source, check, words) in test_checks.STAGE_3_ATTACKS.items()
    },
}
# One case per check in make test (test_checks.STAGE_3_CORE's, and one attack for the
# communicator, which has no planted mistake); the others in make test-extended.
RANKED_CORE = (test_checks.STAGE_3_CORE & set(RANKED)) | {
    "a communicator named NaiveCommunicator that exchanges nothing"
}


@pytest.fixture(autouse=True)
def pseudo_locale(monkeypatch):
    monkeypatch.setenv(i18n.VARIABLE, i18n.PSEUDO)


@pytest.fixture(scope="module")
def stage_2(tmp_path_factory):
    return notebook_module(tmp_path_factory.mktemp("stage2_pseudo"), "multi_gpu")


def translated_lines(message: str, hint_marked: bool = True) -> list[str]:
    """The lines of a failure that never went through `_()`; the hint's are left out when it
    comes from a module not marked yet (`hint_marked` false)."""
    if not hint_marked:
        message = message.split("\n  -> ", 1)[0]
    return unmarked(message)


def test_the_cases_are_all_of_test_checks_stage_2_and_3_mistakes():
    assert len(STAGE_2_CASES) == 24, len(STAGE_2_CASES)
    assert len(LOCAL_CASES) + len(RANKED) == len(test_checks.STAGE_3_MISTAKES) + len(
        test_checks.STAGE_3_ATTACKS
    )
    checked = {cell for _, cell, _ in RANKED.values()}
    assert checked | set(LOCAL) == set(CELLS), checked
    assert sorted(RANKED[case][1] for case in RANKED_CORE) == sorted(set(CELLS) - set(LOCAL))


@pytest.mark.parametrize("check,mistake,words", STAGE_2_CASES)
def test_every_line_of_a_stage_2_mistakes_failure_is_translated(stage_2, check, mistake, words):
    if check is multi_gpu.trainer:
        old, new, hidden = mistake
        function = test_checks.planted(stage_2.build_trainer, old, new)
        inputs = test_checks.HIDDEN_TRAINER_2 if hidden else {}
    else:
        function, inputs = mistake, {}
    with pytest.raises(CheckFailed) as raised:
        check(function, **inputs)
    message = str(raised.value)
    assert re.search(words, bare(message)), message  # the same failure as in English
    assert not translated_lines(message), message


def test_the_passing_lines_of_stage_2_are_translated(stage_2, capsys):
    multi_gpu.train_iterators(stage_2.make_train_iterators)
    multi_gpu.devices(stage_2.make_devices)
    multi_gpu.learning_rate(stage_2.scaled_learning_rate)
    multi_gpu.trainer(stage_2.build_trainer)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 4 and all(line.startswith("OK: ") for line in lines), lines
    assert not unmarked("\n".join(lines)), lines


def _failed(module, cell: str) -> str | None:
    """The CheckFailed message of notebook 03's `cell` (visible and hidden lines) on `module`'s
    functions, None when it passes."""
    try:
        exec(check_cells("multi_node")[cell], {"checks": checks, **vars(module)})
    except CheckFailed as e:
        return str(e)
    return None


def _planted(folder, planted: tuple) -> object:
    """Notebook 03's functions with one planted: (name, old, new) or (name, whole source)."""
    import textwrap

    if len(planted) == 3:
        name, old, new = planted
        source = replaced_once(solution_functions("multi_node")[name], old, new)
    else:
        name, source = planted
        source = textwrap.dedent(source).lstrip()
    return notebook_module(folder, "multi_node", **{name: source})


@pytest.mark.parametrize("case", LOCAL_CASES)
def test_every_line_of_a_stage_3_local_mistakes_failure_is_translated(tmp_path, case):
    planted, cell, words = test_checks.STAGE_3_MISTAKES[case]
    message = _failed(_planted(tmp_path, planted), cell)
    assert message is not None and words in bare(message), message
    # resource_request's hint is the directive parser's (course/lessons/run_part/directives.py)
    hint_marked = (
        cell != "check_resource_request" or "course/lessons/run_part/directives.py" in MARKED
    )
    assert not translated_lines(message, hint_marked), message


def test_the_passing_lines_of_stage_3_local_checks_are_translated(tmp_path, capsys):
    module = notebook_module(tmp_path, "multi_node")
    assert [_failed(module, cell) for cell in LOCAL] == [None, None]
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 4 and all(line.startswith("OK: ") for line in lines), lines
    assert not unmarked("\n".join(lines)), lines


@pytest.mark.integration
def test_the_passing_lines_of_stage_3_ranked_checks_are_translated(tmp_path, capsys):
    module = notebook_module(tmp_path, "multi_node")
    assert [_failed(module, cell) for cell in CELLS if cell not in LOCAL] == [None] * 5
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 10 and all(line.startswith("OK: ") for line in lines), lines
    assert not unmarked("\n".join(lines)), lines
    assert "simulated nodes" in lines[2] and "round-robin" in lines[3]  # both layouts' words


@pytest.mark.integration
@pytest.mark.parametrize("case", core_cases(RANKED, RANKED_CORE))
def test_every_line_of_a_stage_3_ranked_mistakes_failure_is_translated(tmp_path, case):
    planted, cell, words = RANKED[case]
    message = _failed(_planted(tmp_path, planted), cell)
    assert message is not None and words in bare(message), message
    assert not translated_lines(message), message

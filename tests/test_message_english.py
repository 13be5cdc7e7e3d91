"""The instructor's English beside a Japanese student's message (grades-details.csv's message_en,
issues 23 and 45): every planted mistake of stages 1, 3, 4 and 5 that the pseudo-locale tests
replay runs here in English and in Japanese, and the Japanese failure, rendered in English from the
record its message keeps (course.contracts.message), must be the English failure, word for word."""

from __future__ import annotations

import csv
import json
import re

import nbformat
import pytest

from course import i18n
from course.contracts import message
from course.instructor import grade_report, verify_test
from course.instructor.editions import ASSIGNMENTS
from course.instructor.verify_protocol import (
    SAID_KEY,
    ProtocolError,
    Reply,
    Verdict,
    VerificationError,
)
from course.lessons.step_time import allreduce as allreduce_checks
from course.notebook.checks import CheckFailed
from tests import (
    allreduce_students,
    exchange_students,
    model_parallel_students,
    scaling_students,
    test_i18n_pseudo,
    test_i18n_pseudo_04_05,
    test_i18n_pseudo_allreduce,
    test_i18n_pseudo_scaling,
)
from tests.helpers import notebook_module
from tests.test_checks import planted

JA = next(assignment for assignment in ASSIGNMENTS if assignment.endswith("_ja"))
# Two of stage 1's mistakes train for long: make test-extended reads those back (their words come
# from the catalog as the others' do, and the pseudo-locale test replays them in make test).
_TRAINING = ("build_trainer: Throughput timed", "make_model_and_optimizer: moved the weights")
STAGE_1 = [
    pytest.param(
        *case.values[:4],
        id=case.id,
        marks=pytest.mark.extended if case.id.startswith(_TRAINING) else (),
    )
    for case in test_i18n_pseudo.CASES
]
LATER = [
    *[pytest.param(*case.values[:2], id=case.id) for case in test_i18n_pseudo_scaling.CASES],
    *[
        pytest.param(check, wrong, id=f"{wrong.__name__}: {said[:30]}")
        for check, wrong, said in test_i18n_pseudo_04_05.CASES
    ],
    *[
        pytest.param(allreduce_checks.cost_model, wrong, id=wrong.__name__)
        for wrong, _said in test_i18n_pseudo_allreduce.PLANTED
    ],
]
# The folder a stage-1 check trains in is new each time it runs.
_CHECK_FOLDER = re.compile(r"/tmp/course-check-\w+")


def said(check, function, lang: str, monkeypatch) -> tuple[str, str]:
    """What the check said in `lang`, and that rendered in English from its record."""
    monkeypatch.setenv(i18n.VARIABLE, lang)
    with pytest.raises(CheckFailed) as failed:
        check(function)
    english = i18n.render(message.of_exception(failed.value), "en")
    shown, rendered = (
        _CHECK_FOLDER.sub("/tmp/course-check-X", text) for text in (str(failed.value), english)
    )
    return shown, rendered


@pytest.fixture(scope="module")
def stage_1(tmp_path_factory):
    return notebook_module(tmp_path_factory.mktemp("stage1_back"), "single_gpu")


@pytest.fixture(scope="module")
def later(tmp_path_factory):
    """Notebooks 03, 04 and 05's solutions, which the planted functions call for what they get
    right."""
    for students in (scaling_students, allreduce_students, exchange_students):
        students.load(tmp_path_factory.mktemp(students.__name__.rsplit(".", 1)[-1]))
    model_parallel_students.load(tmp_path_factory.mktemp("beyond"))


def test_the_cases_are_the_pseudo_locale_tests_planted_mistakes():
    assert (len(STAGE_1), len(LATER)) == (23, 16 + 63 + 5), (len(STAGE_1), len(LATER))


@pytest.mark.parametrize("check,function,old,new", STAGE_1)
def test_a_stage_1_failure_in_japanese_reads_back_as_the_english_one(
    stage_1, check, function, old, new, monkeypatch
):
    wrong = planted(getattr(stage_1, function), old, new)
    (english, _same), (japanese, rendered) = (
        said(check, wrong, lang, monkeypatch) for lang in ("en", "ja")
    )
    assert japanese != english
    assert rendered == english, japanese


@pytest.mark.usefixtures("later")
@pytest.mark.parametrize("check,wrong", LATER)
def test_a_later_stages_failure_in_japanese_reads_back_as_the_english_one(
    check, wrong, monkeypatch
):
    (english, _same), (japanese, rendered) = (
        said(check, wrong, lang, monkeypatch) for lang in ("en", "ja")
    )
    assert japanese != english
    assert rendered == english, japanese


def test_a_students_own_words_and_english_stay_as_they_were():
    """Text the kit did not make through `_()` has no record but itself: it is shown as it is."""
    for text in (
        "日本語の自由な文\n-> ヒント",
        "CheckFailed: the trainer has no snapshot extension",
    ):
        assert i18n.render(message.record_of(text), "en") == text
        assert i18n.english(text) == text
    assert message.of_exception(ValueError("値が不正です")) == "値が不正です"


def test_messages_joined_outside_the_catalog_render_in_english_part_by_part(monkeypatch):
    """A data value inside a message, a list joined in the student's language, a translated
    joint between two hints, and a CourseError's hint after its arrow."""
    monkeypatch.setenv(i18n.VARIABLE, "ja")
    failure = i18n._("exit status {status}").format(status=3)
    none = i18n._("no error message")
    assert "3" in failure and failure != "exit status 3"
    listed = i18n.listed([1.5, 2, "a"])
    assert listed == "1.5\u30012\u3001a"
    either = i18n._("; or ").join([none, failure])
    error = VerificationError(failure + i18n._("; or ") + listed, either)
    assert i18n.render(message.of_exception(error), "en") == (
        "exit status 3; or 1.5, 2, a\n  -> no error message; or exit status 3"
    )


def test_a_record_crosses_the_verifiers_protocol_and_is_refused_when_it_is_no_record(monkeypatch):
    monkeypatch.setenv(i18n.VARIABLE, "ja")
    failure = i18n._("exit status {status}").format(status=9)
    reply = Reply.from_json(Reply(None, failure).to_json())
    assert reply.failure == failure and i18n.english(reply.failure) == "exit status 9"
    verdict = Verdict("01_single_gpu.ipynb", "d", said={"check_iterators": failure.record})
    assert Verdict.from_dict(json.loads(json.dumps(verdict.to_dict()))) == verdict
    with pytest.raises(ProtocolError, match="said"):
        Verdict.from_dict({**verdict.to_dict(), "said": {"check_iterators": 3}})
    with pytest.raises(ValueError, match="not a message's record"):
        i18n.render({"ids": "exit status {status}"}, "en")


def test_grades_details_carry_the_english_beside_the_students_words(tmp_path):
    japanese = i18n.in_language("ja", "exit status {status}").format(status=9)
    outcomes = [
        grade_report.Outcome(
            "hanako",
            True,
            1.0,
            parts=[
                grade_report.Part(
                    "01_single_gpu",
                    "check_iterators",
                    0.0,
                    2.0,
                    f"CheckFailed: {japanese}",
                    english=f"CheckFailed: {i18n.english(japanese)}",
                )
            ],
            assignment=JA,
        ),
        grade_report.Outcome("taro", False, 1.0, failure=japanese, assignment=JA),
    ]
    path = tmp_path / "grades-details.csv"
    grade_report.write_details(outcomes, path)
    with open(path) as f:
        rows = list(csv.DictReader(f))
    assert [(row["student"], row["message"], row["message_en"]) for row in rows] == [
        ("hanako", f"CheckFailed: {japanese}", "CheckFailed: exit status 9"),
        ("taro", f"NOT GRADED: {japanese}", "NOT GRADED: exit status 9"),
    ]


def test_an_autograded_error_renders_in_english_from_its_cells_record(tmp_path):
    """The exception's name ("CheckFailed: ") is nbgrader's, before the message; without the
    grader's record the student's words are the English column's too."""
    japanese = i18n.in_language("ja", "there is no {stage} run in {folder}/").format(
        stage="multi_gpu", folder="runs"
    )
    cells = []
    for grade_id, said in (("check_efficiency", japanese.record), ("check_rate", None)):
        cell = nbformat.v4.new_code_cell(
            "check()",
            metadata={"nbgrader": {"grade": True, "grade_id": grade_id, "points": 3}},
        )
        if said is not None:
            cell.metadata[SAID_KEY] = said
        cell.outputs = [nbformat.v4.new_output("error", ename="CheckFailed", evalue=japanese)]
        cells.append(cell)
    notebook = tmp_path / "02_multi_gpu.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=cells), notebook)
    assert grade_report._messages(notebook) == {
        "check_efficiency": (
            f"CheckFailed: {japanese}",
            "CheckFailed: there is no multi_gpu run in runs/",
        ),
        "check_rate": (f"CheckFailed: {japanese}",) * 2,
    }


def test_a_record_from_the_students_process_is_kept_only_when_it_renders_their_words(
    monkeypatch,
):
    """The kit's message raised where the student's functions run (a closed model's) keeps its
    English; a record the student's code made up to put other words in the instructor's column
    is dropped, and their words are shown as they are."""
    monkeypatch.setenv(i18n.VARIABLE, "ja")
    closed = i18n._("exit status {status}").format(status=3)
    kept = verify_test._rebuilt(
        {"name": "RuntimeError", "message": str(closed), "notes": [], "said": closed.record}
    )
    assert isinstance(kept, RuntimeError) and str(kept) == closed
    assert i18n.render(message.of_exception(kept), "en") == "exit status 3"
    forged = {"id": "the function passed every test", "params": {}}
    for said in (forged, {"id": 3}, ["a list"]):
        dropped = verify_test._rebuilt(
            {"name": "RuntimeError", "message": str(closed), "notes": [], "said": said}
        )
        assert message.of_exception(dropped) == closed

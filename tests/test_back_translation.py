"""The instructor's English beside a Japanese student's message (grades-details.csv's message_en,
issue 23): every planted mistake of stages 1, 3, 4 and 5 that the pseudo-locale tests replay runs
here in English and in Japanese, and the Japanese failure read back from the catalog must be the
English failure, word for word."""

from __future__ import annotations

import csv
import re
import time

import nbformat
import pytest

from course import i18n
from course.instructor import back_translation, grade_report
from course.instructor.editions import ASSIGNMENTS
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


def said(check, function, lang: str, monkeypatch) -> str:
    monkeypatch.setenv(i18n.VARIABLE, lang)
    with pytest.raises(CheckFailed) as failed:
        check(function)
    return _CHECK_FOLDER.sub("/tmp/course-check-X", str(failed.value))


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
    english, japanese = (said(check, wrong, lang, monkeypatch) for lang in ("en", "ja"))
    assert japanese != english
    assert back_translation.english(japanese, "ja") == english, japanese


@pytest.mark.usefixtures("later")
@pytest.mark.parametrize("check,wrong", LATER)
def test_a_later_stages_failure_in_japanese_reads_back_as_the_english_one(
    check, wrong, monkeypatch
):
    english, japanese = (said(check, wrong, lang, monkeypatch) for lang in ("en", "ja"))
    assert japanese != english
    assert back_translation.english(japanese, "ja") == english, japanese


def test_english_stays_and_what_the_catalog_does_not_have_is_kept_as_it_was():
    english = "CheckFailed: the trainer has no snapshot extension"
    assert back_translation.english(english, "ja") == english
    assert (
        back_translation.english("日本語の自由な文\n-> ヒント", "ja")
        == "日本語の自由な文\n-> ヒント"
    )
    assert back_translation.english("何か", "en") == "何か"


def test_messages_joined_outside_the_catalog_read_back_in_parts():
    """A data value inside a message, two messages joined by "; ", and a hint's arrow."""
    failure = i18n.in_language("ja", "exit status {status}").format(status=3)
    none = i18n.in_language("ja", "no error message")
    assert "{" not in failure and failure != "exit status 3"
    line = f"VerificationError: {failure}; {none}\n  -> {none}"
    assert back_translation.english(line, "ja") == (
        "VerificationError: exit status 3; no error message\n  -> no error message"
    )


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
                    english=f"CheckFailed: {back_translation.english(japanese, 'ja')}",
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


def test_an_autograded_error_reads_back_after_its_exception_name(tmp_path):
    """The exception's name ("CheckFailed: ") is nbgrader's, before the message: a placeholder at a
    message's start must not take it in (grading saw "there is no multi_gpu run in CheckFailed:
    runs/")."""
    japanese = i18n.in_language("ja", "there is no {stage} run in {folder}/").format(
        stage="multi_gpu", folder="runs"
    )
    cell = nbformat.v4.new_code_cell(
        "check()",
        metadata={"nbgrader": {"grade": True, "grade_id": "check_efficiency", "points": 3}},
    )
    cell.outputs = [nbformat.v4.new_output("error", ename="CheckFailed", evalue=japanese)]
    notebook = tmp_path / "02_multi_gpu.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[cell]), notebook)
    assert grade_report._messages(notebook, "ja") == {
        "check_efficiency": (
            f"CheckFailed: {japanese}",
            "CheckFailed: there is no multi_gpu run in runs/",
        )
    }


def test_a_singular_and_a_plural_with_one_translation_read_back_by_their_number():
    plural = (
        "the training made no step for {minutes:g} minutes (last step at iteration {iteration}): "
        "{how}"
    )
    singular = plural.replace("minutes (", "minute (")
    how = i18n.in_language("ja", "no error message")
    for minutes, english in [(1, singular), (10, plural)]:
        japanese = i18n.in_language("ja", plural).format(minutes=minutes, iteration=1, how=how)
        assert back_translation.english(japanese, "ja") == english.format(
            minutes=minutes, iteration=1, how="no error message"
        )


def test_a_long_line_of_a_students_own_error_is_given_up_quickly():
    """A student's exception passes into grades-details.csv as it is: a long line with many spaces
    and no message of the catalog must not make the search over split points explode (the lines
    are cut at the kit's joints, and pieces already tried are remembered)."""
    line = "値 " + str(list(range(300))) + " は不正です"
    started = time.process_time()
    assert back_translation.english(line, "ja") == line
    assert time.process_time() - started < 10  # CPU time: hundreds of seconds before the cap

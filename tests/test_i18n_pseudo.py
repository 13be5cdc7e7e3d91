"""The decisive test of the marking (issue 23): stage 1's checks, on the solutions and on every
planted mistake of tests/test_checks.py, run under the pseudo-locale, where `_()` wraps each line
of a translated message in markers. Every line a student sees (the OK lines, each line of a failure,
the notes on their own exceptions) must carry them: a line without is one that never went through
`_()` and would stay English in the Japanese edition. Here only (no forked child): the messages are
the judge's, and the judge runs in this process either way."""

from __future__ import annotations

import pytest

from course import i18n
from course.lessons.core import single
from course.notebook.checks import CheckFailed
from tests import test_checks
from tests.helpers import notebook_module
from tests.test_checks import planted

# (test of tests/test_checks.py whose parametrization lists the planted mistakes, check, function)
MISTAKES = [
    (test_checks.test_make_iterators_mistakes, single.iterators, "make_iterators"),
    (
        test_checks.test_make_model_and_optimizer_mistakes,
        single.model_and_optimizer,
        "make_model_and_optimizer",
    ),
    (test_checks.test_build_trainer_mistakes, single.trainer, "build_trainer"),
    (test_checks.test_add_snapshots_mistakes, single.snapshots, "add_snapshots"),
]
CASES = [
    pytest.param(check, function, old, new, words, id=f"{function}: {words[:40]}")
    for test, check, function in MISTAKES
    for mark in test.pytestmark
    if mark.name == "parametrize"
    for old, new, words in mark.args[1]
]


@pytest.fixture(scope="module")
def stage_1(tmp_path_factory):
    return notebook_module(tmp_path_factory.mktemp("stage1_pseudo"), "single_gpu")


@pytest.fixture(autouse=True)
def pseudo_locale(monkeypatch):
    monkeypatch.setenv(i18n.VARIABLE, i18n.PSEUDO)


def unmarked(text: str) -> list[str]:
    """The non-blank lines of `text` without the pseudo-locale's markers."""
    return [
        line
        for line in text.splitlines()
        if line.strip() and not (i18n.MARK_OPEN in line and i18n.MARK_CLOSE in line)
    ]


def test_the_cases_are_all_of_test_checks_stage_1_mistakes():
    assert len(CASES) == 23, len(CASES)


@pytest.mark.parametrize("check,function,old,new,words", CASES)
def test_every_line_of_a_planted_mistakes_failure_is_translated(
    stage_1, check, function, old, new, words
):
    with pytest.raises(CheckFailed, match=words) as raised:  # the same failure as in English
        check(planted(getattr(stage_1, function), old, new))
    message = str(raised.value)
    assert not unmarked(message), message


def test_the_passing_lines_are_translated(stage_1, capsys):
    single.iterators(stage_1.make_iterators)
    single.model_and_optimizer(stage_1.make_model_and_optimizer)
    single.trainer(stage_1.build_trainer)
    single.snapshots(stage_1.add_snapshots)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 4 and all(line.startswith("OK: ") for line in lines), lines
    assert not unmarked("\n".join(lines)), lines


def test_the_notes_on_a_students_own_errors_are_translated(stage_1):
    bare = planted(
        stage_1.make_iterators, "chainer.iterators.SerialIterator(train", "SerialIterator(train"
    )
    with pytest.raises(NameError) as raised:
        single.iterators(bare)
    stub = planted(
        stage_1.make_iterators,
        "    train_iter =",
        "    raise NotImplementedError()\n    train_iter =",
    )
    with pytest.raises(NotImplementedError) as stubbed:
        single.iterators(stub)
    notes = [*raised.value.__notes__, *stubbed.value.__notes__]
    assert len(notes) == 2 and not unmarked("\n".join(notes)), notes
    assert "PUT YOUR CODE HERE" in notes[1]

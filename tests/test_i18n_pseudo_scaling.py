"""The marking of notebook 03's derivation checks (course.lessons.step_time.scaling, its known
mistakes and its observer's closed reference), as tests/test_i18n_pseudo.py does stage 1's: every
planted mistake of tests/test_scaling_checks.py, read from its tables, under the pseudo-locale.
Every line a student sees carries the markers: the failures, the OK lines and the words of the
kit's closed arithmetic. Here only (no forked child): the messages are the judge's."""

from __future__ import annotations

import pytest

from course import i18n
from course.lessons.step_time import scaling as checks
from course.notebook.checks import CheckFailed
from tests import scaling_students as students
from tests import test_scaling_checks
from tests.test_i18n_pseudo import unmarked


def table(test, argnames: str) -> list:
    """The cases of `test`'s parametrization over `argnames`."""
    [mark] = [m for m in test.pytestmark if m.name == "parametrize" and m.args[0] == argnames]
    return list(mark.args[1])


def bare(text: str) -> str:
    """`text` without the pseudo-locale's markers: the English words as they read."""
    return text.replace(i18n.MARK_OPEN, "").replace(i18n.MARK_CLOSE, "")


CASES = [
    pytest.param(check, wrong, said, id=wrong.__name__)
    for test in (
        test_scaling_checks.test_each_planted_mistake_fails_its_check_naming_it,
        test_scaling_checks.test_an_answer_of_another_shape_is_named,
    )
    for check, wrong, said in table(test, "check, wrong, said")
]


@pytest.fixture(scope="module", autouse=True)
def solved(tmp_path_factory):
    return students.load(tmp_path_factory.mktemp("solved_pseudo"))


@pytest.fixture(autouse=True)
def pseudo_locale(monkeypatch):
    monkeypatch.setenv(i18n.VARIABLE, i18n.PSEUDO)


def test_the_cases_are_all_of_test_scaling_checks_mistakes():
    assert len(CASES) == 16, len(CASES)


@pytest.mark.parametrize("check, wrong, said", CASES)
def test_every_line_of_a_planted_mistakes_failure_is_translated(check, wrong, said):
    with pytest.raises(CheckFailed) as failed:
        check(wrong)
    message = str(failed.value)
    assert said in message, message  # the same failure as in English, its words marked
    assert not unmarked(message), message


def test_a_wrong_answer_that_two_mistakes_explain_names_both_translated():
    """The words between two known mistakes go through gettext too."""
    hint = checks._diagnosis(
        [{"x": 2.0}],
        lambda: {"x": 1.0},
        (("A", lambda: {"x": 2.0}), ("B", lambda: {"x": 2.0})),
        [()],
        0,
        "?",
    )
    assert (
        hint
        == f"{i18n.MARK_OPEN}it looks like A{i18n.MARK_OPEN}; or{i18n.MARK_CLOSE}B{i18n.MARK_CLOSE}"
    )


def test_the_passing_lines_are_translated(solved, capsys):
    checks.shares(solved.step_shares)
    checks.plan(solved.run_plan)
    checks.exchange(solved.implied_exchange)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3 and all(line.startswith("OK: ") for line in lines), lines
    assert not unmarked("\n".join(lines)), lines


def test_the_kits_closed_arithmetic_says_so_translated():
    with pytest.raises(RuntimeError) as raised:
        checks.shares(students.shares_from_the_kit)
    said = [str(raised.value), *raised.value.__notes__]
    assert "course.lessons.step_time.scalingmodel) is closed" in said[0]
    assert len(said) == 2 and not unmarked("\n".join(said)), said

"""The marking of the stage-3 run part's check (course/lessons/run_part/checks.py), as
tests/test_i18n_pseudo.py does stage 1's: the planted mistakes of tests/test_run_part.py, read
from its table, under the pseudo-locale. Every line a student sees carries the markers: each line
of a failure, and the OK line. Here only: the messages are the judge's.

Like tests/test_run_part.py, it asks Open MPI's mpirun for the map of each launch line (no rank
starts), so it is in the fast tier, not the unit one; a case takes a second or two, so one is in
make test and the others are extended (test_run_part.py runs them all in English)."""

from __future__ import annotations

import pytest

from course import i18n
from course.lessons.run_part import checks as run_part_checks
from course.notebook.checks import CheckFailed
from tests import test_run_part
from tests.helpers import core_cases
from tests.test_i18n_pseudo import unmarked
from tests.test_i18n_pseudo_scaling import bare

pytestmark = pytest.mark.integration

# Mistakes whose failure is course.lessons.run_part.placement's (mpirun refused the line; a launch
# option
# the check does not know; a rank file): that module is not marked for translation (yet), so its
# words stay English here.
PLACEMENTS = (
    "an option spelt with one dash",
    "an option the check does not know",
    "a rank file",
    "cores asked for, and another binding",
)
MISTAKES = {name: case for name, case in test_run_part.MISTAKES.items() if name not in PLACEMENTS}
CORE = {"the data set linked, not copied"}


@pytest.fixture(autouse=True)
def pseudo_locale(monkeypatch):
    monkeypatch.setenv(i18n.VARIABLE, i18n.PSEUDO)


def test_the_cases_are_the_run_part_mistakes_of_this_module():
    assert len(MISTAKES) == 17 and set(PLACEMENTS) < set(test_run_part.MISTAKES)


@pytest.mark.parametrize("mistake", core_cases(MISTAKES, CORE))
def test_every_line_of_a_planted_mistakes_failure_is_translated(mistake, tmp_path):
    old, new, words, *more = MISTAKES[mistake]
    with pytest.raises(CheckFailed) as failed:
        run_part_checks.run_part(test_run_part._run_lines(tmp_path, (old, new), *more))
    message = str(failed.value)
    assert words in bare(message), message  # the same failure as in English
    assert not unmarked(message), message


def test_the_passing_line_is_translated(tmp_path, capsys):
    run_part_checks.run_part(test_run_part._run_lines(tmp_path))
    [line] = capsys.readouterr().out.splitlines()
    assert line.startswith("OK: ") and not unmarked(line), line

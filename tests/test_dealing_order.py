"""make test's groups are dealt to pytest-xdist's workers longest first (tests/conftest.py), so that
the run does not end on one long group while the other workers idle."""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.helpers import PYTHON, ROOT

# Each test starts pytest on the kit's own tests: half a minute on a busy machine, not a unit test.
pytestmark = pytest.mark.integration


def pytest_run(*args: str) -> list[str]:
    """The test ids pytest printed, in its order, for `args` (the unit tier: nothing started)."""
    run = subprocess.run(
        [PYTHON, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COURSE_TEST_TIER": "unit"},
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return [line for line in run.stdout.splitlines() if "::" in line]


def files(ids: list[str]) -> list[str]:
    """The files of `ids` in their first order."""
    return list(dict.fromkeys(line.split("::")[0].split()[-1] for line in ids))


def test_the_groups_are_collected_longest_first_then_by_what_they_start():
    collected = pytest_run(
        "--collect-only",
        "-q",
        "tests/test_joblog.py",  # unit tests
        "tests/test_exchange.py",  # brief integration tests
        "tests/test_notebooks.py",  # reads the solved student's run
        "tests/test_resume.py",  # an end-to-end run
        "tests/test_bundle_term.py",  # one long end-to-end run
        "tests/test_slurm_ja.py",  # the clusters' group
    )
    assert files(collected) == [
        "tests/test_slurm_ja.py",
        "tests/test_bundle_term.py",
        "tests/test_resume.py",
        "tests/test_notebooks.py",
        "tests/test_exchange.py",
        "tests/test_joblog.py",
    ]


def test_xdist_deals_the_groups_in_that_order_not_by_their_number_of_tests():
    """pytest-xdist's default under --dist loadgroup deals the groups with the most tests first:
    the long single-test groups would be dealt last. One worker runs them in the order dealt."""
    ran = pytest_run(
        "-n",
        "1",
        "--dist",
        "loadgroup",
        "-v",
        "-m",
        "not integration and not slow",
        "tests/test_joblog_end.py",  # fewer tests than the next file: dealt first all the same
        "tests/test_i18n_lint.py",
    )
    order = files([line for line in ran if "PASSED" in line or "SKIPPED" in line])
    assert order == ["tests/test_joblog_end.py", "tests/test_i18n_lint.py"], order

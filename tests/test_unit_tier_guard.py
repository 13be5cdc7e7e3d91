"""The unit tier's promise is checked (tests/conftest.py's guard): under COURSE_TEST_TIER=unit a
test that starts MPI ranks, a job, `course launch` or an nbgrader app fails at once, naming the
marker to add."""

from __future__ import annotations

import os
import subprocess
import xml.etree.ElementTree as ElementTree

import pytest

from tests.helpers import PYTHON, ROOT

pytestmark = pytest.mark.integration  # it starts pytest in a process of its own

# Run with the guard: each test starts one thing; only the last ones start what a unit test may.
UNDER_THE_GUARD = """
import subprocess
import sys

import pytest
from nbgrader.apps.baseapp import NbGrader

REFUSED = {
    "mpiexec": ["mpiexec", "-n", "1", "true"],
    "mpirun by its path": ["/usr/bin/mpirun", "-n", "1", "true"],
    "course launch": [sys.executable, "-m", "course", "launch", "--", "true"],
    "course submit": ["course", "submit", "jobs/run_single_gpu_training.sh"],
    "local scheduler": [sys.executable, "-m", "course.cluster.supervisor", "spec.json"],
    "a job script": ["bash", "jobs/run_single_gpu_training.sh"],
    "qsub": ["qsub", "-j", "oe", "job.sh"],
    "sbatch": ["/usr/bin/sbatch", "job.sh"],
    "nbgrader": [sys.executable, "-m", "nbgrader", "autograde", "distributed_training"],
    "a shell line": "mpiexec -n 2 true",
}
ALLOWED = {"a program": ["true"], "python": [sys.executable, "-c", "pass"]}


@pytest.mark.parametrize("argv", [*REFUSED.values(), *ALLOWED.values()], ids=[*REFUSED, *ALLOWED])
def test_start(argv):
    subprocess.run(argv, shell=isinstance(argv, str), capture_output=True)


def test_an_nbgrader_app_in_this_process():
    NbGrader().initialize([])
"""


def test_the_unit_tier_refuses_mpi_jobs_and_nbgrader_naming_the_marker(tmp_path):
    (tmp_path / "test_under_the_guard.py").write_text(UNDER_THE_GUARD)
    report = tmp_path / "report.xml"
    subprocess.run(
        [PYTHON, "-m", "pytest", "-p", "tests.conftest", "-p", "no:cacheprovider", "-q"]
        + [f"--junitxml={report}", "--rootdir", str(tmp_path), str(tmp_path)],
        cwd=ROOT,  # where `tests` imports from
        env={**os.environ, "COURSE_TEST_TIER": "unit"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    failures = {
        case.get("name"): failure.get("message", "")
        for case in ElementTree.parse(report).iter("testcase")
        for failure in case.iter("failure")
    }
    names = [case.get("name") for case in ElementTree.parse(report).iter("testcase")]
    refused = [name for name in names if "a program" not in name and "python" not in name]
    assert sorted(failures) == sorted(refused) and len(refused) == 11, failures
    assert all("mark it @pytest.mark.integration" in message for message in failures.values())
    assert "starts MPI ranks (mpiexec)" in failures["test_start[mpiexec]"]
    assert "starts a job (the local scheduler)" in failures["test_start[local scheduler]"]
    assert "starts an nbgrader app" in failures["test_an_nbgrader_app_in_this_process"]

"""The allreduce micro-benchmark job under the embedded scheduler, as `course submit` runs it:
ranks, algorithms taking turns, sealed files traced by their log lines, and the notebook's reader on
them. tests/test_slurm.py submits the same job to real Slurm."""

from __future__ import annotations

import shutil

import pytest

from course import costmodel
from course.notebook import allreduce_report
from tests.helpers import ROOT, python_ok
from tests.mpi_helpers import check_benchmark_job

pytestmark = pytest.mark.slow
JOB = "jobs/run_allreduce_benchmark.sh"


def test_the_benchmark_job_under_the_embedded_scheduler(tmp_path, quick_env):
    folder = tmp_path / "student"
    shutil.copytree(ROOT / "jobs", folder / "jobs")
    env = {
        **quick_env,
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "ROUNDS": "2",
    }  # the algorithms take turns
    python_ok(
        "-m", "course", "submit", JOB, "-l", "select=1:mpiprocs=2", cwd=folder, env=env, timeout=300
    )
    [log] = folder.glob("run_allreduce_benchmark.sh.o*")
    table = check_benchmark_job(folder, 2, log)
    # The fitted model is within a factor of 3 of the median where the messages fit in the caches.
    for s in table:
        alpha, beta = allreduce_report.fits(table)[(s.ranks, s.algorithm)]
        i = s.sizes.index(64 * 1024)
        assert (
            1 / 3
            < costmodel.allreduce_seconds(s.algorithm, s.ranks, s.sizes[i], alpha, beta)
            / s.median[i]
            < 3
        )

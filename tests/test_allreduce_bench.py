"""The allreduce micro-benchmark job under the embedded scheduler, as `course submit` runs it:
ranks, algorithms taking turns, sealed files traced by their log lines, and the notebook's reader on
them. tests/test_slurm.py submits the same job to real Slurm."""

from __future__ import annotations

import shutil

import pytest

from course.lessons.step_time import allreduce_report, costmodel
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
    # What the fit claims, whatever the load did to the times (a busy machine can put the 64 KiB
    # median three times off the model: CI saw it): the largest message takes longer than the
    # smallest, and the reader's (α, β) is the best fit in relative error to the medians it read, so
    # moving either parameter by 10% makes the fit worse.
    fitted = allreduce_report.fits(table)
    for s in table:
        assert s.median[-1] > s.median[0], s
        alpha, beta = fitted[(s.ranks, s.algorithm)]

        def error(a: float, b: float, s: allreduce_report.Series = s) -> float:
            return sum(
                (costmodel.allreduce_seconds(s.algorithm, s.ranks, n, a, b) / t - 1) ** 2
                for n, t in zip(s.sizes, s.median)
            )

        best = error(alpha, beta)
        for a, b in [
            (alpha * 1.1, beta),
            (alpha * 0.9, beta),
            (alpha, beta * 1.1),
            (alpha, beta * 0.9),
        ]:
            assert best < error(a, b), (s, alpha, beta)

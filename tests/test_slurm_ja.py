"""A job of the Japanese edition speaks Japanese on a real Slurm cluster without the student setting
anything (sbatch passes the submitter's environment, which here has no COURSE_LANG): its
jobs/site_env.sh sets it; the protocol lines the kit reads back stay English (tests/ja_jobs.py)."""

from __future__ import annotations

import subprocess

import pytest

from course.cluster import submit
from tests.ja_jobs import check_japanese_log, japanese_folder, without_language

pytestmark = [pytest.mark.slurm, pytest.mark.slow, pytest.mark.timeout(2400)]


def test_a_japanese_job_under_slurm_speaks_japanese(cluster, quick_env, tmp_path):
    folder = japanese_folder(tmp_path / "student", "slurm-cpu")
    run = subprocess.run(
        ["qsub", "-j", "oe", "-l", "select=1:mpiprocs=2", "jobs/run_allreduce_benchmark.sh"],
        cwd=folder,
        env=cluster.env({**without_language(quick_env), "ROUNDS": "2"}),
        capture_output=True,
        text=True,
        check=True,
    )
    job = submit.Job(run.stdout.strip(), folder, "qsub")
    assert job.wait(timeout=900, echo=None, poll=2) == 0, job.find_log().read_text()
    check_japanese_log(folder, job.find_log())

"""A job of the Japanese edition speaks Japanese on a real OpenPBS cluster without the student
setting anything: its jobs/site_env.sh carries COURSE_LANG=ja into the job, as PBS's qsub passes no
environment; the protocol lines the kit reads back stay English (tests/ja_jobs.py)."""

from __future__ import annotations

import pytest

from tests import pbs_profile
from tests.ja_jobs import check_japanese_log, japanese_folder, without_language

pytestmark = [pytest.mark.pbs, pytest.mark.slow, pytest.mark.timeout(2400)]


def test_a_japanese_job_under_openpbs_speaks_japanese(pbs, quick_env, tmp_path):
    env = without_language(quick_env)
    profile = pbs_profile.reedbush_profile(tmp_path / "reedbush-h-here.toml", env)
    folder = japanese_folder(tmp_path / "student", str(profile))
    job = pbs.start_qsub(
        folder,
        env,
        "-l",
        "select=1:mpiprocs=2",
        "-v",
        "ROUNDS=2,BUDGET=0.15",
        "jobs/run_allreduce_benchmark.sh",
    )
    assert job.wait(timeout=900, echo=None, poll=1) == 0, job.find_log().read_text()
    check_japanese_log(folder, job.find_log())

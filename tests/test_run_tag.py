"""The run folder a training script writes to (course.runtime.harness: parse_args and _run_tag)."""

from __future__ import annotations

import re
import time

import pytest

from course.cluster import hosts
from course.runtime import flags, harness

SECOND = "%Y%m%d-%H%M%S"


@pytest.fixture
def no_job(monkeypatch):
    """Outside any job, as a student's `course train` on a laptop."""
    for var in (
        "COURSE_RUN_TAG",
        "PBS_JOBID",
        "SLURM_JOB_ID",
        "SLURM_RESTART_COUNT",
        "SLURM_JOB_NAME",
    ):
        monkeypatch.delenv(var, raising=False)


def test_runs_started_in_the_same_second_get_folders_of_their_own(no_job):
    while True:  # retry the rare pair that straddles a second
        second = time.strftime(SECOND)
        folders = [harness.parse_args("single_gpu", []).out for _ in range(2)]
        if time.strftime(SECOND) == second:
            break
    assert folders[0] != folders[1]
    for folder in folders:
        tag = folder.rpartition("single_gpu-")[2]
        assert tag.startswith(second + "-"), (
            "the time keeps the folders in the order they were made"
        )
        assert re.fullmatch(r"[A-Za-z0-9._-]+", tag)


def test_a_job_names_its_run_the_same_on_every_rank(no_job, monkeypatch):
    monkeypatch.setenv("PBS_JOBID", "4242.pbs01")
    assert flags.run_tag() == flags.run_tag() == "4242.pbs01"
    monkeypatch.setenv(
        "COURSE_RUN_TAG", "4243.reedbush/pbsadmin0"
    )  # what course launch passes the ranks
    assert flags.run_tag() == "4243.reedbush_pbsadmin0"


def test_a_job_slurm_reran_names_its_attempt_in_its_run_and_record(no_job, monkeypatch):
    """A rerun does not overwrite what the attempt before it finished."""
    monkeypatch.setenv("SLURM_JOB_ID", "17")
    assert flags.run_tag() == "17" and "attempt" not in hosts.detect().record()
    monkeypatch.setenv("SLURM_RESTART_COUNT", "1")
    assert flags.run_tag() == "17-attempt2"
    assert hosts.detect().record() == {"id": "17", "scheduler": "slurm", "name": None, "attempt": 2}

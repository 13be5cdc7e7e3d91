"""A run that outlives its walltime: killed, submitted again, resumed from its snapshot, graded as
one run.

The jobs run under the real local scheduler (course.cluster.localsched), as `course submit` runs
them; tests/test_slurm.py does the same under real Slurm.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import pytest

from course import evidence
from course.cluster import submit
from course.contracts import jobend, joblog, results, stages
from course.runtime import checkpoint
from tests.helpers import student_folder

pytestmark = pytest.mark.slow
TRAIN_ARGS = "--model vgg --width 8 --batchsize 32 --epoch 4 --warmup 2"


def run_job(folder: Path, env: dict, walltime: str) -> submit.Job:
    stage = stages.get((folder / "stage").read_text())
    job = submit.submit(
        stage.job_path,
        env={"COURSE_TRAIN_ARGS": TRAIN_ARGS},
        options=["-l", f"walltime={walltime}"],
        scheduler="local",
        workdir=folder,
        echo=None,
    )
    job.wait(timeout=600, echo=None)
    return job


def finished(folder: Path) -> bool:
    """Whether a run in the student's runs/ has finished (its results file says so)."""
    return any(results.load(path).get("complete") for path in results.find(folder))


def newest_snapshot(folder: Path) -> int:
    """The iteration of the newest snapshot in the student's runs/ (0: none yet)."""
    runs = folder / results.RUNS_DIR
    found = (
        [path for run in runs.iterdir() for path in checkpoint.snapshot_files(run)]
        if runs.is_dir()
        else []
    )
    return max((int(path.name.replace(".", "_").rsplit("_", 1)[1]) for path in found), default=0)


@pytest.fixture
def env(quick_env, monkeypatch):
    for name in ("CHAINER_DATASET_ROOT", "XDG_STATE_HOME", "COURSE_DATASET"):
        monkeypatch.setenv(name, quick_env[name])
    return quick_env


@pytest.mark.parametrize(
    "stage", ["single_gpu", pytest.param("multi_node", marks=pytest.mark.extended)]
)
def test_a_run_killed_at_its_walltime_resumes_and_ends_as_if_never_stopped(tmp_path, env, stage):
    whole = student_folder(tmp_path, "whole", stage)
    started = time.monotonic()
    job = run_job(whole, env, "00:10:00")
    job_seconds = time.monotonic() - started
    assert job.exit_status() == 0, job.find_log().read_text()
    [uninterrupted] = evidence.runs(stage, whole)
    assert uninterrupted.traced, uninterrupted.problems
    assert len(uninterrupted.segments) == 1 and uninterrupted.snapshot_cost()["snapshots"] == 4

    # A walltime that ends each job part-way, after about one epoch: one more epoch's time for the
    # next job when one ended before its first snapshot (this machine is shared, and starting up
    # varies).
    log = uninterrupted.record["log"]
    epoch = log[-1]["elapsed_time"] / len(log)
    walltime = math.ceil(job_seconds - len(log) * epoch + 1.5 * epoch)
    split = student_folder(tmp_path, "split", stage)
    jobs, progress = [], 0
    for _ in range(8):
        jobs.append(run_job(split, env, f"00:{walltime // 60:02d}:{walltime % 60:02d}"))
        if finished(split):  # its job may still have been killed at the walltime while it ended
            break
        text = jobs[-1].find_log().read_text()
        assert jobend.walltime_exceeded(text) and jobs[-1].exit_status() == jobend.WALLTIME_EXIT, (
            text
        )
        progress, before = newest_snapshot(split), progress
        walltime += 0 if progress > before else math.ceil(epoch)
    assert len(jobs) >= 2 and finished(split), [j.find_log().read_text() for j in jobs]

    [resumed] = evidence.runs(stage, split)
    assert resumed.traced, resumed.problems
    segment_jobs = [segment["job"]["id"] for segment in resumed.segments]
    assert (
        segment_jobs[-1] == jobs[-1].id
        and len(segment_jobs) >= 2
        and set(segment_jobs) <= {j.id for j in jobs}
    )
    later = [j for j in jobs if j.id in segment_jobs[1:]]
    for job in later:  # each later job says where it resumed
        [said] = joblog.resumptions(job.find_log().read_text())
        assert said["folder"].endswith(resumed.path.parent.name) and said["iteration"] > 0
    # One run, one folder: the killed jobs' time after their last snapshot and each restart are left
    # out.
    assert list((split / results.RUNS_DIR).iterdir()) == [resumed.path.parent]
    stats = resumed.record["throughput"]
    # Each job warms up again (2 iterations, --warmup), as far as it trained: a job killed just
    # after the last snapshot leaves the next one none to train, only the record to write.
    assert stats["warmup_iterations"] == sum(
        min(2, s["to_iteration"] - s["from_iteration"]) for s in resumed.segments
    )
    iterations = 4 * (resumed.record["dataset"]["train_per_worker"] // 32)
    assert (
        stats["counted_iterations"] + stats["warmup_iterations"] + stats["excluded_iterations"]
        == iterations
    )
    assert [s["from_iteration"] for s in resumed.segments[1:]] == [
        s["to_iteration"] for s in resumed.segments[:-1]
    ]

    # The same final weights and accuracy as the run that was never stopped (same seed, CPU).
    assert [e["validation/main/accuracy"] for e in resumed.record["log"]] == [
        e["validation/main/accuracy"] for e in log
    ]
    expected = uninterrupted.record["model"]["weights_sha256"]
    assert expected and resumed.record["model"]["weights_sha256"] == expected
    # Finished runs keep no snapshots: a finished course fits in a submission.
    assert not checkpoint.snapshot_files(resumed.path.parent)
    assert not checkpoint.snapshot_files(uninterrupted.path.parent)

    # Every job of a run must have left its log: without the first one's, the run does not count.
    first = resumed.segments[0]["job"]
    joblog.find(split, first["id"], first["name"]).unlink()
    [resumed] = evidence.runs(stage, split)
    assert any(
        f"resumed from job {first['id']}, whose log is not beside the notebooks" in problem
        for problem in resumed.problems
    )


@pytest.mark.extended  # resuming: the walltime test above
def test_a_finished_run_is_not_resumed(tmp_path, env):
    folder = student_folder(tmp_path, "twice")
    jobs = [run_job(folder, env, "00:10:00") for _ in range(2)]
    assert [job.exit_status() for job in jobs] == [0, 0]
    found = evidence.runs("single_gpu", folder)
    assert len(found) == 2 and all(run.traced and len(run.segments) == 1 for run in found)
    assert not joblog.resumptions(jobs[1].find_log().read_text())

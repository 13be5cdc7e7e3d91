"""A training that hangs ends its job with the cause, long before its walltime (the watchdog,
course.runtime.watchdog), in real jobs on the local scheduler: a stage-3 rank stopped with SIGSTOP,
a stage-1 training stuck reading its data.
"""

from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path

import pytest

from course.cluster import localsched, procs, submit
from course.cluster.job import Job
from course.contracts import jobend, stages
from course.notebook import scripts
from course.runtime import checkpoint, watchdog
from tests.helpers import ROOT, functions, notebook, student_folder, until
from tests.solutions import solution_source

pytestmark = pytest.mark.slow
WALLTIME, WALLTIME_SECONDS = "00:10:00", 600
TRAIN_ARGS = "--model vgg --width 8 --batchsize 32 --epoch 200 --warmup 2"  # runs past the test
# Minutes without moving: many times an epoch end's evaluation and snapshot on a busy machine, a
# small part of the walltime.
LIMIT = "0.5"


@pytest.fixture
def env(quick_env, monkeypatch):
    for name in ("CHAINER_DATASET_ROOT", "XDG_STATE_HOME", "COURSE_DATASET"):
        monkeypatch.setenv(name, quick_env[name])
    return quick_env


def run(folder: Path, stage: str) -> Job:
    return submit.submit(
        stages.get(stage).job_path,
        env={"COURSE_TRAIN_ARGS": TRAIN_ARGS, watchdog.LIMIT_VARIABLE: LIMIT},
        options=["-l", f"walltime={WALLTIME}"],
        scheduler="local",
        workdir=folder,
        echo=None,
    )


def members(job: Job) -> list[int]:
    session = job._local.record().get("session")
    return procs.session_members(session) if session else []


def ranks(job: Job) -> dict[int, int]:
    """{rank: pid} of the job's MPI ranks: the processes of its session whose environment has Open
    MPI's rank number."""
    found = {}
    for pid in members(job):
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        for item in environ:
            if item.startswith(b"OMPI_COMM_WORLD_RANK="):
                found[int(item.partition(b"=")[2])] = pid
    return found


def ended(job: Job) -> tuple[int, str]:
    """Wait for the job's end: (its exit status, its log)."""
    status = job.wait(timeout=WALLTIME_SECONDS + 300, echo=None)
    assert status is not None, "the job did not end"
    return status, job.find_log().read_text()


def ended_or_cancelled(job: Job) -> tuple[int, str]:
    """ended(job); a job that has not ended by then is cancelled, so that no stuck job runs on."""
    try:
        return ended(job)
    finally:
        if job.exit_status() is None:
            localsched.cancel(job.id)


def ended_early(job: Job, status: int, text: str) -> None:
    assert not jobend.walltime_exceeded(text) and status == watchdog.EXIT_STATUS, text
    assert job.ending().says == f"ended with exit status {status}"  # the end line reads after MPI's
    assert job._local.record()["seconds"] < WALLTIME_SECONDS
    assert "train fewer epochs" not in job.diagnosis()


@pytest.mark.parametrize("stopped", [pytest.param(1, marks=pytest.mark.extended), 0])
def test_a_stopped_rank_is_named_and_its_job_ends_long_before_the_walltime(tmp_path, env, stopped):
    folder = student_folder(tmp_path, "student", "multi_node")
    job = run(folder, "multi_node")
    pids: dict[int, int] = {}
    try:
        # Training has started: both ranks run, and each wrote its snapshot of the first epoch.
        pids = until(lambda: len(ranks(job)) == 2 and ranks(job), 300, "the ranks' start")
        until(
            lambda: any(
                len(checkpoint.snapshot_files(run)) >= 2 for run in (folder / "runs").glob("*")
            ),
            300,
            "the first epoch's snapshots",
        )
        os.kill(pids[stopped], signal.SIGSTOP)
        status, text = ended(job)
    finally:  # whatever happened, no rank of this job stays stopped, or runs on
        for pid in pids.values():
            if pid in members(job):
                os.kill(pid, signal.SIGCONT)
        if job.exit_status() is None:
            localsched.cancel(job.id)
    [hang] = jobend.hangs(text)
    assert (hang.rank, hang.ranks, hang.how, hang.minutes) == (stopped, 2, "stopped", 0.5), text
    assert hang.iteration >= 16  # one epoch of 512 examples per rank, 32 a step
    ended_early(job, status, text)
    assert job.diagnosis().startswith(
        f"rank {stopped} of 2 made no training step for 0.5 minutes (last step at iteration "
    )
    assert not [pid for pid in pids.values() if procs.alive(pid)]


# A training set whose reads never return from the 1500th on (an epoch is 1024 examples on one
# process, 512 on each of two ranks): each then opens a pipe that nobody writes to, as a read from a
# hung file server would. Made in the student's function, so that the script holds it.
STUCK = """
    reads = []

    class Stuck(chainer.dataset.DatasetMixin):
        def __len__(self):
            return len(train)

        def get_example(self, i):
            reads.append(i)
            if len(reads) > 1500:
                open({fifo!r}).read()
            return train[i]
"""
STUCK_ITERATORS = (
    "\n\ndef make_iterators(train, test, batchsize):"
    + STUCK
    + """
    return (
        chainer.iterators.SerialIterator(Stuck(), batchsize),
        chainer.iterators.SerialIterator(test, batchsize, repeat=False, shuffle=False),
    )
"""
)
STUCK_RANK_1 = (
    """

def shard_datasets(train, test, comm, seed):
    train = chainermn.scatter_dataset(train, comm, shuffle=True, seed=seed)
    test = chainermn.scatter_dataset(test, comm)
    if comm.rank != 1:
        return train, test"""
    + STUCK
    + """
    return Stuck(), test
"""
)


def stuck_student(tmp_path: Path, stage: str, function: str) -> Path:
    """A student's folder whose script reads its training set through `function` (STUCK_...)."""
    fifo = tmp_path / "never-written"
    os.mkfifo(fifo)
    module = notebook(tmp_path, solution_source(stage) + function.format(fifo=str(fifo)))
    folder = tmp_path / "student"
    shutil.copytree(ROOT / "jobs", folder / "jobs")
    scripts.write_script(stage, functions(module, stages.get(stage)), folder)
    return folder


def test_a_training_stuck_in_a_read_is_named_with_its_line_and_its_job_ends(tmp_path, env):
    job = run(stuck_student(tmp_path, "single_gpu", STUCK_ITERATORS), "single_gpu")
    status, text = ended_or_cancelled(job)
    [hang] = jobend.hangs(text)
    assert (hang.rank, hang.ranks, hang.how) == (None, 1, "alone"), text
    assert hang.where.startswith("get_example (train_cifar_single.py, line "), hang.where
    assert "course: watchdog: the training's stack" in text and "open(" in text
    ended_early(job, status, text)
    assert job.diagnosis().startswith("the training made no step for 0.5 minutes")


@pytest.mark.extended  # a stuck read: the one-rank test above
def test_a_rank_stuck_in_a_read_is_named_with_its_line_while_the_others_wait(tmp_path, env):
    job = run(stuck_student(tmp_path, "multi_node", STUCK_RANK_1), "multi_node")
    status, text = ended_or_cancelled(job)
    [hang] = jobend.hangs(text)
    assert (hang.rank, hang.ranks, hang.how) == (1, 2, "stuck"), text
    assert hang.where.startswith("get_example (train_cifar_multi_node.py, line "), hang.where
    ended_early(job, status, text)
    assert job.diagnosis().startswith("rank 1 of 2 made no training step for 0.5 minutes")

"""Snapshots that must not be trusted, under the real local scheduler: a damaged newest snapshot is
removed and the intact one before it resumes; a snapshot of another training, or one taken on a
data set since remade under the same name, never resumes; a finished run leaves no snapshot.

Each case starts from a job cancelled after its second snapshot (as a walltime would stop it), then
does to the run folder what a full quota, a bad copy or a remade data set does, and submits the
same job again.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from course import evidence
from course.cluster import localsched, submit
from course.contracts import jobend, joblog, results, stages
from course.runtime import checkpoint, snapshot_integrity
from tests.helpers import PYTHON, student_folder

pytestmark = pytest.mark.slow
ARGS = "--model vgg --width 4 --batchsize 64 --epoch 12 --warmup 1"
ITERATIONS_PER_EPOCH = 1024 // 64  # the quick data set's 1024 training images, one rank


@pytest.fixture
def env(quick_env, tmp_path, monkeypatch):
    """quick_env with a data folder of this test's own (one case remakes its data set); the local
    scheduler reads them from this process's environment."""
    data = tmp_path / "data"
    shutil.copytree(quick_env["CHAINER_DATASET_ROOT"], data)
    monkeypatch.setenv("CHAINER_DATASET_ROOT", str(data))
    for name in ("XDG_STATE_HOME", "COURSE_DATASET"):
        monkeypatch.setenv(name, quick_env[name])
    return {**quick_env, "CHAINER_DATASET_ROOT": str(data)}


def start(folder: Path, args: str = ARGS, env: dict | None = None) -> submit.Job:
    stage = stages.get((folder / "stage").read_text())
    return submit.submit(
        stage.job_path,
        env={"COURSE_TRAIN_ARGS": args, **(env or {})},
        scheduler="local",
        workdir=folder,
        echo=None,
    )


def sealed(folder: Path, rank: int | None) -> list[Path]:
    """The snapshots of `rank` (None: one process) whose digests are written, oldest first."""
    runs = folder / results.RUNS_DIR
    found = [
        path
        for run in (runs.iterdir() if runs.is_dir() else [])
        for path in checkpoint.own_snapshots(run, rank)
        if snapshot_integrity.digest_path(path).exists()
    ]
    return sorted(found, key=lambda path: int(path.name.replace(".", "_").rsplit("_", 1)[1]))


def interrupted(folder: Path, ranks: int, args: str = ARGS) -> Path:
    """The run folder of a job cancelled once every rank has sealed two snapshots."""
    job = start(folder, args)
    deadline = time.monotonic() + 600
    while not all(len(sealed(folder, r if ranks > 1 else None)) >= 2 for r in range(ranks)):
        log = job.find_log()
        assert not (log and jobend.end(log.read_text())), log.read_text()
        assert time.monotonic() < deadline, "no second snapshot within 600 s"
        time.sleep(0.05)
    localsched.cancel(job.id, timeout=120)
    [run] = (folder / results.RUNS_DIR).iterdir()
    assert not results.load(run / results.FILENAME).get("complete")
    return run


def finish(folder: Path, args: str = ARGS) -> tuple[int | None, str]:
    job = start(folder, args)
    status = job.wait(timeout=900, echo=None)
    return status, job.find_log().read_text()


def flip_one_byte(path: Path) -> None:
    with open(path, "r+b") as f:
        f.seek(path.stat().st_size // 2)
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0xFF]))


def truncate(path: Path) -> None:
    with open(path, "r+b") as f:
        f.truncate(path.stat().st_size // 2)


@pytest.mark.parametrize(
    "stage,damage",
    [
        ("single_gpu", truncate),
        pytest.param("single_gpu", flip_one_byte, marks=pytest.mark.extended),
        pytest.param("multi_node", truncate, marks=pytest.mark.extended),  # one rank's file only
    ],
)
def test_a_damaged_snapshot_is_removed_and_the_intact_one_before_it_resumes(
    tmp_path, env, stage, damage
):
    ranks = 2 if stage == "multi_node" else 1
    folder = student_folder(tmp_path, "student", stage)
    run = interrupted(folder, ranks)
    newest = sealed(folder, 1 if ranks > 1 else None)[-1]
    before = sealed(folder, 1 if ranks > 1 else None)[-2]
    damage(newest)

    status, log = finish(folder)
    assert status == 0, log
    assert f"course: snapshot {results.RUNS_DIR}/{run.name}/{newest.name}" in log
    assert "is damaged" in log
    assert "removed, the snapshot before it is used" in log
    [resumed] = joblog.resumptions(log)
    iterations_per_epoch = ITERATIONS_PER_EPOCH // ranks
    assert resumed["iteration"] == int(before.name.replace(".", "_").rsplit("_", 1)[1])
    assert resumed["iteration"] % iterations_per_epoch == 0
    assert results.load(run / results.FILENAME)["complete"]
    # The finished run removed its snapshots and their digests.
    assert not checkpoint.snapshot_files(run) and not list(run.glob(".*.sha256"))


@pytest.mark.extended  # a damaged snapshot: the test above
def test_every_snapshot_damaged_starts_the_run_over_and_says_so(tmp_path, env):
    folder = student_folder(tmp_path, "student", "single_gpu")
    run = interrupted(folder, 1)
    for path in sealed(folder, None):
        truncate(path)
    status, log = finish(folder)
    assert status == 0, log
    assert log.count("is damaged") == 2 and not joblog.resumptions(log)
    assert f"course: no intact snapshot left in {results.RUNS_DIR}/{run.name}" in log
    assert results.load(run / results.FILENAME)["complete"]


@pytest.mark.extended  # another training's run is not continued: test_checkpoint.py, in-process
def test_a_snapshot_of_another_training_names_itself_and_the_way_out(tmp_path, env):
    """Another training's snapshot in this run's folder (copied by hand): intact, but not this
    trainer's; the job says which file and how to start over, instead of resuming from it."""
    other = student_folder(tmp_path, "other", "single_gpu")
    interrupted(other, 1, ARGS.replace("--width 4", "--width 8"))
    theirs = sealed(other, None)
    folder = student_folder(tmp_path, "student", "single_gpu")
    run = interrupted(folder, 1)
    for path in sealed(folder, None):
        path.unlink()
    for path in theirs:
        shutil.copy(path, run / path.name)
        shutil.copy(snapshot_integrity.digest_path(path), run)

    status, log = finish(folder)
    assert status != 0, log
    assert f"the snapshot {results.RUNS_DIR}/{run.name}/{theirs[-1].name} does not fit" in log
    assert "COURSE_TRAIN_ARGS=--no-resume" in log

    status, log = finish(folder, ARGS + " --no-resume")
    assert status == 0, log
    assert not joblog.resumptions(log)


@pytest.mark.extended  # another training's snapshot: the test above
def test_a_data_set_remade_under_the_same_name_is_another_training(tmp_path, env):
    folder = student_folder(tmp_path, "student", "single_gpu")
    first = interrupted(folder, 1)
    subprocess.run(
        [PYTHON, "-m", "course", "data", "synthetic", "--train", "2048", "--test", "256"]
        + ["--name", "small"],
        env=env,
        check=True,
        capture_output=True,
    )
    status, log = finish(folder)
    assert status == 0, log
    assert not joblog.resumptions(log)
    runs = sorted((folder / results.RUNS_DIR).iterdir())
    assert first in runs and len(runs) == 2
    [new] = [run for run in runs if run != first]
    assert results.load(new / results.FILENAME)["dataset"]["train_per_worker"] == 2048


# Loaded by every Python process of a job whose PYTHONPATH starts with its folder: when the finished
# results record is put in place, the whole job is killed with SIGKILL at that moment, as a walltime
# that falls on the last second of a run does under load (no end line, no trap).
KILL_AT_FINISH = """
import json, os, signal

_replace = os.replace


def _replace_then_die(src, dst, *args, **kwargs):
    finished = False
    if os.path.basename(str(dst)) == "results.json":
        with open(src) as f:
            finished = json.load(f).get("complete") is True
    if finished and os.environ["KILL_AT_FINISH"] == "before":
        os.killpg(os.getsid(0), signal.SIGKILL)
    _replace(src, dst, *args, **kwargs)
    if finished and os.environ["KILL_AT_FINISH"] == "after":
        os.killpg(os.getsid(0), signal.SIGKILL)


os.replace = _replace_then_die
"""


@pytest.mark.parametrize("when", ["before", "after"])
def test_a_run_killed_as_it_finishes_is_never_lost(tmp_path, env, when):
    """Killed just before or just after its finished record takes its place: either the log already
    vouches for the finished record, or the record is the unfinished one and the next job of the
    same training resumes from the final snapshot and finishes the run."""
    fault = tmp_path / "fault"
    fault.mkdir()
    (fault / "sitecustomize.py").write_text(KILL_AT_FINISH)
    path = os.pathsep.join(p for p in (str(fault), os.environ.get("PYTHONPATH")) if p)
    folder = student_folder(tmp_path, "student", "single_gpu")
    args = ARGS.replace("--epoch 12", "--epoch 2")
    killed = start(folder, args, {"PYTHONPATH": path, "KILL_AT_FINISH": when})
    killed.wait(timeout=900, echo=None)
    killed_log = killed.find_log().read_text()
    assert not jobend.ended_at(killed_log), killed_log  # no end line: killed outright
    [run] = (folder / results.RUNS_DIR).iterdir()
    assert checkpoint.snapshot_files(run), "the killed job removed its snapshots"

    if when == "before":
        assert not results.load(run / results.FILENAME)["complete"]
        status, log = finish(folder, args)
        assert status == 0, log
        [resumed] = joblog.resumptions(log)
        assert resumed["iteration"] == 2 * ITERATIONS_PER_EPOCH  # the final snapshot
        assert [p.name for p in (folder / results.RUNS_DIR).iterdir()] == [run.name]
    traced = evidence.trace(run / results.FILENAME, folder)
    assert traced.record["complete"] and traced.problems == [], traced.problems
    assert traced.record["model"]["weights_sha256"]


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small file system needs root")
def test_a_disk_that_fills_during_training_is_named_in_the_log(tmp_path, env):
    """runs/ on a file system of its own that fills up after the first snapshot: the job ends
    naming the run folder's file system and what to do, even though the results file cannot be
    written there either."""
    folder = student_folder(tmp_path, "student", "single_gpu")
    runs = folder / results.RUNS_DIR
    runs.mkdir()
    size = 300 * 2**20  # over the 256 MiB a job asks for before training
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(runs)], check=True)
    try:
        job = start(folder)
        deadline = time.monotonic() + 600
        while not sealed(folder, None):
            assert time.monotonic() < deadline, "no snapshot within 600 s"
            time.sleep(0.05)
        with open(runs / "filler", "wb") as filler:  # what another job or a data set would take
            with contextlib.suppress(OSError):
                while True:
                    filler.write(b"\0" * 2**20)
        status = job.wait(timeout=600, echo=None)
        log = job.find_log().read_text()
    finally:
        subprocess.run(["umount", "-l", str(runs)], check=False)
    assert status not in (0, None), log
    [run] = [line for line in log.splitlines() if "no space left on the file system of" in line]
    assert f"{results.RUNS_DIR}/single_gpu-" in run, log
    assert "free space there, or train with --out on another file system" in log

"""Which run folder a job trains in, what a snapshot carries, and a full disk named before
training."""

from __future__ import annotations

import contextlib
import errno
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import chainer
import numpy as np
import pytest

from course import fileio
from course.contracts import results
from course.errors import CourseError
from course.runtime import checkpoint, harness
from course.runtime.throughput import Throughput

KEY = "k" * 64


def unfinished(runs, name: str, key: str = KEY, complete: bool | None = False):
    """A run folder as a job killed at its walltime leaves it: its key, a snapshot, partial
    results."""
    folder = runs / name
    folder.mkdir(parents=True)
    (folder / checkpoint.KEY_FILE).write_text(json.dumps({"key": key}))
    (folder / "snapshot_iter_32").write_bytes(b"npz")
    if complete is not None:
        record = {
            "stage": "single_gpu",
            "workers": 1,
            "job": {},
            "hosts": [],
            "devices": [],
            "log": [],
            "complete": complete,
            "throughput": None,
            "script": {},
        }
        results.write(folder / results.FILENAME, record)
    return folder


def claim(runs, resume: bool = True, key: str = KEY) -> tuple[str, bool]:
    return checkpoint.claim_folder(str(runs / "single_gpu-new"), "single_gpu", key, resume)


def test_a_job_continues_the_unfinished_run_of_the_same_training(tmp_path):
    folder = unfinished(tmp_path, "single_gpu-7")
    assert claim(tmp_path) == (str(folder), True)


@pytest.mark.parametrize(
    "case", ["finished", "other training", "no snapshot", "--no-resume", "other stage"]
)
def test_a_job_starts_a_new_run_when_there_is_nothing_of_its_own_to_continue(tmp_path, case):
    folder = unfinished(
        tmp_path,
        "multi_gpu-7" if case == "other stage" else "single_gpu-7",
        key="x" * 64 if case == "other training" else KEY,
        complete=case == "finished",
    )
    if case == "no snapshot":
        (folder / "snapshot_iter_32").unlink()
    out, resumed = claim(tmp_path, resume=case != "--no-resume")
    assert (out, resumed) == (str(tmp_path / "single_gpu-new"), False)
    assert json.loads((tmp_path / "single_gpu-new" / checkpoint.KEY_FILE).read_text())["key"] == KEY


@contextlib.contextmanager
def lock_held_by_another_process(folder: Path) -> Iterator[None]:
    """A live process holding `folder`'s run lock, as a running job does, for the block's life."""
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, os, sys, time\n"
            f"fd = os.open({str(folder / checkpoint.LOCK_FILE)!r}, os.O_RDWR | os.O_CREAT)\n"
            "fcntl.flock(fd, fcntl.LOCK_EX)\nprint('locked', flush=True)\ntime.sleep(600)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline() == "locked\n"
        yield
    finally:
        holder.kill()
        holder.wait()


def test_a_run_another_live_job_trains_is_left_to_it(tmp_path):
    folder = unfinished(tmp_path, "single_gpu-7", complete=None)
    with lock_held_by_another_process(folder):
        assert claim(tmp_path) == (str(tmp_path / "single_gpu-new"), False)


def test_a_run_folder_another_process_trains_in_is_refused_not_shared(tmp_path):
    # Two copies of one job that were not started as one MPI job claim the same folder.
    folder = tmp_path / "single_gpu-new"
    folder.mkdir()
    with lock_held_by_another_process(folder), pytest.raises(CourseError) as caught:
        claim(tmp_path, resume=False)
    assert caught.value.message == (
        f"another job or process holds the run {folder}: it trains there now"
    )
    assert "python -m course doctor checks the MPI launcher" in caught.value.hint
    assert not (folder / checkpoint.KEY_FILE).exists()  # the holder's run is left as it is


def test_the_throughput_counted_so_far_travels_in_the_snapshot_and_warm_up_is_left_out_again():
    ticks = iter(range(1000))
    meter = Throughput(4, warmup=2, clock=lambda: float(next(ticks)))

    class Updater:
        is_new_epoch = False

    class Trainer:
        updater = Updater()

    meter._last = meter._clock()
    for _ in range(6):
        meter(Trainer())
    saved = chainer.serializers.DictionarySerializer()
    meter.serialize(saved)
    resumed = Throughput(4, warmup=2, clock=lambda: float(next(ticks)))
    resumed.serialize(
        chainer.serializers.NpzDeserializer({k: np.asarray(v) for k, v in saved.target.items()})
    )
    resumed._last = resumed._clock()
    for _ in range(5):
        resumed(Trainer())
    stats = resumed.stats()
    assert (stats.counted_iterations, stats.warmup_iterations) == (4 + 3, 2 + 2)


def test_too_little_free_space_is_refused_before_training_naming_the_folder(tmp_path):
    with pytest.raises(CourseError) as raised:
        fileio.require_free_space(
            tmp_path / "runs" / "x", fileio.free_bytes(tmp_path) + 2**40, "snapshots"
        )
    assert (
        str(tmp_path) in raised.value.message
        and "MiB free on the file system of" in raised.value.message
    )
    assert "--out on another file system" in raised.value.hint


def test_a_full_disk_during_training_names_the_run_folder():
    said = harness._failure(OSError(errno.ENOSPC, "No space left on device"), "runs/single_gpu-7")
    assert (
        said.startswith("no space left on the file system of runs/single_gpu-7 (")
        and "MiB free)" in said
    )


def test_a_lock_is_released_when_its_job_dies(tmp_path):
    folder = unfinished(tmp_path, "single_gpu-7", complete=None)
    subprocess.run(
        [
            sys.executable,
            "-c",
            "import fcntl, os\n"
            f"fd = os.open({str(folder / checkpoint.LOCK_FILE)!r}, os.O_RDWR | os.O_CREAT)\n"
            "fcntl.flock(fd, fcntl.LOCK_EX)\nos._exit(0)\n",
        ],
        check=True,
    )
    assert claim(tmp_path) == (str(folder), True)


# --- what counts of a run: nothing written after its job ended, every job of a resumed run -------


def traced_run(folder, segments: list[tuple[int, str | None, str]], finished_at: str):
    """A stage-1 run trained by the jobs `segments` [(number, its snapshot time, its end time)], the
    last one finishing it at `finished_at`: its results file and every job's log, as the harness and
    site_env.sh write them."""
    from datetime import datetime

    from course import evidence
    from course.contracts import jobend, joblog, stages

    stage = stages.SINGLE_GPU
    last = f"{segments[-1][0]}.local"
    path = folder / results.RUNS_DIR / f"single_gpu-{segments[0][0]}.local" / results.FILENAME
    record = {
        "stage": "single_gpu",
        "workers": 1,
        "hosts": ["n1"],
        "devices": ["@numpy"],
        "log": [],
        "job": {"id": last, "name": stage.job_script, "scheduler": "local"},
        "script": {"name": stage.script},
        "complete": True,
        "throughput": {"images_per_sec": 100.0},
        "finished_at": finished_at,
        "segments": [
            {
                "job": {"id": f"{n}.local", "name": stage.job_script, "scheduler": "local"},
                "snapshot_at": taken,
            }
            for n, taken, _ in segments
        ],
    }
    digest = results.write(path, record)
    for number, _, ended in segments:
        job_id = f"{number}.local"
        header = joblog.RunHeader(
            stage="single_gpu",
            job_id=job_id,
            scheduler="local",
            workers=1,
            hosts=["n1"],
            devices=["@numpy"],
            batch_per_worker=32,
            learning_rate=0.05,
            seed=0,
        )
        lines = [header.format()]
        if job_id == last:
            lines += [
                joblog.throughput_line(100.0, 40, 2, 0),
                joblog.results_line(path.relative_to(folder), digest),
            ]
        lines.append(
            jobend.end_line(job_id, 0 if job_id == last else 271, at=datetime.fromisoformat(ended))
        )
        (folder / joblog.log_name(stage.job_script, number)).write_text("\n".join(lines) + "\n")
    return evidence.trace(path, folder)


def test_a_run_resumed_over_two_jobs_counts_when_both_logs_show_it(tmp_path):
    run = traced_run(
        tmp_path,
        [
            (7, "2026-11-22T10:00:50+00:00", "2026-11-22T10:01:00+00:00"),
            (8, "2026-11-22T10:02:40+00:00", "2026-11-22T10:02:45+00:00"),
        ],
        finished_at="2026-11-22T10:02:41+00:00",
    )
    assert run.traced, run.problems


def test_a_snapshot_written_after_its_job_ended_does_not_count(tmp_path):
    run = traced_run(
        tmp_path,
        [
            (7, "2026-11-22T10:01:30+00:00", "2026-11-22T10:01:00+00:00"),
            (8, "2026-11-22T10:02:40+00:00", "2026-11-22T10:02:45+00:00"),
        ],
        finished_at="2026-11-22T10:02:41+00:00",
    )
    assert run.problems == ["job 7.local wrote the snapshot this run resumed from after it ended"]


def test_results_written_after_the_job_ended_do_not_count(tmp_path):
    run = traced_run(
        tmp_path,
        [(8, "2026-11-22T10:02:40+00:00", "2026-11-22T10:02:45+00:00")],
        finished_at="2026-11-22T10:07:00+00:00",
    )
    assert (
        len(run.problems) == 1
        and "after job 8.local ended (2026-11-22 10:02:45 UTC)" in run.problems[0]
    )

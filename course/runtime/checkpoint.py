"""Runs that outlive a walltime: snapshots, the next job of the same run finding them, and its
segments.

Snapshots are Chainer's own: `extensions.snapshot` (stage 1 adds it as an exercise, stage 2 gets
one from the harness) writes the whole trainer, atomically; on several ranks ChainerMN's
`create_multi_node_checkpointer` writes one file per rank and loads the newest iteration that
every rank has. A job that finds an unfinished run of the same training (the same script, flags,
seed and workers) in runs/ continues it in its folder from the newest snapshot, instead of
starting over. Each job that worked on a run is a segment; the trainer's own state carries the
list of segments, the random generators' states and the throughput counted so far, so the
resumed run trains as the uninterrupted one would and its results cover every segment.
"""

from __future__ import annotations

import argparse
import datetime
import fcntl
import hashlib
import json
import os
import random
import re
import time
from pathlib import Path
from typing import cast

import chainer
import numpy as np
from chainer.training import extensions
from chainer.training.extensions import _snapshot

from course.cluster import hosts
from course.contracts import prediction, results
from course.errors import CourseError
from course.i18n import _
from course.runtime import snapshot_integrity

KEY_FILE = "resume.json"
LOCK_FILE = ".resume.lock"
MULTI_NODE_NAME = "snapshot"  # ChainerMN's files: snapshot.<rank>.<iteration>
_held_locks: list[int] = []  # open descriptors of the run folders this process works in (flock)


def _now() -> str:
    return datetime.datetime.now().astimezone().isoformat(timespec="seconds")


def run_key(args: argparse.Namespace, workers: int, script_sha256: str | None) -> str:
    """What makes two jobs the same training: the script, every flag but --out, the workers, the
    MPI allreduce algorithm and the data set's file (one remade under the same name is another
    training). Only a job with the same key may continue a run."""
    from course.runtime import data

    flags = {k: v for k, v in vars(args).items() if k not in ("out", "lr_plan", "no_resume")}
    facts = {
        "flags": flags,
        "data": data.fingerprint(getattr(args, "dataset", None)),
        "workers": workers,
        "script": script_sha256,
        "allreduce": os.environ.get("COURSE_ALLREDUCE") or None,
    }
    return hashlib.sha256(json.dumps(facts, sort_keys=True, default=str).encode()).hexdigest()


def _lock(folder: Path) -> bool:
    """Hold `folder`'s lock for the life of this process; False when a live job holds it."""
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return False
    _held_locks.append(fd)
    return True


_SNAPSHOT_NAME = re.compile(rf"^(?:snapshot_iter_|{MULTI_NODE_NAME}\.\d+\.)(\d+)$")


def snapshot_files(folder: Path) -> list[Path]:
    """The complete snapshot files in a run folder (writers rename a finished file into place)."""
    return sorted(p for p in Path(folder).glob("*") if _SNAPSHOT_NAME.match(p.name) and p.is_file())


def own_snapshots(folder: Path, rank: int | None) -> list[Path]:
    """The snapshot files one process writes: ChainerMN's of `rank`, or Chainer's (rank None)."""
    mine = (
        re.compile(rf"^{MULTI_NODE_NAME}\.{rank}\.\d+$")
        if rank is not None
        else re.compile(r"^snapshot_iter_\d+$")
    )
    return [path for path in snapshot_files(folder) if mine.match(path.name)]


def _snapshot_iteration(path: Path) -> int | None:
    """The iteration a snapshot file was taken at, from its name."""
    match = _SNAPSHOT_NAME.match(path.name)
    return int(match.group(1)) if match else None


def _unfinished(folder: Path, key: str) -> bool:
    try:
        recorded = json.loads((folder / KEY_FILE).read_text())
    except (OSError, ValueError):
        return False
    if recorded.get("key") != key or not snapshot_files(folder):
        return False
    try:
        return not results.load(folder / results.FILENAME).get("complete")
    except Exception:  # no results yet, or unreadable: the snapshot is what counts
        return True


def claim_folder(out: str, stage: str, key: str, resume: bool) -> tuple[str, bool]:
    """The run folder this job trains in, locked: the newest unfinished run with `key` when `resume`
    (continued: True), else `out` (False)."""
    if resume:
        runs = Path(out).parent
        candidates = [p for p in runs.glob(f"{stage}-*") if p.is_dir() and _unfinished(p, key)]
        for folder in sorted(
            candidates,
            key=lambda p: max(f.stat().st_mtime for f in snapshot_files(p)),
            reverse=True,
        ):
            if _lock(folder):
                return str(folder), True
    if not _lock(Path(out)):  # two copies of one job (not one MPI job), or two jobs
        raise CourseError(
            _("another job or process holds the run {folder}: it trains there now").format(
                folder=out
            ),
            _(
                "let it end, or train with --out in another folder; if this job's ranks each "
                "train alone, python -m course doctor checks the MPI launcher"
            ),
        )
    (Path(out) / KEY_FILE).write_text(
        json.dumps({"key": key, "stage": stage, "created_at": _now()}) + "\n"
    )
    return out, False


class _Timed:
    """A snapshot extension that also times itself (serialising and writing), for the snapshot-cost
    lesson."""

    def __init__(self, inner, state: ResumeState) -> None:
        self._inner, self._state = inner, state

    def __call__(self, trainer) -> None:
        start = time.perf_counter()
        self._inner(trainer)
        self._state.snapshot_taken(trainer, time.perf_counter() - start)
        rank = (
            self._inner.checkpointer.comm.rank
            if isinstance(self._inner, _MultiNodeSnapshots)
            else None
        )
        mine = own_snapshots(trainer.out, rank)
        for path in mine:
            if _snapshot_iteration(path) == trainer.updater.iteration:
                snapshot_integrity.seal(path)  # after the timing: the lesson's cost is Chainer's
        snapshot_integrity.tidy(trainer.out, snapshot_files(trainer.out))

    def __getattr__(
        self, name
    ):  # initialize, finalize, serialize, trigger, priority, ... of the snapshot
        return getattr(self._inner, name)


class _MultiNodeSnapshots(chainer.training.Extension):
    """ChainerMN's checkpointer, except that it keeps its files when training fails (its finalize
    deletes them on any exit, also at a walltime's SIGTERM turned exception): `finish` removes
    them."""

    trigger = 1, "epoch"
    priority = -100  # where Chainer's snapshot runs: after evaluation and reporting

    def __init__(self, comm) -> None:
        from chainermn import create_multi_node_checkpointer

        self.checkpointer = create_multi_node_checkpointer(
            MULTI_NODE_NAME, comm, cp_interval=1, gc_interval=1
        )

    def __call__(self, trainer) -> None:
        self.checkpointer(trainer)


def find_snapshot(trainer) -> tuple[str, object] | None:
    """(name, extension) of the trainer's snapshot extension, if it has one."""
    for name, entry in trainer._extensions.items():  # Chainer keeps them in a private dict
        if isinstance(entry.extension, (_snapshot._Snapshot, _MultiNodeSnapshots, _Timed)):
            return name, entry.extension
    return None


class ResumeState(chainer.training.Extension):
    """What a snapshot must carry besides the trainer's own state: the random generators, the
    segments (each job's share of the run) and the snapshot timings. Chainer serialises it with the
    trainer."""

    trigger = 1, "epoch"
    priority = -1000  # does nothing when called; its work is in serialize()

    def __init__(self, trainer) -> None:
        self._trainer = trainer
        job = hosts.detect()
        self.segments: list[dict] = []
        self.current = {
            "job": job.record(),
            "started_at": _now(),
            "from_iteration": 0,
            "to_iteration": 0,
            "snapshot_at": None,
            "prediction": prediction.submitted()[0],  # the run's, where this job started it
        }
        self.snapshot_seconds: list[float] = []
        self.resumed_from: int | None = None

    def __call__(self, trainer) -> None:
        pass

    def snapshot_taken(self, trainer, seconds: float) -> None:
        self.snapshot_seconds.append(round(seconds, 4))

    def all_segments(self, iteration: int) -> list[dict]:
        return [*self.segments, {**self.current, "to_iteration": iteration}]

    def serialize(self, serializer) -> None:
        if isinstance(serializer, chainer.serializer.Serializer):
            # Written while the trainer is snapshotted: this segment has reached the snapshot's
            # iteration.
            self.current.update(snapshot_at=_now(), to_iteration=self.iteration())
            serializer("segments", json.dumps([*self.segments, self.current]))
            serializer("snapshot_seconds", json.dumps(self.snapshot_seconds))
            generator = cast(tuple, np.random.get_state())  # the legacy tuple form
            keys, position, has_gauss, gauss = generator[1:]
            serializer("numpy_keys", keys)
            serializer("numpy_rest", np.array([position, has_gauss, gauss], dtype=np.float64))
            version, words, gauss_next = random.getstate()
            serializer("python_words", np.array(words, dtype=np.int64))
            serializer("python_gauss", json.dumps([version, gauss_next]))
            return
        self.segments = json.loads(str(serializer("segments", "")))
        self.snapshot_seconds = json.loads(str(serializer("snapshot_seconds", "")))
        keys = serializer("numpy_keys", np.zeros(624, dtype=np.uint32))
        position, has_gauss, gauss = serializer("numpy_rest", np.zeros(3, dtype=np.float64))
        np.random.set_state(("MT19937", keys, int(position), int(has_gauss), float(gauss)))
        words = serializer("python_words", np.zeros(625, dtype=np.int64))
        version, gauss_next = json.loads(str(serializer("python_gauss", "")))
        random.setstate((version, tuple(int(w) for w in words), gauss_next))
        self.resumed_from = self.segments[-1]["to_iteration"] if self.segments else 0
        self.current["from_iteration"] = self.resumed_from

    def iteration(self) -> int:
        return self._trainer.updater.iteration


def attach(trainer, comm=None, add: bool = True) -> ResumeState | None:
    """Time the trainer's snapshots and carry the resume state in them; with `add`, give a trainer
    without snapshots Chainer's (one process) or ChainerMN's (comm). None: no snapshots at all."""
    found = find_snapshot(trainer)
    if found is None and not add:
        return None
    state = ResumeState(trainer)
    if found is None:
        snapshot = (
            _MultiNodeSnapshots(comm)
            if comm is not None
            else extensions.snapshot(filename="snapshot_iter_{.updater.iteration}", n_retains=2)
        )
        trainer.extend(snapshot, name="course_snapshot", trigger=(1, "epoch"))
        found = "course_snapshot", snapshot
    name, snapshot = found
    entry = trainer._extensions[name]
    if not isinstance(entry.extension, _Timed):
        entry.extension = _Timed(snapshot, state)
    trainer.extend(state, name="course_resume_state")
    return state


def _inner(extension):
    return extension._inner if isinstance(extension, _Timed) else extension


def _load(path: Path, trainer) -> None:
    try:
        chainer.serializers.load_npz(str(path), trainer)
    except Exception as e:  # an intact file that does not fit this trainer
        raise CourseError(
            _("the snapshot {path} does not fit this training ({error})").format(
                path=path, error=f"{type(e).__name__}: {e}"
            ),
            _(
                "start the run over: submit the job with COURSE_TRAIN_ARGS=--no-resume, or "
                "remove the run's snapshots (course.notebook.handin.remove_snapshots)"
            ),
        ) from e


def _agree_on_intact(folder: Path, comm) -> None:
    """Remove every rank's damaged snapshots down to the newest iteration whose files are intact
    on every rank, which ChainerMN's checkpointer then loads (it takes the newest one all ranks
    have)."""
    mine = {_snapshot_iteration(path): path for path in own_snapshots(folder, comm.rank)}
    common = set(mine)
    for theirs in comm.mpi_comm.allgather(sorted(i for i in mine if i is not None)):
        common &= set(theirs)
    for iteration in sorted((i for i in common if i is not None), reverse=True):
        why = snapshot_integrity.problem(mine[iteration])
        if why is not None:
            snapshot_integrity.remove(mine[iteration])
            print(snapshot_integrity.damaged_line(mine[iteration], why, comm.rank), flush=True)
        if all(comm.mpi_comm.allgather(why is None)):
            return


def resume(trainer, comm=None) -> int | None:
    """Load the newest intact snapshot in trainer.out into `trainer` (damaged ones are removed and
    said); the iteration it resumes from (None: no snapshot there). Every rank calls it;
    ChainerMN's checkpointer agrees on the iteration."""
    found = find_snapshot(trainer)
    if found is None:
        return None
    snapshot = _inner(found[1])
    if isinstance(snapshot, _MultiNodeSnapshots):
        _agree_on_intact(Path(trainer.out), comm)
        before = trainer.updater.iteration
        optimizer = trainer.updater.get_optimizer("main")
        try:
            snapshot.checkpointer.maybe_load(trainer, optimizer, path=trainer.out)
        except Exception as e:
            raise CourseError(
                _("rank {rank}'s snapshot in {folder} does not fit this training ({error})").format(
                    rank=comm.rank, folder=trainer.out, error=f"{type(e).__name__}: {e}"
                ),
                _("start the run over: submit the job with COURSE_TRAIN_ARGS=--no-resume"),
            ) from e
        if trainer.updater.iteration == before:
            return None
        # ChainerMN's optimizer spends the first update of a process broadcasting rank 0's weights,
        # when it sees parameters it has not seen; every rank loaded the same ones, so let it see
        # them now.
        if hasattr(optimizer, "is_changed"):
            optimizer.is_changed(optimizer.target)
        return trainer.updater.iteration
    newest = snapshot_integrity.newest_intact(
        own_snapshots(Path(trainer.out), None),
        _snapshot_iteration,
        lambda line: print(line, flush=True),
    )
    if newest is None:
        return None
    _load(newest, trainer)
    return trainer.updater.iteration


def remove_snapshots(trainer, comm=None) -> list[Path]:
    """After a complete run: remove this process's snapshots (each rank its own file at stage 3), so
    that a finished course fits in a submission (nbgrader counts ignored files against its size
    limit). A complete run never resumes; return what was removed."""
    removed = own_snapshots(Path(trainer.out), comm.rank if comm is not None else None)
    for path in removed:
        snapshot_integrity.remove(path)
    return removed

"""The training's watchdog: a training that stops moving ends its job with the cause, instead of
running on to the walltime.

A hung training looks like a slow one from outside: a rank stopped (SIGSTOP, a node that hangs) or
stuck (a read that never returns, a deadlock) leaves every other rank waiting in the allreduce, and
the job runs until the scheduler kills it at its walltime, whose message says "train less". A
stopped rank cannot report itself, so the others watch:

- Every process that trains runs a thread beside the training (started by the harness around
  `trainer.run()`). It looks every few seconds whether the training moved: a step made, or the
  main thread somewhere else in the code than at the last look (an evaluation or a snapshot at an
  epoch end moves; a call that never returns does not). The thread runs on while the main thread
  waits in MPI, NCCL or a read, which release the GIL.
- With several ranks, each thread also writes a heartbeat into the run folder, which every rank
  reaches (each writes its snapshots there): a counter, the last step's iteration, how long its
  training has not moved, and where its main thread is. Ranks 0 and 1 read all of them: a rank
  whose counter stands still is not running at all, since its threads stopped with it.
- When rank 0 has not moved for the limit and finds a rank stopped, or every rank not moving (it
  then names the one not waiting in ChainerMN, with where it is, or a deadlock), it writes the cause
  into the job log (course.contracts.jobend's watchdog line) and ends the job with
  MPI_Abort, which has the MPI launcher (mpiexec) end every rank, the stopped one too. Rank 1
  does so when rank 0 is the one that stopped. One process (stages 1 and 2, or one rank) names
  where it is stuck and exits.

A process stopped whole (stage 1 under SIGSTOP) has no thread left to notice: its job runs to the
walltime. A main thread that holds the GIL in a call that never returns (a C loop) stops the
watchdog's thread too: the other ranks see it stopped, and the process itself is ended by the
standard library's faulthandler, whose timer the thread pushes back at every look and which runs
without the GIL: it dumps every thread's stack into the log and exits with status 1, a little after
the limit (without the kit's line: no Python runs then). The kit's thread, not faulthandler, judges
the other hangs: its notion of moving (the stack changed) is wider than a step, it writes the cause
(course.contracts.jobend's line, the source line of each frame) and ends every rank with MPI_Abort
and EXIT_STATUS. The limit is COURSE_HANG_MINUTES (0: no watchdog),
LIMIT_VARIABLE below.
"""

from __future__ import annotations

import faulthandler
import json
import os
import sys
import threading
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from course.contracts.jobend import Hang
from course.errors import CourseError
from course.fileio import atomic_file
from course.i18n import _

LIMIT_VARIABLE = "COURSE_HANG_MINUTES"
# Minutes without moving before a training counts as hung: a first step that compiles GPU kernels
# and an epoch end's evaluation and snapshot take seconds to a few minutes, and move meanwhile.
DEFAULT_MINUTES = 10.0
EXIT_STATUS = 124  # as GNU timeout's for a command that ran out of time
WATCHERS = 2  # ranks 0 and 1 read every heartbeat: one still runs when the other stopped
# How the watchdog's lines in a job log begin (its hang line is course.contracts.jobend's).
PREFIX = "course: watchdog: "


def limit_minutes(environ: dict[str, str] | None = None) -> float:
    """The watchdog's limit in minutes (COURSE_HANG_MINUTES, else DEFAULT_MINUTES); 0: off."""
    text = (os.environ if environ is None else environ).get(LIMIT_VARIABLE, "").strip()
    if not text:
        return DEFAULT_MINUTES
    try:
        minutes = float(text)
    except ValueError:
        minutes = -1.0
    if not 0 <= minutes < float("inf"):
        raise CourseError(
            _("{variable}={value} is not a number of minutes").format(
                variable=LIMIT_VARIABLE, value=text
            ),
            _(
                "give the minutes a training may go without moving before its job is ended "
                "(default {default:g}), or 0 for no watchdog"
            ).format(default=DEFAULT_MINUTES),
        )
    return minutes


@dataclass(frozen=True)
class Beat:
    """A rank's heartbeat, as its watchdog thread writes it every few seconds."""

    rank: int
    count: int  # goes up with every beat: standing still, the rank's process does not run
    iteration: int  # the training's iteration at its last step (the watcher's is everyone's)
    still: float  # seconds the training has not moved
    waiting: bool  # its main thread waits in ChainerMN (for the other ranks)
    where: str  # where its main thread is


def beat_file(folder: Path, rank: int) -> Path:
    return Path(folder) / f".watchdog-rank{rank}.json"


def read_beat(path: Path) -> Beat | None:
    """A heartbeat file's beat; None when there is none (yet), or it cannot be read."""
    try:
        return Beat(**json.loads(Path(path).read_text()))
    except (OSError, ValueError, TypeError):
        return None


def verdict(
    me: Beat, beats: dict[int, Beat | None], stopped: list[int], limit: float
) -> Hang | None:
    """What a watcher whose training has not moved for `limit` seconds concludes, from the other
    ranks' last beats and those whose beats stood still for as long (`stopped`); None: no hang."""
    ranks, minutes = len(beats) + 1, limit / 60
    if stopped:  # the ranks step together: the watcher's last step was everyone's
        return Hang(ranks, stopped[0], minutes, me.iteration, "stopped")
    everyone = sorted([me, *(beat for beat in beats.values() if beat)], key=lambda b: b.rank)
    if len(everyone) < ranks or any(beat.still < limit / 2 for beat in everyone):
        return None  # a rank still moves (or a beat was not read): the training is slow, not hung
    stuck = [beat for beat in everyone if not beat.waiting]
    if stuck:
        return Hang(ranks, stuck[0].rank, minutes, me.iteration, "stuck", stuck[0].where)
    return Hang(ranks, None, minutes, me.iteration, "waiting")


def _frames(frame: FrameType | None) -> Iterator[FrameType]:
    while frame is not None:
        yield frame
        frame = frame.f_back


def _describe(frame: FrameType) -> str:
    return f"{frame.f_code.co_name} ({Path(frame.f_code.co_filename).name}, line {frame.f_lineno})"


def place(frame: FrameType | None, script: Path) -> tuple[str, bool]:
    """(where a thread is, whether it waits in ChainerMN) from its innermost frame: that frame, and
    the line of the training script that led there."""
    if frame is None:
        return "", False
    where = _describe(frame)
    for outer in _frames(frame):
        if Path(outer.f_code.co_filename).resolve() == script:
            where += "" if outer is frame else f", from {_describe(outer)}"
            break
    return where, f"{os.sep}chainermn{os.sep}" in frame.f_code.co_filename


class Watchdog:
    """The thread that watches one process's training (module docstring)."""

    def __init__(self, trainer: Any, comm: Any, limit: float) -> None:
        self.trainer, self.comm, self.limit = trainer, comm, limit
        self.rank = comm.rank if comm is not None else 0
        self.ranks = comm.size if comm is not None else 1
        self.every = min(30.0, max(0.5, limit / 20))
        self.folder = Path(trainer.out)
        self.script = Path(sys.argv[0]).resolve()
        self._training = threading.get_ident()  # the thread that runs the trainer
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="course-watchdog", daemon=True)

    def start(self) -> None:
        self._backstop()
        self._thread.start()

    def _backstop(self) -> None:
        """(Re)arm faulthandler's timer: it fires only if this thread cannot run for longer than
        the limit (module docstring)."""
        if sys.__stderr__ is not None:
            faulthandler.dump_traceback_later(
                self.limit + 2 * self.every, file=sys.__stderr__, exit=True
            )

    def stop(self) -> None:
        faulthandler.cancel_dump_traceback_later()
        self._stop.set()
        self._thread.join(timeout=10)
        if self.ranks > 1:
            beat_file(self.folder, self.rank).unlink(missing_ok=True)

    def _watch(self) -> None:
        iteration = self.trainer.updater.iteration
        moved = time.monotonic()
        look: tuple = ()
        count = 0
        heard: dict[int, tuple[int | None, float]] = {}  # rank -> (its count, when it changed)
        while not self._stop.wait(self.every):
            self._backstop()
            now = time.monotonic()
            frame = sys._current_frames().get(self._training)
            seen = tuple((f.f_code, f.f_lineno) for f in _frames(frame))
            if self.trainer.updater.iteration != iteration or seen != look:
                iteration, moved, look = self.trainer.updater.iteration, now, seen
            where, waiting = place(frame, self.script)
            count += 1
            me = Beat(self.rank, count, iteration, round(now - moved, 1), waiting, where)
            if self.ranks == 1:
                if me.still >= self.limit:
                    self._end(Hang(1, None, self.limit / 60, iteration, "alone", where), frame)
                continue
            self._write(me)
            if self.rank >= WATCHERS:
                continue
            beats = {r: read_beat(beat_file(self.folder, r)) for r in range(self.ranks)}
            del beats[self.rank]
            for r, beat in beats.items():
                if r not in heard or heard[r][0] != (beat.count if beat else None):
                    heard[r] = (beat.count if beat else None, now)
            if me.still < self.limit:
                continue
            stopped = sorted(r for r, (_, since) in heard.items() if now - since >= self.limit)
            hang = verdict(me, beats, stopped, self.limit)
            acting = min(r for r in range(WATCHERS) if r not in stopped)
            if hang is not None and acting == self.rank:
                self._end(hang, frame if hang.rank == self.rank else None)

    def _write(self, beat: Beat) -> None:
        try:
            with atomic_file(beat_file(self.folder, self.rank), "w") as f:
                json.dump(asdict(beat), f)
        except OSError:  # a full disk or a vanished folder: the next beat tries again
            pass

    def _end(self, hang: Hang, frame: FrameType | None) -> None:
        """Write the cause (and, for a process stuck here, its main thread's stack) into the job
        log, then end the job."""
        faulthandler.cancel_dump_traceback_later()
        if frame is not None and hang.how in ("stuck", "alone"):
            stack = "".join(traceback.format_stack(frame))
            print(PREFIX + _("the training's stack, innermost last:") + "\n" + stack, end="")
        print(hang.format(), flush=True)
        sys.stderr.flush()
        if self.ranks > 1:
            self.comm.mpi_comm.Abort(EXIT_STATUS)  # the launcher ends every rank
        os._exit(EXIT_STATUS)


@contextmanager
def watching(trainer: Any, comm: Any = None) -> Iterator[None]:
    """Watch `trainer`'s training for the block (its run), unless COURSE_HANG_MINUTES is 0."""
    minutes = limit_minutes()
    if not minutes:
        yield
        return
    dog = Watchdog(trainer, comm, minutes * 60)
    dog.start()
    try:
        yield
    finally:
        dog.stop()

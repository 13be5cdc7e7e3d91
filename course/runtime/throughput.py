"""Measuring training throughput (images per second) honestly, as a Chainer trainer extension."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np
from chainer import reporter
from chainer import serializer as serializers
from chainer.training import extension

from course.errors import CourseError
from course.i18n import _


@dataclass(frozen=True)
class ThroughputStats:
    """The steady-state figures of one run, all workers together."""

    images_per_sec: float  # counted images / counted seconds
    std: float  # spread of the per-iteration rates
    median: float
    images_per_iteration: int
    counted_iterations: int
    counted_seconds: float
    warmup_iterations: int
    excluded_iterations: int  # right after an epoch end: they include evaluation and snapshots

    def as_dict(self) -> dict:
        return asdict(self)


class Throughput(extension.Extension):
    """Images per second over the steady state of training, summed over all workers.

    The extension is called after every update, before the other extensions, so each interval
    between two calls holds one update plus whatever the other extensions did after the
    previous one. Not counted: the first `warmup` iterations (memory allocation, cuDNN
    autotuning, first MPI connections) and every iteration that follows an epoch end, whose
    interval includes the evaluation and snapshots that ran there.

    Data parallelism here is synchronous (all workers take a step together), so one worker's
    clock times everyone: an iteration moves `batch_size` images on each of the workers.

    Args:
        batch_size: images per iteration on ONE worker (the iterator's batch size).
        workers: how many workers step together (GPUs of MultiprocessParallelUpdater).
        comm: a ChainerMN communicator; when given, workers = comm.size.
        warmup: iterations left out at the start.
        clock: seconds as a float (tests pass a fake clock).
    """

    trigger = 1, "iteration"
    priority = extension.PRIORITY_WRITER + 100  # before the Evaluator and LogReport
    name = "Throughput"  # type: ignore[assignment]  # Chainer declares it None

    def __init__(
        self,
        batch_size: int,
        workers: int = 1,
        comm=None,
        warmup: int = 5,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        if batch_size < 1 or workers < 1 or warmup < 0:
            raise ValueError(_("Throughput needs batch_size >= 1, workers >= 1 and warmup >= 0"))
        self.batch_size = batch_size
        self.workers = comm.size if comm is not None else workers
        self.warmup = warmup
        self._clock = clock
        self._last: float | None = None
        self._after_epoch_end = False
        self._seen = 0
        self._durations: list[float] = []
        self._excluded = 0
        self._earlier_warmup = 0  # warm-up iterations of the jobs this run resumed from

    @property
    def images_per_iteration(self) -> int:
        return self.batch_size * self.workers

    def initialize(self, trainer) -> None:
        iterator = trainer.updater.get_iterator("main")
        per_step = getattr(iterator, "batch_size", self.batch_size)
        if per_step != self.batch_size:
            raise CourseError(
                _(
                    "Throughput(batch_size={batch_size}) but the training iterator draws "
                    "{per_step} images per step"
                ).format(batch_size=self.batch_size, per_step=per_step),
                _("pass the per-worker batch size of the training iterator"),
            )
        self._last = self._clock()

    def __call__(self, trainer) -> None:
        now = self._clock()
        if self._last is None:  # called without initialize(), e.g. by a hand-written loop
            self._last = now
            return
        duration, self._last = now - self._last, now
        self._seen += 1
        if self._seen <= self.warmup:
            pass
        elif self._after_epoch_end:
            self._excluded += 1
        elif duration > 0:
            self._durations.append(duration)
            reporter.report({"throughput": self.images_per_iteration / duration})
        self._after_epoch_end = bool(trainer.updater.is_new_epoch)

    def stats(self) -> ThroughputStats | None:
        """The figures so far; None until at least two iterations were counted."""
        if len(self._durations) < 2:
            return None
        rates = [self.images_per_iteration / d for d in self._durations]
        seconds = sum(self._durations)
        return ThroughputStats(
            images_per_sec=self.images_per_iteration * len(self._durations) / seconds,
            std=statistics.stdev(rates),
            median=statistics.median(rates),
            images_per_iteration=self.images_per_iteration,
            counted_iterations=len(self._durations),
            counted_seconds=seconds,
            warmup_iterations=self._warmup_so_far(),
            excluded_iterations=self._excluded,
        )

    def _warmup_so_far(self) -> int:
        return self._earlier_warmup + min(self._seen, self.warmup)

    def serialize(self, serializer) -> None:
        """Carry the counted steps across a resume, in the trainer's snapshot. A resumed job warms
        up again, and that warm-up (and the restart before it) is left out like the first job's."""
        if isinstance(serializer, serializers.Serializer):
            serializer("durations", np.asarray(self._durations, dtype=np.float64))
            serializer(
                "counts", np.asarray([self._excluded, self._warmup_so_far()], dtype=np.int64)
            )
            return
        self._durations = [float(d) for d in serializer("durations", None)]
        self._excluded, self._earlier_warmup = (int(n) for n in serializer("counts", None))

"""The runtime's facade for stage scripts: `from course.runtime import harness`, then harness.X.

A stage script builds its Trainer (that is the exercise) and hands it to `run`, which adds
the reporting the course needs, runs it, prints the summary lines the grader checks against
the job log (course.contracts.joblog), and writes the results file (course.contracts.results).
The students' generated scripts (course.runtime.mains, course.notebook.scripts) also call the
names imported below from the modules that hold them: flags (parser, parse_args), devices
(set_seed, resolve_device, use_gpu, communicator_name, gpus_for_multiprocess) and the
optimizer's policy (apply_lr_rule, apply_lr_drop, add_weight_decay); the record itself is
course.runtime.recorder.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import sys
from pathlib import Path

import chainer
from chainer.training import extensions

from course import fileio
from course.contracts import joblog, results, stages
from course.errors import CourseError
from course.fileio import sha256_file
from course.i18n import _
from course.runtime import checkpoint, data, profile, watchdog
from course.runtime.devices import (
    check_communicator,
    communicator_name,
    gpus_for_multiprocess,
    resolve_device,
    set_seed,
    use_gpu,
)
from course.runtime.flags import DEFAULT_SEED, parse_args, parser
from course.runtime.lr_policy import add_weight_decay, apply_lr_drop, apply_lr_rule, observe_rate
from course.runtime.recorder import ResultsWriter, RunRecorder
from course.runtime.throughput import ThroughputStats

__all__ = [
    "DEFAULT_SEED",
    "add_weight_decay",
    "apply_lr_drop",
    "apply_lr_rule",
    "communicator_name",
    "gpus_for_multiprocess",
    "load_data",
    "parse_args",
    "parser",
    "resolve_device",
    "run",
    "set_seed",
    "use_gpu",
]

# Free space a run needs before it starts: a few snapshots of the course's models and the results.
MIN_FREE_BYTES = 256 * 2**20


def load_data(args: argparse.Namespace) -> tuple:
    """(train, test) of --dataset, recording the resolved name on `args`."""
    args.dataset = data.resolve(args.dataset)
    return data.load(args.dataset)


class _LogStream:
    """A PrintReport's output without the terminal codes it writes (ESC[J): job logs are files."""

    def __init__(self, out) -> None:
        self._out = out

    def write(self, text: str) -> int:
        return self._out.write(joblog.clean(text))

    def flush(self) -> None:
        self._out.flush()


def _clean_reports(trainer) -> None:
    for entry in trainer._extensions.values():  # Chainer keeps them in a private dict
        report = entry.extension
        if isinstance(report, extensions.PrintReport) and not isinstance(report._out, _LogStream):
            report._out = _LogStream(report._out)


def _require_throughput(trainer) -> None:
    try:
        trainer.get_extension("Throughput")
    except ValueError:
        raise CourseError(
            _("the trainer has no course.Throughput extension, so images/sec cannot be measured"),
            _("add  {code}  when you build the trainer").format(
                code="trainer.extend(course.Throughput(batch_size, ...))"
            ),
        ) from None


def _claim_run_folder(trainer, args: argparse.Namespace, comm, devices, state) -> int | None:
    """Train in an unfinished run of the same training when there is one (--resume), else in
    args.out; load its newest snapshot. Returns the iteration resumed from (None: a new run)."""
    reporting = comm is None or comm.rank == 0
    workers = comm.size if comm is not None else len(devices or [None])
    if reporting:
        script = Path(sys.argv[0])
        key = checkpoint.run_key(args, workers, sha256_file(script) if script.is_file() else None)
        claimed = checkpoint.claim_folder(
            trainer.out, args.stage, key, resume=args.resume and state is not None
        )
    else:
        claimed = None
    if comm is not None:
        claimed = comm.mpi_comm.bcast(claimed, root=0)
    assert claimed is not None  # every rank has the reporting worker's claim by now
    trainer.out, resuming = claimed
    args.out = trainer.out
    if reporting:
        fileio.require_free_space(
            Path(trainer.out),
            MIN_FREE_BYTES,
            # TRANSLATORS: what needs the space, in "... {what} need about 256 MiB"
            _("its results and snapshots"),
        )
    if not resuming:
        return None
    resumed = checkpoint.resume(trainer, comm)
    if resumed is None and reporting:
        print(
            "course: "
            + _("no intact snapshot left in {folder}: this run starts over").format(
                folder=trainer.out
            ),
            flush=True,
        )
    return resumed


def run(
    trainer: chainer.training.Trainer,
    args: argparse.Namespace,
    *,
    comm=None,
    devices: dict | list | None = None,
) -> ThroughputStats | None:
    """Run `trainer`; on the reporting worker print the summary and write the results file.

    comm: the ChainerMN communicator (stage 3); every rank must call run().
    devices: the devices of MultiprocessParallelUpdater (stage 2).
    A run of the same training that a job left unfinished (its walltime ran out) continues from its
    newest snapshot (course.runtime.checkpoint). Stage 1's snapshots are the student's exercise;
    stages 2 and 3 get Chainer's and ChainerMN's from here.
    Returns the ThroughputStats (None when too few iterations were counted).
    """
    _require_throughput(trainer)
    if comm is not None:
        check_communicator(comm)
    reporting = comm is None or comm.rank == 0
    state = checkpoint.attach(trainer, comm, add=args.stage != stages.SINGLE_GPU.name)
    resumed_from = _claim_run_folder(trainer, args, comm, devices, state)
    record = RunRecorder(trainer, args, args.stage, comm, devices, state)
    if reporting:
        try:
            trainer.get_extension("LogReport")
        except ValueError:
            trainer.extend(extensions.LogReport())
        trainer.extend(ResultsWriter(record), name="course_results")
        trainer.extend(observe_rate, name="course_observe_lr")
        _clean_reports(trainer)
        print(record.header(), flush=True)
        for line in record.prediction_lines():
            print(line, flush=True)
        for place in record.places:
            print(place.format(), flush=True)
        if resumed_from is not None and state is not None:  # only a snapshotting run resumes
            print(
                joblog.resumed_line(trainer.out, resumed_from, state.segments[-1]["job"]["id"]),
                flush=True,
            )
        elif state is None:
            print(joblog.NO_SNAPSHOTS, flush=True)
        if record.record["device_kind"] == "gpu" and not chainer.backends.cuda.cudnn_enabled:
            print(
                "course: "
                + _(
                    "warning: Chainer does not use cuDNN here, so convolutions run slower; "
                    "python -m course doctor says how to fix it"
                ),
                flush=True,
            )
    profiler = (
        profile.StepProfile(trainer, comm, args.warmup) if getattr(args, "profile", False) else None
    )
    try:
        with profiler.hook if profiler else contextlib.nullcontext():
            with watchdog.watching(trainer, comm):  # a hung training ends its job, named
                trainer.run()
    except BaseException as e:
        if reporting:
            try:
                record.write(trainer, complete=False, error=_failure(e, trainer.out))
            except OSError as unwritten:  # a full disk takes no record either: say why, go on
                print(
                    "course: "
                    + _("{file} could not be written in {folder} either ({error})").format(
                        file=results.FILENAME, folder=trainer.out, error=unwritten.strerror
                    ),
                    flush=True,
                )
        if isinstance(e, OSError) and e.errno == errno.ENOSPC:
            raise CourseError(
                _failure(e, trainer.out),
                _(
                    "free space there, or train with --out on another file system; the job "
                    "resumes from its last snapshot when submitted again"
                ),
            ) from e
        raise
    stats = trainer.get_extension("Throughput").stats()
    if profiler is not None:
        record.record["profile"] = profiler.gathered()  # every rank sends its phases to rank 0
    if reporting:
        for summary in (record.record.get("profile") or {}).get("ranks", []):
            print(profile.line(summary), flush=True)
        if stats is None:
            print(joblog.throughput_not_measured(args.warmup), flush=True)
        else:
            print(
                joblog.throughput_line(
                    stats.images_per_sec,
                    stats.counted_iterations,
                    stats.warmup_iterations,
                    stats.excluded_iterations,
                ),
                flush=True,
            )
        # The log names the finished record before it replaces the unfinished one, so a kill at
        # any moment leaves either a run the next job resumes or one its log vouches for.
        record.write(
            trainer,
            complete=True,
            announce=lambda digest: print(joblog.results_line(record.path, digest), flush=True),
        )
    # Only once the log vouches for the record (every rank waits for rank 0's): before, the next
    # job resumes from them.
    if comm is not None:
        comm.mpi_comm.barrier()
    checkpoint.remove_snapshots(trainer, comm)
    return stats


def _failure(error: BaseException, out: str) -> str:
    """The error for the results file; a full disk names the file system's folder and what is left
    there."""
    if isinstance(error, OSError) and error.errno == errno.ENOSPC:
        free = fileio.free_bytes(Path(out)) // 2**20
        return _("no space left on the file system of {folder} ({free} MiB free)").format(
            folder=out, free=free
        )
    return f"{type(error).__name__}: {error}"

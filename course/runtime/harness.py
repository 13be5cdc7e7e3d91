"""What every stage's training script shares: its flags, its seed and the run itself.

A stage script builds its Trainer (that is the exercise) and hands it to `run`, which adds
the reporting the course needs, runs it, prints the summary lines the grader checks against
the job log (course.joblog), and writes the results file (course.results).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import errno
import os
import platform
import random
import re
import socket
import sys
import time
from pathlib import Path

import chainer
import numpy as np
from chainer.training import extensions

from course import __version__, fileio, gpu, joblog, results, stages
from course.cluster import hosts
from course.errors import CourseError
from course.fileio import sha256_file
from course.runtime import checkpoint, data, models, profile
from course.runtime.throughput import ThroughputStats

DEFAULT_SEED = 0
# Free space a run needs before it starts: a few snapshots of the course's models and the results.
MIN_FREE_BYTES = 256 * 2**20

COMMUNICATOR_NAMES = {
    "NaiveCommunicator": "naive",
    "FlatCommunicator": "flat",
    "NonCudaAwareCommunicator": "non_cuda_aware",
    "PureNcclCommunicator": "pure_nccl",
    "DummyCommunicator": "dummy",
}


def _run_tag() -> str:
    """The run folder's suffix: the job's id (all its ranks share it), else the time made unique.

    Outside a job the process id keeps runs started in the same second on one machine apart, and
    a random part keeps apart those of other machines sharing the folder, or two calls in one process.
    """
    tag = os.environ.get("COURSE_RUN_TAG") or hosts.detect().job_id
    if not tag:
        tag = f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-{os.urandom(2).hex()}"
    return re.sub(r"[^A-Za-z0-9._-]", "_", tag)


def parser(stage: str) -> argparse.ArgumentParser:
    """The flags of a stage script. Defaults suit a GPU; the job scripts pass the site's choices."""
    stages.get(stage)
    parser = argparse.ArgumentParser(description=f"CIFAR-10 training, course stage {stage}")
    parser.add_argument(
        "--dataset",
        default=os.environ.get("COURSE_DATASET", "auto"),
        help="data set name (python -m course data list); auto: real CIFAR-10 if prepared",
    )
    parser.add_argument("--model", default="vgg", help="vgg or resnet")
    parser.add_argument(
        "--width", type=int, default=64, help="channels of the first block (16 for CPU)"
    )
    parser.add_argument(
        "--batchsize", "-b", type=int, default=64, help="images per step on ONE worker"
    )
    parser.add_argument("--epoch", "-e", type=int, default=4, help="epochs to train")
    parser.add_argument(
        "--lr", type=float, default=0.05, help="learning rate for --batchsize on one worker"
    )
    parser.add_argument("--warmup", type=int, default=5, help="iterations left out of images/sec")
    parser.add_argument(
        "--lr-rule",
        choices=stages.LR_RULES,
        default=stages.TAUGHT_LR_RULE,
        help="how the learning rate follows the total batch of N workers (stage 3)",
    )
    parser.add_argument(
        "--lr-warmup-epochs",
        type=float,
        default=1.0,
        help="epochs over which the warmup rule ramps the learning rate up to N x --lr",
    )
    parser.add_argument(
        "--lr-drop-epochs",
        type=float,
        default=1.0,
        help="the last epochs train at a tenth of the learning rate (a step decay; 0: none)",
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=DEFAULT_SEED,
        help="seed of the weights, the batch order, dropout and the data's split over ranks",
    )
    parser.add_argument("--out", default=None, help="run folder (default runs/<stage>-<job id>)")
    parser.add_argument(
        "--resume",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="continue an unfinished run of the same training from its newest snapshot",
    )
    if stage == stages.SINGLE_GPU.name:
        parser.add_argument("--device", default="auto", help="@cupy:0, @numpy, or auto")
    elif stage == stages.MULTI_GPU.name:
        parser.add_argument(
            "--gpus", type=int, default=None, help="GPUs to use (default: all visible)"
        )
    else:
        parser.add_argument(
            "--communicator",
            default="auto",
            help="ChainerMN communicator; auto: pure_nccl on GPUs, naive on CPUs",
        )
        parser.add_argument(
            "--gpu",
            action=argparse.BooleanOptionalAction,
            default=None,
            help="one GPU per rank (default: when the node has GPUs)",
        )
        parser.add_argument(
            "--profile",
            action="store_true",
            help="time every step's data, forward, backward, allreduce and update, per rank",
        )
    return parser


def parse_args(stage: str, argv: list[str] | None = None, more_flags=None) -> argparse.Namespace:
    """The flags of a stage script (sys.argv, or `argv`), with the run folder filled in.

    more_flags: a function that adds a script's own flags to the parser.
    """
    flags = parser(stage)
    if more_flags is not None:
        more_flags(flags)
    args = flags.parse_args(argv)
    if stage == stages.MULTI_NODE.name:
        # Without this an exception on one rank leaves the others waiting in MPI until the walltime ends.
        from chainermn import global_except_hook

        if (
            sys.excepthook is not global_except_hook._global_except_hook
        ):  # the job may have set it already
            global_except_hook.add_hook()
    args.stage = stage
    args.out = args.out or str(Path(results.RUNS_DIR) / f"{stage}-{_run_tag()}")
    return args


def set_seed(seed: int, device: chainer.backend.Device | None = None) -> None:
    """Seed every generator training draws from, so that the same seed gives the same run on a CPU.

    NumPy's global generator gives Chainer's initial weights, SerialIterator's batch order and
    dropout on the CPU; on a GPU device CuPy's generator gives dropout there (cuDNN may still
    pick non-deterministic algorithms: chainer.config.cudnn_deterministic trades speed for that).
    """
    random.seed(seed)
    np.random.seed(seed % 2**32)
    if isinstance(device, chainer.backend.GpuDevice):
        with device:
            chainer.backends.cuda.cupy.random.seed(seed)


def resolve_device(spec: str) -> str:
    """'auto': @cupy:0 where CuPy sees a GPU, else @numpy; any other device name as it is."""
    return gpu.resolve_device(spec)


def use_gpu(flag: bool | None) -> bool:
    """--gpu/--no-gpu, or (None) whether this node has a GPU that CuPy can use."""
    if flag is not None:
        return flag
    return gpu.resolve_device("auto") != "@numpy"


def communicator_name(name: str, on_gpu: bool) -> str:
    """'auto' is pure_nccl on GPUs (NCCL does the allreduce) and naive on CPUs (the only one there)."""
    if name != "auto":
        return name
    return "pure_nccl" if on_gpu else "naive"


def gpus_for_multiprocess(requested: int | None) -> list[int]:
    """GPU ids for MultiprocessParallelUpdater, checked without initialising CUDA in this process."""
    found = gpu.visible_gpus().count
    wanted = requested or found
    if found < 2 or wanted < 2 or wanted > found:
        raise CourseError(
            f"stage 2 needs at least 2 GPUs on this node; it has {found}"
            + (f" and --gpus {requested} was asked" if requested else ""),
            f"submit it to a GPU node: qsub -j oe {stages.MULTI_GPU.job_path}",
        )
    from cupy.cuda import nccl

    if not nccl.available:
        raise CourseError(
            "CuPy cannot load NCCL, which MultiprocessParallelUpdater needs",
            'pip install -e ".[gpu]"  (installs nvidia-nccl-cu12); then: python -m course doctor',
        )
    return list(range(wanted))


class _FinalDrop(chainer.training.Extension):
    """From iteration `start` on, a tenth of the rate the schedule sets (a step decay, as Goyal et al.).

    It runs after the other schedule extensions of the same iteration, and scales the rate it found
    when the drop began, so that it works over a LinearShift that sets the rate at every update too.
    """

    trigger = 1, "iteration"
    priority = chainer.training.PRIORITY_READER - 10

    def __init__(self, start: int) -> None:
        self.start = start
        self._rate: float | None = None

    def __call__(self, trainer) -> None:
        if trainer.updater.iteration >= self.start:
            optimizer = trainer.updater.get_optimizer("main")
            self._rate = optimizer.lr if self._rate is None else self._rate
            optimizer.lr = self._rate * 0.1

    def initialize(self, trainer) -> None:
        """A run resumed inside the drop trains at the dropped rate from its first step (the optimizer's
        rate is not in a snapshot)."""
        if self._rate is not None:
            trainer.updater.get_optimizer("main").lr = self._rate * 0.1

    def serialize(self, serializer) -> None:
        rate = serializer("rate", -1.0 if self._rate is None else self._rate)
        self._rate = None if rate < 0 else float(rate)


def _iterations_per_epoch(trainer, args: argparse.Namespace) -> int:
    return max(1, len(trainer.updater.get_iterator("main").dataset) // args.batchsize)


def apply_lr_drop(trainer, args: argparse.Namespace) -> int | None:
    """The last --lr-drop-epochs at a tenth of the rate; returns the first iteration of the drop (None: none)."""
    if args.lr_drop_epochs <= 0:
        return None
    start = round((args.epoch - args.lr_drop_epochs) * _iterations_per_epoch(trainer, args))
    trainer.extend(_FinalDrop(max(0, start)), name="course_lr_drop")
    return max(0, start)


def apply_lr_rule(trainer, args: argparse.Namespace, workers: int, schedule) -> dict:
    """Set the learning rate of `trainer`'s optimizer by args.lr_rule for `workers` workers, then the drop.

    The optimizer starts at args.lr, the single-worker rate. schedule(base_lr, n_workers,
    warmup_iterations) is the warm-up extension (the student's, in stage 3). Returns what was
    done, for the results file (also kept as args.lr_plan).
    """
    optimizer = trainer.updater.get_optimizer("main")
    warmup = (
        round(args.lr_warmup_epochs * _iterations_per_epoch(trainer, args))
        if args.lr_rule == "warmup"
        else 0
    )
    target = args.lr if args.lr_rule == "constant" else args.lr * workers
    if args.lr_rule == "linear" or (args.lr_rule == "warmup" and (warmup == 0 or workers == 1)):
        optimizer.lr = target
        warmup = 0
    elif args.lr_rule == "warmup":
        trainer.extend(schedule(args.lr, workers, warmup), name="learning_rate_schedule")
    args.lr_plan = {
        "rule": args.lr_rule,
        "start": args.lr if warmup else target,
        "target": target,
        "warmup_iterations": warmup,
        "drop_from_iteration": apply_lr_drop(trainer, args),
    }
    return args.lr_plan


def load_data(args: argparse.Namespace) -> tuple:
    """(train, test) of --dataset, recording the resolved name on `args`."""
    args.dataset = data.resolve(args.dataset)
    return data.load(args.dataset)


def _versions(comm) -> dict:
    found = {
        "python": platform.python_version(),
        "chainer": chainer.__version__,
        "numpy": sys.modules["numpy"].__version__,
        "course": __version__,
    }
    cuda = chainer.backends.cuda
    if cuda.available:
        found["cupy"] = cuda.cupy.__version__
        found["cuda_driver"] = (
            gpu.visible_gpus().driver or None
        )  # nvidia-smi's: asking CUDA would initialise it
        found["cudnn"] = cuda.libcudnn.getVersion() if cuda.cudnn_enabled else None
        try:
            found["nccl"] = cuda.cupy.cuda.nccl.get_version()
        except Exception:  # NCCL is optional; any failure here means "not usable"
            found["nccl"] = None
    if comm is not None:
        import mpi4py
        from mpi4py import MPI

        found["mpi4py"] = mpi4py.__version__
        found["mpi"] = MPI.Get_library_version().splitlines()[0].split(",")[0].strip()
    return found


def _learning_rate(optimizer) -> float | None:
    """The base learning rate: lr (SGD family) or alpha (Adam, whose .lr raises before the first step)."""
    hyperparam = getattr(optimizer, "hyperparam", None)
    for name in ("lr", "alpha"):
        value = getattr(hyperparam, name, None)
        if isinstance(value, (int, float)):
            return float(value)
    return None  # AdaDelta and the like have none


def _device_of(model, devices: dict | list | None = None) -> tuple[list[str], str | None]:
    """(device names, GPU model or None): the GPUs MultiprocessParallelUpdater was given (it moves the
    model to them only at its first update, after the record is made), else the model's device.
    GPU models come from nvidia-smi where it is, so that every stage names a GPU the same way."""
    if devices is not None:
        return gpu.assigned_devices(
            devices
        )  # named without initialising CUDA before the updater forks
    device = model.device
    if isinstance(device, chainer.backend.GpuDevice):
        name = (
            gpu.gpu_models([device.device.id])
            or [
                chainer.backends.cuda.cupy.cuda.runtime.getDeviceProperties(device.device.id)[
                    "name"
                ]
            ]
        )[0]
        return [str(device)], name.decode() if isinstance(name, bytes) else name
    return [str(device)], None


class _ResultsWriter(chainer.training.Extension):
    """Writes the results file at every epoch end, so a killed job leaves what it had."""

    trigger = 1, "epoch"
    priority = chainer.training.PRIORITY_READER - 50  # after LogReport

    def __init__(self, run: _Run) -> None:
        self._run = run

    def __call__(self, trainer) -> None:
        self._run.write(trainer, complete=False)


class _Run:
    """One training run's record, kept by the reporting worker."""

    def __init__(
        self, trainer, args, stage: str, comm, devices, state: checkpoint.ResumeState | None
    ) -> None:
        self.args, self.stage, self.comm, self.state = args, stage, comm, state
        self.job = hosts.detect()
        self.started = datetime.datetime.now().astimezone()
        self.path = Path(trainer.out) / results.FILENAME
        optimizer = trainer.updater.get_optimizer("main")
        self.model = model = optimizer.target
        device, gpu_model = _device_of(model, devices)
        gather = comm.mpi_comm.allgather if comm is not None else (lambda x: [x])
        self.hosts = gather(socket.gethostname())
        train_examples = len(trainer.updater.get_iterator("main").dataset)
        self.places = (
            []
            if comm is None
            else [
                joblog.RankPlace(rank, comm.size, *place)
                for rank, place in enumerate(
                    gather(
                        (
                            socket.gethostname(),
                            comm.intra_rank,
                            comm.inter_rank,
                            device[0],
                            train_examples,
                        )
                    )
                )
            ]
        )
        self.devices = gather(device[0]) if devices is None else device
        self.workers = comm.size if comm is not None else len(self.devices)
        updater = type(trainer.updater).__name__
        lr = _learning_rate(optimizer)
        # MultiprocessParallelUpdater divides lr by the GPU count because it sums their gradients.
        effective_lr = (
            lr * self.workers if lr is not None and updater == "MultiprocessParallelUpdater" else lr
        )
        script = Path(sys.argv[0])
        self.record = {
            "stage": stage,
            "script": {
                "name": script.name,
                "sha256": sha256_file(script) if script.is_file() else None,
            },
            "job": {
                "id": self.job.job_id,
                "scheduler": self.job.scheduler,
                "name": self.job.job_name,
            },
            "hosts": self.hosts,
            "workers": self.workers,
            "devices": self.devices,
            "device_kind": "gpu" if gpu_model else "cpu",
            "gpu_model": gpu_model,
            "updater": updater,
            "communicator": COMMUNICATOR_NAMES.get(type(comm).__name__, type(comm).__name__)
            if comm
            else None,
            "allreduce": os.environ.get("COURSE_ALLREDUCE") if comm else None,
            "batch_size": {"per_worker": args.batchsize, "total": args.batchsize * self.workers},
            "learning_rate": (getattr(args, "lr_plan", None) or {}).get("target", effective_lr),
            "lr_schedule": getattr(args, "lr_plan", None),
            "optimizer": {"name": type(optimizer).__name__, "lr": lr},
            "model": {"name": args.model, "width": args.width},
            "dataset": {"name": args.dataset, "train_per_worker": train_examples},
            "epochs_planned": args.epoch,
            "seed": getattr(args, "seed", None),
            "versions": _versions(comm),
            "started_at": self.started.isoformat(timespec="seconds"),
        }

    def _segments(self, trainer) -> dict:
        """The jobs that worked on this run and what its snapshots cost (no snapshots: nothing)."""
        if self.state is None:
            return {"segments": None, "snapshots": None}
        segments = self.state.all_segments(trainer.updater.iteration)
        return {
            "started_at": segments[0]["started_at"],
            "segments": segments,
            "snapshots": {
                "seconds": self.state.snapshot_seconds,
                "files": [p.name for p in checkpoint.snapshot_files(trainer.out)],
            },
        }

    def header(self) -> str:
        return joblog.RunHeader(
            stage=self.stage,
            job_id=self.job.job_id,
            scheduler=self.job.scheduler,
            workers=self.workers,
            hosts=self.hosts,
            devices=self.devices,
            batch_per_worker=self.args.batchsize,
            learning_rate=self.record["learning_rate"],
            seed=self.record["seed"],
            lr_rule=(self.record["lr_schedule"] or {}).get("rule"),
            communicator=self.record["communicator"],
            allreduce=self.record["allreduce"],
            gpu_model=self.record["gpu_model"],
        ).format()

    def write(self, trainer, complete: bool, error: str | None = None) -> str:
        throughput = trainer.get_extension("Throughput").stats()
        log = trainer.get_extension("LogReport").log
        finished = datetime.datetime.now().astimezone()
        # Counted here: layers with lazily sized inputs have no parameters before the first step.
        # The sizes of the arrays too: ChainerMN's naive communicator allreduces each on its own (the cost model).
        model = {
            **self.record["model"],
            "parameters": models.count_parameters(self.model),
            "arrays": [p.size for p in self.model.params() if p.array is not None],
        }
        record = {
            **self.record,
            "model": model,
            "complete": complete,
            "error": error,
            "throughput": throughput.as_dict() if throughput else None,
            **self._segments(trainer),
            "log": [dict(entry) for entry in log],
            "finished_at": finished.isoformat(timespec="seconds"),
            "wall_seconds": round((finished - self.started).total_seconds(), 3),
        }
        return results.write(self.path, record)


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


@chainer.training.make_extension(
    trigger=(1, "iteration"), priority=chainer.training.PRIORITY_WRITER
)
def _observe_rate(trainer) -> None:
    """The rate the optimizer really uses, into the log (LogReport averages it per entry); any optimizer."""
    rate = _learning_rate(trainer.updater.get_optimizer("main"))
    if rate is not None:
        chainer.reporter.report({"lr": rate})


def _require_throughput(trainer) -> None:
    try:
        trainer.get_extension("Throughput")
    except ValueError:
        raise CourseError(
            "the trainer has no course.Throughput extension, so images/sec cannot be measured",
            "add  trainer.extend(course.Throughput(batch_size, ...))  when you build the trainer",
        ) from None


def _claim_run_folder(trainer, args: argparse.Namespace, comm, devices, state) -> int | None:
    """Train in an unfinished run of the same training when there is one (--resume), else in args.out;
    load its newest snapshot. Returns the iteration resumed from (None: a new run)."""
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
    trainer.out, resuming = comm.mpi_comm.bcast(claimed, root=0) if comm is not None else claimed
    args.out = trainer.out
    if reporting:
        fileio.require_free_space(Path(trainer.out), MIN_FREE_BYTES, "its results and snapshots")
    return checkpoint.resume(trainer, comm) if resuming else None


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
    reporting = comm is None or comm.rank == 0
    state = checkpoint.attach(trainer, comm, add=args.stage != stages.SINGLE_GPU.name)
    resumed_from = _claim_run_folder(trainer, args, comm, devices, state)
    record = _Run(trainer, args, args.stage, comm, devices, state)
    if reporting:
        try:
            trainer.get_extension("LogReport")
        except ValueError:
            trainer.extend(extensions.LogReport())
        trainer.extend(_ResultsWriter(record), name="course_results")
        trainer.extend(_observe_rate, name="course_observe_lr")
        _clean_reports(trainer)
        print(record.header(), flush=True)
        for place in record.places:
            print(place.format(), flush=True)
        if resumed_from is not None:
            print(
                joblog.resumed_line(trainer.out, resumed_from, state.segments[-1]["job"]["id"]),
                flush=True,
            )
        elif state is None:
            print(joblog.NO_SNAPSHOTS, flush=True)
        if record.record["device_kind"] == "gpu" and not chainer.backends.cuda.cudnn_enabled:
            print(
                "course: warning: Chainer does not use cuDNN here, so convolutions run slower; "
                "python -m course doctor says how to fix it",
                flush=True,
            )
    profiler = (
        profile.StepProfile(trainer, comm, args.warmup) if getattr(args, "profile", False) else None
    )
    try:
        with profiler.hook if profiler else contextlib.nullcontext():
            trainer.run()
    except BaseException as e:
        if reporting:
            record.write(trainer, complete=False, error=_failure(e, trainer.out))
        if isinstance(e, OSError) and e.errno == errno.ENOSPC:
            raise CourseError(
                _failure(e, trainer.out),
                "free space there, or train with --out on another "
                "file system; the job resumes from its last snapshot when submitted again",
            ) from e
        raise
    stats = trainer.get_extension("Throughput").stats()
    if profiler is not None:
        record.record["profile"] = profiler.gathered()  # every rank sends its phases to rank 0
    if reporting:
        for summary in (record.record.get("profile") or {}).get("ranks", []):
            print(profile.line(summary), flush=True)
        digest = record.write(trainer, complete=True)
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
        print(joblog.results_line(record.path, digest), flush=True)
        checkpoint.keep_last(trainer)
    return stats


def _failure(error: BaseException, out: str) -> str:
    """The error for the results file; a full disk names the file system's folder and what is left there."""
    if isinstance(error, OSError) and error.errno == errno.ENOSPC:
        return f"no space left on the file system of {out} ({fileio.free_bytes(Path(out)) // 2**20} MiB free)"
    return f"{type(error).__name__}: {error}"

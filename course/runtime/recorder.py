"""The results record's writer: what a run was, kept by the reporting worker and written as the
results file (course.contracts.results declares its fields) at every epoch end and at the end."""

from __future__ import annotations

import datetime
import os
import platform
import socket
import sys
from collections.abc import Callable
from pathlib import Path

import chainer

from course import __version__, gpu
from course.cluster import hosts
from course.contracts import joblog, prediction, results
from course.fileio import sha256_file
from course.runtime import checkpoint, models
from course.runtime.lr_policy import learning_rate

COMMUNICATOR_NAMES = {
    "NaiveCommunicator": "naive",
    "FlatCommunicator": "flat",
    "NonCudaAwareCommunicator": "non_cuda_aware",
    "PureNcclCommunicator": "pure_nccl",
    "DummyCommunicator": "dummy",
}


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


def device_of(model, devices: dict | list | None = None) -> tuple[list[str], str | None]:
    """(device names, GPU model or None): the GPUs MultiprocessParallelUpdater was given (it moves
    the model to them only at its first update, after the record is made), else the model's device.
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


class ResultsWriter(chainer.training.Extension):
    """Writes the results file at every epoch end, so a killed job leaves what it had."""

    trigger = 1, "epoch"
    priority = chainer.training.PRIORITY_READER - 50  # after LogReport

    def __init__(self, run: RunRecorder) -> None:
        self._run = run

    def __call__(self, trainer) -> None:
        self._run.write(trainer, complete=False)


class RunRecorder:
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
        device, gpu_model = device_of(model, devices)
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
        lr = learning_rate(optimizer)
        # MultiprocessParallelUpdater divides lr by the GPU count because it sums their gradients.
        effective_lr = (
            lr * self.workers if lr is not None and updater == "MultiprocessParallelUpdater" else lr
        )
        script = Path(sys.argv[0])
        given, self.prediction_warning = prediction.submitted()
        # A resumed run keeps the prediction submitted with the job that started it.
        self.prediction = state.segments[0].get("prediction") if state and state.segments else given
        self.record = {
            "stage": stage,
            "script": {
                "name": script.name,
                "sha256": sha256_file(script) if script.is_file() else None,
            },
            "job": self.job.record(),
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
            "prediction": self.prediction,
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
            # one worker: every rule gives the single-worker rate, so the header names none
            lr_rule=(self.record["lr_schedule"] or {}).get("rule") if self.workers > 1 else None,
            communicator=self.record["communicator"],
            allreduce=self.record["allreduce"],
            gpu_model=self.record["gpu_model"],
        ).format()

    def prediction_lines(self) -> list[str]:
        """The log's line of the prediction this job was given (after a warning, if unreadable)."""
        given = prediction.submitted()[0]
        shown = None if given is None else prediction.canonical(given)
        return [*filter(None, [self.prediction_warning]), joblog.prediction_line(shown)]

    def write(
        self,
        trainer,
        complete: bool,
        error: str | None = None,
        announce: Callable[[str], None] | None = None,
    ) -> str:
        """Write the results file; `announce` gets its digest before it takes its place
        (results.write)."""
        throughput = trainer.get_extension("Throughput").stats()
        log = trainer.get_extension("LogReport").log
        finished = datetime.datetime.now().astimezone()
        # Counted here: layers with lazily sized inputs have no parameters before the first step.
        # The sizes of the arrays too: ChainerMN's naive communicator allreduces each on its own
        # (the cost model).
        model = {
            **self.record["model"],
            "parameters": models.count_parameters(self.model),
            "arrays": [p.size for p in self.model.params() if p.array is not None],
            # The trained weights, once: a finished run's snapshots are removed.
            "weights_sha256": models.weights_sha256(self.model) if complete else None,
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
        return results.write(self.path, record, announce=announce)

"""Seeding and devices: which GPU, CPU or communicator a stage script trains with."""

from __future__ import annotations

import random

import chainer
import numpy as np

from course import gpu
from course.cluster import mpi
from course.contracts import stages
from course.errors import CourseError
from course.i18n import _


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
    """'auto' is pure_nccl on GPUs (NCCL does the allreduce) and naive on CPUs (the only one
    there)."""
    if name != "auto":
        return name
    return "pure_nccl" if on_gpu else "naive"


def check_communicator(comm) -> None:
    """Stop every rank at once where the communicator is not the ranks `course launch` started:
    another MPI's launcher starts each copy alone (course.cluster.mpi.check_world)."""
    mpi.check_world(comm.size)


def gpus_for_multiprocess(requested: int | None) -> list[int]:
    """GPU ids for MultiprocessParallelUpdater, checked without initialising CUDA in this
    process."""
    found = gpu.visible_gpus().count
    wanted = requested or found
    if found < 2 or wanted < 2 or wanted > found:
        raise CourseError(
            _(
                "stage 2 needs at least 2 GPUs on this node; it has {found} and --gpus {requested} "
                "was asked"
            ).format(found=found, requested=requested)
            if requested
            else _("stage 2 needs at least 2 GPUs on this node; it has {found}").format(
                found=found
            ),
            _("submit it to a GPU node: {command}").format(
                command=f"qsub -j oe {stages.MULTI_GPU.job_path}"
            ),
        )
    from cupy.cuda import nccl

    if not nccl.available:
        raise CourseError(
            _("CuPy cannot load NCCL, which MultiprocessParallelUpdater needs"),
            _(
                'pip install -e ".[gpu]"  (installs nvidia-nccl-cu12); then: python -m course '
                "doctor"
            ),
        )
    return list(range(wanted))

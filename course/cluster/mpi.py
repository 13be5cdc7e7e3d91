"""The one place that says how the kit starts MPI ranks: which mpiexec, and the environment they
get."""

from __future__ import annotations

import os
import sys

from course import paths
from course.errors import JobError

# A CPU "device" in this course is one core: every rank runs its BLAS on one thread.
ONE_THREAD = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def rank_environment() -> dict[str, str]:
    """What every launch adds to the ranks' environment."""
    extra = {"OMPI_MCA_mpi_warn_on_fork": "0"}  # MultiprocessParallelUpdater and nbclient fork
    if os.geteuid() == 0:  # containers and CI run as root; Open MPI refuses that unless told
        extra.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    return extra


def mpiexec() -> str:
    """The launcher that matches the MPI library mpi4py loads; JobError where there is none."""
    found = paths.find_program("mpiexec", environment_first=True)
    if found is None:
        raise JobError(
            "mpiexec is not found",
            "load the site's MPI module in the site profile's setup, "
            'or install the kit\'s mpi extra (pip install -e ".[mpi]")',
        )
    return found


def local_run_environment(**more: str) -> dict[str, str]:
    """os.environ for ranks started on this machine alone (checks, benchmarks, tests): one BLAS
    thread each."""
    return {**os.environ, **ONE_THREAD, **rank_environment(), **more}


def on_cores(ranks: int, *command: str) -> list[str]:
    """`command` as `ranks` ranks of this machine, each bound to one core (a CPU device is one
    core); JobError where there is no mpiexec."""
    return [mpiexec(), "-n", str(ranks), "--bind-to", "core", *command]


def naive_training(*flags: str) -> list[str]:
    """The kit's reference training (python -m course train) with ChainerMN's naive communicator:
    what the kit's measurements on CPU cores run (tools/bench.py, tools/accuracy_study.py)."""
    return [sys.executable, "-m", "course", "train", "--communicator", "naive", *flags]

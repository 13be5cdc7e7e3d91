"""Where the kit's own folders and programs are."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from course.errors import CourseError

KIT_ROOT = Path(__file__).resolve().parent.parent
ASSIGNMENT = "distributed_training"
JOBS_DIR = "jobs"


def kit_root() -> Path:
    """The kit's checkout: the folder with solutions/, jobs/, sites/ and nbgrader_config.py."""
    if not (KIT_ROOT / "solutions").is_dir() or not (KIT_ROOT / JOBS_DIR).is_dir():
        raise CourseError(
            f"{KIT_ROOT} is not a checkout of the course kit",
            "run this command in a clone of the kit (pip install -e . there)",
        )
    return KIT_ROOT


def find_program(name: str, environment_first: bool = False) -> str | None:
    """`name` on PATH, else next to this Python; with environment_first, next to this Python first.

    MPI launchers want environment_first: where the kit's environment ships an MPI (the `mpi`
    extra), its mpiexec matches the library mpi4py loads, while PATH may hold another one (Slurm's
    slurm-wlm-torque installs an srun wrapper as /usr/bin/mpiexec).
    """
    beside = Path(sys.executable).parent / name
    local = str(beside) if beside.is_file() and os.access(beside, os.X_OK) else None
    if environment_first and local:
        return local
    return shutil.which(name) or local


def tool_environment() -> dict[str, str]:
    """os.environ with this Python's folder first on PATH: nbgrader runs `alembic` from there."""
    return {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }


def install_command(gpu: bool = False, afresh: bool = False) -> str:
    """The command that (re)installs this copy's environment: the kit checkout's Makefile, or the
    students' bundle's install.sh, whichever this copy of the kit has."""
    if (KIT_ROOT / "Makefile").is_file():
        targets = ["clean"] * afresh + ["venv"] * (afresh or not gpu) + ["gpu"] * gpu
        return "make " + " ".join(targets)
    command = ("EXTRAS=gpu " if gpu else "") + "./install.sh"
    return f"rm -rf .venv && {command}" if afresh else command

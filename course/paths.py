"""Where the kit's own folders are."""
from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

from course.errors import CourseError

KIT_ROOT = Path(__file__).resolve().parent.parent
ASSIGNMENT = "distributed_training"
JOBS_DIR = "jobs"
SITE_ENV = "site_env.sh"


def kit_root() -> Path:
    """The kit's checkout: the folder with solutions/, jobs/, sites/ and nbgrader_config.py."""
    if not (KIT_ROOT / "solutions").is_dir() or not (KIT_ROOT / JOBS_DIR).is_dir():
        raise CourseError(f"{KIT_ROOT} is not a checkout of the course kit",
                          "run this command in a clone of the kit (pip install -e . there)")
    return KIT_ROOT


def site_env_file() -> Path | None:
    """jobs/site_env.sh of the assignment folder in the current folder, else of the kit checkout."""
    for base in (Path.cwd(), KIT_ROOT):
        candidate = base / JOBS_DIR / SITE_ENV
        if candidate.is_file():
            return candidate
    return None


def applied_site(env_file: Path) -> str | None:
    """The profile name that `course site apply` recorded in a site_env.sh."""
    match = re.search(r"^export COURSE_SITE=(\S+)", Path(env_file).read_text(), re.MULTILINE)
    return match.group(1).strip("'\"") if match else None


def find_program(name: str, environment_first: bool = False) -> str | None:
    """`name` on PATH, else next to this Python; with environment_first, next to this Python first.

    MPI launchers want environment_first: where the kit's environment ships an MPI (the `mpi` extra),
    its mpiexec matches the library mpi4py loads, while PATH may hold another one (Slurm's
    slurm-wlm-torque installs an srun wrapper as /usr/bin/mpiexec).
    """
    beside = Path(sys.executable).parent / name
    local = str(beside) if beside.is_file() and os.access(beside, os.X_OK) else None
    if environment_first and local:
        return local
    return shutil.which(name) or local


def tool_environment() -> dict[str, str]:
    """os.environ with this Python's folder first on PATH: nbgrader runs `alembic` from there."""
    return {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}


def job_log(folder: Path, job_id: str, name: str | None = None) -> Path | None:
    """The joined log `qsub -j oe` writes, <job name>.o<number>, else any *.o<number> in `folder`
    (some schedulers shorten long job names in file names)."""
    number = job_id.split(".")[0]
    named = Path(folder) / f"{name}.o{number}"
    if name and named.is_file():
        return named
    found = sorted(Path(folder).glob(f"*.o{number}"))
    return found[0] if found else None

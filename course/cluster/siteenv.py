"""jobs/site_env.sh: the applied site profile as the jobs see it. Its one writer, locator and reader.

`python -m course site apply` renders a profile into it; every job script sources it; the
submitter, the notebooks, the doctor and the demo read its `export NAME=value` lines.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from course import joblog, paths
from course.errors import JobError

if TYPE_CHECKING:
    from course.cluster.sites import Profile

FILE = "site_env.sh"


def in_folder(folder: Path) -> Path:
    """<folder>/jobs/site_env.sh (the folder a student submits from); JobError when it is missing."""
    path = Path(folder) / paths.JOBS_DIR / FILE
    if not path.is_file():
        raise JobError(
            f"{path} does not exist",
            "work in the assignment folder (the one with the notebooks and jobs/)",
        )
    return path


def locate() -> Path | None:
    """jobs/site_env.sh of the current folder, else of the kit's checkout; None where neither has one."""
    for base in (Path.cwd(), paths.KIT_ROOT):
        candidate = base / paths.JOBS_DIR / FILE
        if candidate.is_file():
            return candidate
    return None


def read(path: Path) -> dict[str, str]:
    """The `export NAME=value` settings, defaults of `${NAME:-default}` resolved."""
    settings = {}
    for name, value in re.findall(r"^export (\w+)=(.*)$", Path(path).read_text(), re.MULTILINE):
        value = value.split("  #")[0].strip()
        if value[:1] in "'\"" and value[-1:] == value[:1]:
            value = value[1:-1]
        default = re.fullmatch(r"\$\{\w+:-(.*)\}", value)
        settings[name] = default.group(1) if default else value
    return settings


def _in_pbs_lines(profile: Profile, field: str) -> bool:
    """Whether the profile's #PBS lines carry `field` (a Slurm site may charge its group with #SBATCH)."""
    return any(line.startswith("#PBS") and f"{{{field}}}" in line for line in profile.directives)


def render(profile: Profile) -> str:
    setup = (
        "\n".join(profile.setup)
        if profile.setup
        else ": # nothing to load: jobs inherit the submitting environment"
    )
    root = (
        f'export CHAINER_DATASET_ROOT="${{CHAINER_DATASET_ROOT:-{profile.dataset_root}}}"\n'
        if profile.dataset_root
        else ""
    )
    threads = profile.threads_per_rank
    select = profile.select("{nodes}", "{ranks_per_node}", profile.gpus_per_node or 0)
    return f"""\
# Site settings shared by the job scripts: the `{profile.name}` profile (sites/{profile.name}.toml).
# Written by `python -m course site apply {profile.name}`; change the profile and apply it again.
export COURSE_SITE={profile.name}
export COURSE_SCHEDULER={profile.scheduler}

# Software: modules and the kit's Python environment.
{setup}

# Data and training defaults, the same at every stage so that the stages compare.
{root}export COURSE_DATASET="${{COURSE_DATASET:-{profile.dataset}}}"
export COURSE_TRAIN_ARGS="${{COURSE_TRAIN_ARGS:-{profile.train_args}}}"

# MPI: `python -m course launch` fills in the ranks and hosts of the job.
export COURSE_MPIEXEC='{profile.mpiexec}'
export OMP_NUM_THREADS={threads}
export OPENBLAS_NUM_THREADS={threads}
export MKL_NUM_THREADS={threads}
export CHAINERMN_FORCE_ABORT_ON_EXCEPTION=1  # one rank's exception ends the job, not a hang

# How this site is run, for `python -m course submit` and the notebooks.
export COURSE_SELECT='{select}'
export COURSE_RESOURCES='{" ".join(profile.resources)}'  # the site's own -l resources, besides PBS's
export COURSE_QUEUES='{" ".join(profile.queues)}'
export COURSE_QUEUE='{profile.queue if _in_pbs_lines(profile, "queue") else ""}'  # the -q of its #PBS lines
export COURSE_GROUP='{profile.group if _in_pbs_lines(profile, "group") else ""}'  # their -W group_list
export COURSE_GPUS_PER_NODE={profile.gpus_per_node}
export COURSE_SCALING_RUNS='{" ".join(f"{n}x{r}" for n, r in profile.scaling_runs)}'
export COURSE_COMMUNICATION='{" ".join(profile.communication)}'

# The CUDA libraries of the kit's gpu extra (prints nothing without them).
eval "$(python -m course env)"

# The last line of the joined log says how the job ended, and when (course/joblog.py reads it).
{joblog.END_TRAP}
"""

"""The one place that says how the kit starts MPI ranks: which mpiexec, the environment they get,
and how a rank sees that another MPI's launcher started it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from course import paths
from course.contracts import joblog
from course.errors import JobError
from course.i18n import _

# A CPU "device" in this course is one core: every rank runs its BLAS on one thread.
ONE_THREAD = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}

# What `course launch` tells its ranks: how many it started, and the launcher program it ran.
# Another MPI's launcher starts each copy as an MPI world of its own ("rank 0 of 1"): check_world
# stops them.
LAUNCHED_RANKS = "COURSE_LAUNCHED_RANKS"
LAUNCHER = "COURSE_LAUNCHER"
# Install folders that many programs share: a launcher there is not of the library by its place.
_SHARED_PREFIXES = {Path("/"), Path("/usr"), Path("/usr/local"), Path("/opt")}
_LIBMPI = re.compile(r"/lib(?:mpi|mpich)\.so[.\d]*$")  # Open MPI's, MPICH's and Intel MPI's


def rank_environment() -> dict[str, str]:
    """What every launch adds to the ranks' environment."""
    extra = {"OMPI_MCA_mpi_warn_on_fork": "0"}  # MultiprocessParallelUpdater and nbclient fork
    if os.geteuid() == 0:  # containers and CI run as root; Open MPI refuses that unless told
        extra.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    return extra


def launch_environment(nprocs: int, launcher: str) -> dict[str, str]:
    """What `course launch` adds for its ranks to check their world against (check_world)."""
    return {LAUNCHED_RANKS: str(nprocs), LAUNCHER: launcher}


def mpiexec() -> str:
    """The launcher that matches the MPI library mpi4py loads; JobError where there is none."""
    found = find_launcher("mpiexec")
    if found is None:
        raise JobError(
            _("mpiexec is not found"),
            _(
                "load the site's MPI module in the site profile's setup, or install the kit's mpi "
                'extra (pip install -e ".[mpi]")'
            ),
        )
    return found


def find_launcher(program: str) -> str | None:
    """Where `course launch` finds a launcher template's program: beside this Python first (the
    kit's mpi extra), else on PATH."""
    return paths.find_program(program, environment_first=True)


def local_run_environment(**more: str) -> dict[str, str]:
    """os.environ for ranks started on this machine alone (checks, benchmarks, tests): one BLAS
    thread each."""
    return {**os.environ, **ONE_THREAD, **rank_environment(), **more}


@dataclass(frozen=True)
class Library:
    """The MPI library mpi4py loads."""

    name: str  # MPI_Get_library_version's first words: "Open MPI v5.0.11"
    version: str | None  # "5.0.11"
    path: Path | None  # the libmpi file this process mapped (None: not found in /proc/self/maps)


def library() -> Library:
    """The MPI library of mpi4py in this process (without starting MPI where it has not started)."""
    import mpi4py

    if "mpi4py.MPI" not in sys.modules:
        mpi4py.rc.initialize = False  # its name is all that is needed here
    from mpi4py import MPI

    said = " ".join(MPI.Get_library_version().splitlines()[0].split())
    version = re.search(r"\d+(?:\.\d+)+", said)
    return Library(said.split(",")[0].strip(), version[0] if version else None, _loaded_libmpi())


def _loaded_libmpi() -> Path | None:
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:  # not Linux
        return None
    for line in maps.splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) == 6 and _LIBMPI.search(fields[5]):
            return Path(fields[5]).resolve()
    return None


def foreign(launcher: str, lib: Library) -> str | None:
    """None when `launcher` is `lib`'s own; else what it says of itself (its `--version`).

    An MPI's launcher names its version, which is its library's (Open MPI's `mpiexec (Open MPI)
    5.0.11`, MPICH's Hydra, Intel MPI's); another MPI's names another one or, like Slurm's mpiexec
    wrapper, does not know the option. A launcher installed beside the library, in an install
    folder of its own (a module's, conda's, a virtual environment's), is the library's too: some
    builds' launchers report a version of their own.
    """
    try:
        shown = subprocess.run(
            [launcher, "--version"],
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
        said, answered = shown.stdout + shown.stderr, shown.returncode == 0
    except (OSError, subprocess.TimeoutExpired) as e:
        said, answered = str(e), False
    if (
        answered
        and lib.version
        and re.search(rf"(?<![\d.]){re.escape(lib.version)}(?!\.?\d)", said)
    ):
        return None
    prefix = Path(launcher).resolve().parent.parent  # <prefix>/bin/mpiexec
    if lib.path and prefix not in _SHARED_PREFIXES and lib.path.is_relative_to(prefix):
        return None
    return next((line.strip() for line in said.splitlines() if line.strip()), _("nothing"))


def matching_launcher(lib: Library) -> str | None:
    """The mpiexec of mpi4py's MPI: the one `course launch` finds, or the one installed with the
    library; None where neither is."""
    found = [find_launcher("mpiexec")]
    if lib.path:
        found += [str(folder / "bin" / "mpiexec") for folder in lib.path.parents[:3]]
    return next(
        (path for path in found if path and os.access(path, os.X_OK) and not foreign(path, lib)),
        None,
    )


def check_world(size: int) -> None:
    """Stop a rank whose MPI world is not the ranks `course launch` started, on every rank.

    Another MPI's launcher starts each copy as a world of its own ("rank 0 of 1"): each would train
    the whole run alone, into the same run folder. Outside `course launch` there is nothing to
    check.
    """
    launched = os.environ.get(LAUNCHED_RANKS, "")
    if not launched.isdigit() or int(launched) == size:
        return
    ran = os.environ.get(LAUNCHER) or "?"
    lib = library()
    needed = matching_launcher(lib)
    if needed and os.path.realpath(ran) == os.path.realpath(needed):
        raise JobError(
            _(
                "course launch started {launched} rank(s), but its launcher's command made an MPI "
                "world of {size}"
            ).format(launched=launched, size=size),
            # TRANSLATORS: {nprocs} is written as it is: the template's field, not a number
            _("the site's launcher template must start {nprocs} ranks (-n {nprocs})"),
        )
    # the protocol line (course.contracts.joblog) names it in English; the hint, in the student's
    # language
    named = needed or f"the mpiexec of {lib.name}"
    raise JobError(
        joblog.wrong_launcher(ran, named, int(launched), size),
        _(
            "the site profile's mpiexec must start {needed} (or put its folder first on PATH); "
            "python -m course doctor checks it"
        ).format(needed=needed or _("the mpiexec of {library}").format(library=lib.name)),
    )


def on_cores(ranks: int, *command: str) -> list[str]:
    """`command` as `ranks` ranks of this machine, each bound to one core (a CPU device is one
    core), or unbound and sharing the cores when there are more ranks than cores (for accuracy
    only: run it under local_run_environment(**YIELD_WHEN_IDLE)); JobError where there is no
    mpiexec."""
    if ranks > (os.cpu_count() or 1):  # else Open MPI refuses to start them
        return [mpiexec(), "-n", str(ranks), "--oversubscribe", "--bind-to", "none", *command]
    return [mpiexec(), "-n", str(ranks), "--bind-to", "core", *command]


# Ranks that busy-wait on a shared core wait for its time slice: let them yield it.
YIELD_WHEN_IDLE = {"OMPI_MCA_mpi_yield_when_idle": "1"}


def naive_training(*flags: str) -> list[str]:
    """The kit's reference training (python -m course train) with ChainerMN's naive communicator:
    what the maintainers' benchmark and accuracy study run on CPU cores."""
    return [sys.executable, "-m", "course", "train", "--communicator", "naive", *flags]

"""Where an Open MPI launch line puts its ranks, without starting them: `mpirun --do-not-launch
--display map` on a host file of simulated nodes, whose hardware hwloc is told (HWLOC_SYNTHETIC)
rather than probed, so that a site's two-socket nodes can be mapped on this machine. Read by the
stage-3 check of the job's run part (course/lessons/run_part/checks.py).

Open MPI 5 (PRRTE) prints one block per node ("Data for node: NAME") and per rank its "App rank"
and its "Binding" (`package[0][core:L0-3]`, or UNBOUND), and says when it refuses to map.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from course.cluster import mpi
from course.errors import CourseError
from course.i18n import _

TIMEOUT_SECONDS = 60  # a map takes a tenth of a second; a busy machine gets a wide margin
# The options that decide the map, which the dry run passes on (with their values); it leaves out
# the others (environment, MCA parameters, output, the hosts: it puts its own simulated nodes in
# their place) and the command, so that a line's words never load or run anything here. A
# single-dash spelling of one (`-bind-to`) is passed on too: mpirun takes some and refuses others.
_MAP_OPTIONS = {"-n", "-np", "--np", "--n", "-c", "-N", "--map-by", "--bind-to", "--rank-by"}
_MAP_OPTIONS |= {"--npernode", "--npersocket", "--cpus-per-proc", "--cpus-per-rank", "--ppr"}
_MAP_OPTIONS |= {"--cpu-set"}
_MAP_FLAGS = {"--oversubscribe", "--nooversubscribe", "--use-hwthread-cpus", "--pernode"}
_MAP_FLAGS |= {"--bynode"}
# The options left out, with how many values each takes: an option in neither table is refused,
# since the dry run could not tell where the options end and the command begins.
_ARITY = dict.fromkeys(("--mca", "-mca", "--gmca", "-gmca", "--prtemca", "--pmixmca"), 2)
_ARITY |= dict.fromkeys(
    (
        "-x", "--display", "--output", "--prefix", "--tune", "--wdir", "--path", "--timeout",
        "--launch-agent", "--personality", "--host", "-host", "-H", "--hostfile", "-hostfile",
        "--machinefile", "-machinefile", "--app", "--stream-buffering",
    ),
    1,
)  # fmt: skip
_ARITY |= dict.fromkeys(
    (
        "--report-bindings", "--display-map", "-display-map", "--tag-output",
        "--timestamp-output", "--merge-stderr-to-stdout", "--allow-run-as-root", "--noprefix",
        "--verbose", "--show-progress",
    ),
    0,
)  # fmt: skip
# Where the map is a file's, written for the hosts of one job: the dry run cannot follow it.
_RANK_FILES = {"--rankfile", "-rankfile", "-rf"}
# A job's own variables: mpirun would map onto that job's allocation (and start srun to reach it)
# instead of the simulated nodes, or join the launch the process runs in.
_JOB_VARIABLES = ("SLURM_", "PBS_", "PMIX_", "PRTE_", "OMPI_COMM_WORLD_", "OMPI_UNIVERSE_")
_BINDING = re.compile(r"package\[(\d+)\]\[core:([^\]]*)\]")


@dataclass(frozen=True)
class Rank:
    """One rank as the map places it."""

    rank: int
    node: str
    local_rank: int
    packages: tuple[int, ...]  # the sockets of its cores; () when it is bound to none
    cores: tuple[int, ...]  # the node's cores it may run on (logical indexes); () unbound


def _rank_file(option: str) -> CourseError:
    """The refusal of a line that places its ranks by a rank file (`option`, with its value)."""
    return CourseError(
        _(
            "the launch line places the ranks by a rank file ({option}), which fixes the hosts "
            "and cores of one job; this check places them on simulated nodes, where such a file "
            "does not apply"
        ).format(option=option),
        _(
            "let the mapping options place the ranks on the nodes the job's host file lists "
            "(--map-by, in the lesson's Open MPI reference)"
        ),
    )


def mapping_words(argv: list[str]) -> list[str]:
    """The options of `argv` (mpiexec's words after its name) that decide where ranks go;
    CourseError for an option it does not know or a rank file."""
    kept: list[str] = []
    words = iter(argv)
    for word in words:
        option, equals, value = word.partition("=")
        spellings = {option, "-" + option}  # -bind-to is --bind-to's single-dash spelling
        if spellings & _RANK_FILES:
            raise _rank_file(option)
        if spellings & _MAP_OPTIONS:
            value = value if equals else next(words, "")
            if value.lower().startswith("rankfile"):
                raise _rank_file(" ".join((option, value)))
            kept += [word] if equals else [word, value]
        elif spellings & _MAP_FLAGS:
            kept.append(word)
        elif option in _ARITY:
            for _skipped in range(0 if equals else _ARITY[option]):
                next(words, None)
        elif word.startswith("-"):
            raise CourseError(
                _(
                    "the launch line has the option {option}, which this check does not know, so "
                    "it cannot tell where the line's options end and its command begins"
                ).format(option=option),
                _(
                    "write the options of the lesson's Open MPI reference, spelt as it spells "
                    "them (two dashes for the long ones, such as --map-by)"
                ),
            )
        else:
            break  # the command
    return kept


def dry_run(argv: list[str], nodes: int, slots: int, sockets: int, cores: int) -> list[Rank]:
    """The ranks Open MPI's mpirun would start for `argv` (the options and command after
    `mpiexec`) on `nodes` nodes of `slots` slots, each of `sockets` sockets holding `cores` cores
    in all; CourseError with mpirun's own words when it refuses."""
    program = mpi.find_launcher("mpirun")
    if program is None:
        raise CourseError(
            _("mpirun is not found"),
            _('install the kit\'s mpi extra (pip install -e ".[mpi]")'),
        )
    with tempfile.TemporaryDirectory(prefix="course-map-") as folder:
        hostfile = Path(folder) / "hostfile"
        hostfile.write_text("".join(f"node{n + 1} slots={slots}\n" for n in range(nodes)))
        synthetic = f"pack:{sockets} core:{cores // sockets} pu:1"
        try:
            done = subprocess.run(
                [program, "--do-not-launch", "--display", "map", "--hostfile", str(hostfile)]
                + [*mapping_words(argv), "true"],
                env=_outside_any_job(HWLOC_SYNTHETIC=synthetic),
                capture_output=True,
                text=True,
                timeout=TIMEOUT_SECONDS,
                cwd=folder,
            )
        except subprocess.TimeoutExpired:
            raise CourseError(
                _("mpirun took more than {seconds} s to map the line").format(
                    seconds=TIMEOUT_SECONDS
                ),
                _("the line's options should map at once; look for one that waits"),
            ) from None
    said = done.stdout + done.stderr
    ranks = read_map(said)
    if done.returncode != 0 or not ranks:
        raise CourseError(
            _("mpirun refused the line: {said}").format(said=refusal(said)),
            _("its words name the option to look at; the references in the lesson list them"),
        )
    return ranks


def _outside_any_job(**more: str) -> dict[str, str]:
    """The environment of a local run, without the variables of a job this process may be in."""
    environment = mpi.local_run_environment(**more)
    return {name: v for name, v in environment.items() if not name.startswith(_JOB_VARIABLES)}


def read_map(text: str) -> list[Rank]:
    """The ranks of a map mpirun displayed, in rank order."""
    ranks: list[Rank] = []
    node = ""
    local = rank = -1
    for line in text.splitlines():
        if found := re.search(r"Data for node: (\S+)", line):
            node = found.group(1)
        elif found := re.search(r"Local rank: (\d+).*App rank: (\d+)", line):
            local, rank = int(found.group(1)), int(found.group(2))
        elif "Binding:" in line and rank >= 0:
            bound = _BINDING.findall(line)
            packages = tuple(sorted({int(package) for package, _ in bound}))
            cores = tuple(sorted({core for package, spec in bound for core in _core_list(spec)}))
            ranks.append(Rank(rank, node, local, packages, cores))
            rank = -1
    return sorted(ranks, key=lambda r: r.rank)


def _core_list(spec: str) -> list[int]:
    """The cores of "L0-3,L8" (hwloc's logical indexes)."""
    cores: list[int] = []
    for part in spec.replace("L", "").split(","):
        first, dash, last = part.partition("-")
        if first.strip().isdigit():
            cores.extend(range(int(first), int(last or first) + 1))
    return cores


def refusal(text: str) -> str:
    """mpirun's message, without its frames of dashes and blank lines, shortened."""
    lines = [line.strip() for line in text.splitlines()]
    words = " ".join(line for line in lines if line and not set(line) <= {"-", "="})
    return words[:600]

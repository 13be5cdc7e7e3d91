"""Where an Open MPI launch line puts its ranks, without starting them: `mpirun --do-not-launch
--display map` on a host file of simulated nodes, whose hardware hwloc is told (HWLOC_SYNTHETIC)
rather than probed, so that a site's two-socket nodes can be mapped on this machine. Read by the
stage-3 check of the job's run part (checks/mn_placement.py).

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

TIMEOUT_SECONDS = 60  # a map takes a tenth of a second; a busy machine gets a wide margin
# Options that name the job's hosts: the dry run puts its own simulated nodes in their place.
_HOST_OPTIONS = ("--hostfile", "-hostfile", "--machinefile", "-machinefile", "--host", "-host")
REFUSED = "mpirun refused the line: {said}"
_BINDING = re.compile(r"package\[(\d+)\]\[core:([^\]]*)\]")


@dataclass(frozen=True)
class Rank:
    """One rank as the map places it."""

    rank: int
    node: str
    local_rank: int
    packages: tuple[int, ...]  # the sockets of its cores; () when it is bound to none
    cores: tuple[int, ...]  # the node's cores it may run on (logical indexes); () unbound


def launcher_words(argv: list[str]) -> list[str]:
    """`argv` (mpiexec's options and the command) without the options that name hosts."""
    kept: list[str] = []
    skip = False
    for word in argv:
        if skip:
            skip = False
        elif word in (*_HOST_OPTIONS, "-H"):
            skip = True
        elif not word.startswith(tuple(option + "=" for option in _HOST_OPTIONS)):
            kept.append(word)
    return kept


def dry_run(
    argv: list[str], nodes: int, slots: int, sockets: int, cores: int, env: dict[str, str]
) -> list[Rank]:
    """The ranks Open MPI's mpirun would start for `argv` (the options and command after
    `mpiexec`) on `nodes` nodes of `slots` slots, each of `sockets` sockets holding `cores` cores
    in all, with the launch's environment `env`; CourseError with mpirun's own words when it
    refuses."""
    program = mpi.find_launcher("mpirun")
    if program is None:
        raise CourseError(
            "mpirun is not found", 'install the kit\'s mpi extra (pip install -e ".[mpi]")'
        )
    with tempfile.TemporaryDirectory(prefix="course-map-") as folder:
        hostfile = Path(folder) / "hostfile"
        hostfile.write_text("".join(f"node{n + 1} slots={slots}\n" for n in range(nodes)))
        synthetic = f"pack:{sockets} core:{cores // sockets} pu:1"
        try:
            done = subprocess.run(
                [program, "--do-not-launch", "--display", "map", "--hostfile", str(hostfile)]
                + launcher_words(argv),
                env={**mpi.local_run_environment(), **env, "HWLOC_SYNTHETIC": synthetic},
                capture_output=True,
                text=True,
                timeout=TIMEOUT_SECONDS,
                cwd=folder,
            )
        except subprocess.TimeoutExpired:
            raise CourseError(
                f"mpirun took more than {TIMEOUT_SECONDS} s to map the line",
                "the line's options should map at once; look for one that waits",
            ) from None
    said = done.stdout + done.stderr
    ranks = read_map(said)
    if done.returncode != 0 or not ranks:
        raise CourseError(
            REFUSED.format(said=refusal(said)),
            "its words name the option to look at; the references in the lesson list them",
        )
    return ranks


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
            cores = tuple(sorted({core for _, spec in bound for core in _core_list(spec)}))
            ranks.append(Rank(rank, node, local, packages, cores))
            rank = -1
    return sorted(ranks, key=lambda r: r.rank)


def _core_list(spec: str) -> list[int]:
    """The cores of "L0-3,L8" (hwloc's logical indexes)."""
    cores: list[int] = []
    for part in spec.replace("L", "").split(","):
        first, _, last = part.partition("-")
        if first.strip().isdigit():
            cores.extend(range(int(first), int(last or first) + 1))
    return cores


def refusal(text: str) -> str:
    """mpirun's message, without its frames of dashes and blank lines, shortened."""
    lines = [line.strip() for line in text.splitlines()]
    words = " ".join(line for line in lines if line and not set(line) <= {"-", "="})
    return words[:600]

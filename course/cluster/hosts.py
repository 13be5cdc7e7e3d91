"""Where a job runs: its scheduler, id, submit folder and the hosts and slots it was given.

PBS Pro (and the kit's local runner, which sets PBS's variables) lists one line per MPI slot
in $PBS_NODEFILE; Slurm gives a compressed node list and a tasks-per-node pattern.
"""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from course.errors import JobError
from course.i18n import _


@dataclass(frozen=True)
class JobEnvironment:
    scheduler: str  # pbs, slurm, local (the kit's runner) or none
    job_id: str | None
    job_name: str | None
    submit_dir: Path
    hosts: list[tuple[str, int]] = field(default_factory=list)  # (host, slots), in order
    attempt: int = 1  # 2 and on: the scheduler reran the job (Slurm's SLURM_RESTART_COUNT + 1)

    def record(self) -> dict:
        """The job as a results file names it (course.contracts.results); the attempt only when
        the scheduler reran it."""
        job = {"id": self.job_id, "scheduler": self.scheduler, "name": self.job_name}
        return {**job, "attempt": self.attempt} if self.attempt > 1 else job

    @property
    def run_tag(self) -> str | None:
        """What names the job's run folder: its id, and its attempt when rerun (a rerun must not
        overwrite what an earlier attempt finished)."""
        if self.job_id is None or self.attempt == 1:
            return self.job_id
        return f"{self.job_id}-attempt{self.attempt}"

    @property
    def nprocs(self) -> int:
        return sum(slots for _, slots in self.hosts)

    @property
    def nodes(self) -> int:
        return len(self.hosts)

    @property
    def per_node(self) -> int:
        return max((slots for _, slots in self.hosts), default=1)


_HOST = r"(?:[^,\[\]]|\[[^\[\]]*\])+"  # a name, with bracketed number ranges anywhere in it


def expand_hostlist(expression: str) -> list[str]:
    """Slurm's compressed node list, e.g. 'gpu[01-02]-ib,login1' -> gpu01-ib gpu02-ib login1."""
    expression = expression.strip()
    if not re.fullmatch(f"{_HOST}(?:,{_HOST})*", expression):
        raise JobError(
            _("cannot read the Slurm node list {nodes}").format(nodes=repr(expression)),
            _("report this to your instructor"),
        )
    return [
        host
        for pattern in re.findall(_HOST, expression)
        for host in _expand_host(pattern, expression)
    ]


def _expand_host(pattern: str, expression: str) -> list[str]:
    """One name of the list; every bracket group multiplies it (rack[1-2]-n[1-2]: four hosts)."""
    group = re.search(r"\[([^\]]*)\]", pattern)
    if group is None:
        return [pattern]
    numbers = []
    for part in group.group(1).split(","):
        lo, _dash, hi = part.partition("-")
        if not lo.isdigit() or (hi and not hi.isdigit()):
            raise JobError(
                _("cannot read the Slurm node list {nodes}").format(nodes=repr(expression)),
                _("report this to your instructor"),
            )
        numbers += [f"{n:0{len(lo)}d}" for n in range(int(lo), int(hi or lo) + 1)]
    head, tail = pattern[: group.start()], pattern[group.end() :]
    return [f"{head}{n}{rest}" for n in numbers for rest in _expand_host(tail, expression)]


def expand_tasks_per_node(expression: str) -> list[int]:
    """Slurm's SLURM_TASKS_PER_NODE, e.g. '2(x3),1' -> [2, 2, 2, 1]."""
    counts = []
    for count, repeat in re.findall(r"(\d+)(?:\(x(\d+)\))?", expression):
        counts += [int(count)] * int(repeat or 1)
    return counts


def read_nodefile(path: Path) -> list[tuple[str, int]]:
    """PBS's node file (one line per slot) as (host, slots) in first-seen order."""
    try:
        lines = [line.strip() for line in Path(path).read_text().splitlines() if line.strip()]
    except OSError as e:
        raise JobError(
            _("cannot read the node file {path}: {error}").format(path=path, error=e),
            _("is this running inside the job?"),
        ) from None
    if not lines:
        raise JobError(
            _("the node file {path} is empty").format(path=path),
            _("ask the scheduler for at least one node"),
        )
    counts: dict[str, int] = {}
    for host in lines:
        counts[host] = counts.get(host, 0) + 1
    return list(counts.items())


def detect(environ: Mapping[str, str] | None = None) -> JobEnvironment:
    """The job this process runs in, read from the scheduler's variables."""
    env = os.environ if environ is None else environ
    if env.get("PBS_JOBID"):
        hosts = (
            read_nodefile(Path(env["PBS_NODEFILE"]))
            if env.get("PBS_NODEFILE")
            else [(socket.gethostname(), 1)]
        )
        scheduler = "local" if env.get("COURSE_SCHEDULER") == "local" else "pbs"
        return JobEnvironment(
            scheduler,
            env["PBS_JOBID"],
            env.get("PBS_JOBNAME"),
            Path(env.get("PBS_O_WORKDIR") or os.getcwd()),
            hosts,
        )
    if env.get("SLURM_JOB_ID"):
        nodes = expand_hostlist(env.get("SLURM_JOB_NODELIST") or socket.gethostname())
        tasks = expand_tasks_per_node(env.get("SLURM_TASKS_PER_NODE", ""))
        if len(tasks) != len(nodes):
            tasks = [1] * len(nodes)
        return JobEnvironment(
            "slurm",
            env["SLURM_JOB_ID"],
            env.get("SLURM_JOB_NAME"),
            Path(env.get("SLURM_SUBMIT_DIR") or os.getcwd()),
            list(zip(nodes, tasks)),
            int(env.get("SLURM_RESTART_COUNT") or 0) + 1,
        )
    return JobEnvironment("none", None, None, Path(os.getcwd()), [(socket.gethostname(), 1)])

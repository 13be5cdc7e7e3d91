"""PBS job requests: the `#PBS` lines of a job script and `qsub` options, read the way PBS Pro does."""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field, replace

from course.errors import JobError


@dataclass(frozen=True)
class Request:
    """What a job asks the scheduler for."""

    nodes: int = 1  # select=N
    mpiprocs: int = 1  # MPI ranks per node
    ngpus: int = 0  # GPUs per node (PBS Pro's ngpus; 0: not asked)
    ncpus: int = 0
    walltime: int | None = None  # seconds
    queue: str | None = None
    name: str | None = None
    group: str | None = None
    join: str | None = None
    variables: dict[str, str] = field(default_factory=dict)

    @property
    def ranks(self) -> int:
        return self.nodes * self.mpiprocs


def directive_lines(script: str) -> list[str]:
    """The option strings of the #PBS lines, which PBS reads up to the first command."""
    found = []
    for line in script.splitlines()[1:] if script.startswith("#!") else script.splitlines():
        stripped = line.strip()
        if stripped.startswith("#PBS"):
            found.append(stripped[4:].strip())
        elif stripped and not stripped.startswith("#"):
            break
    return found


def parse_walltime(text: str) -> int:
    """'[[HH:]MM:]SS' -> seconds."""
    parts = text.split(":")
    if not 1 <= len(parts) <= 3 or not all(p.isdigit() for p in parts):
        raise JobError(f"walltime {text!r} is not HH:MM:SS", "e.g. #PBS -l walltime=00:20:00")
    seconds = 0
    for part in parts:
        seconds = seconds * 60 + int(part)
    return seconds


def format_walltime(seconds: int) -> str:
    return f"{seconds // 3600:02d}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def parse_select(text: str, request: Request) -> Request:
    """'2:mpiprocs=2:ngpus=2' -> 2 nodes, 2 ranks and 2 GPUs per node."""
    chunks = text.split("+")
    if len(chunks) > 1:
        raise JobError(f"select={text} mixes chunk kinds", "the course's jobs use one kind: select=N:mpiprocs=M")
    count, *resources = chunks[0].split(":")
    if not count.isdigit() or int(count) < 1:
        raise JobError(f"select={text}: the node count must come first", "e.g. -l select=2:mpiprocs=2")
    values = {"nodes": int(count)}
    for resource in resources:
        key, _, value = resource.partition("=")
        if key in ("mpiprocs", "ngpus", "ncpus"):
            if not value.isdigit():
                raise JobError(f"select={text}: {key} must be a number", f"e.g. {key}=2")
            values[key] = int(value)
    return replace(request, **values)


def apply_options(options: list[str], request: Request | None = None) -> Request:
    """Apply qsub options (as in `qsub -l select=1:mpiprocs=2 -N x`) to a request."""
    request = request or Request()
    tokens = list(options)
    while tokens:
        option = tokens.pop(0)
        flag, inline = (option[:2], option[2:]) if option.startswith("-") and len(option) > 2 else (option, "")
        if flag not in ("-l", "-q", "-N", "-W", "-j", "-v", "-V", "-o", "-e", "-m", "-M", "-A", "-P", "-r"):
            raise JobError(f"unknown qsub option {option!r}",
                           "see `man qsub`; the course's jobs use -l, -q, -N, -W, -j, -v")
        if flag == "-V":
            continue
        if not inline and not tokens:
            raise JobError(f"qsub option {flag} needs a value", f"e.g. {flag} ...")
        value = inline or tokens.pop(0)
        if flag == "-l":
            for item in value.split(","):
                key, _, setting = item.partition("=")
                if key == "select":
                    request = parse_select(setting, request)
                elif key == "walltime":
                    request = replace(request, walltime=parse_walltime(setting))
                elif key in ("ngpus", "mpiprocs", "ncpus"):
                    if not setting.isdigit():
                        raise JobError(f"-l {item}: {key} must be a number", f"e.g. -l {key}=2")
                    request = replace(request, **{key: int(setting)})
        elif flag == "-q":
            request = replace(request, queue=value)
        elif flag == "-N":
            request = replace(request, name=value)
        elif flag == "-W":
            key, _, setting = value.partition("=")
            if key == "group_list":
                request = replace(request, group=setting)
        elif flag == "-j":
            request = replace(request, join=value)
        elif flag == "-v":
            variables = dict(request.variables)
            for pair in value.split(","):
                key, _, setting = pair.partition("=")
                if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
                    raise JobError(f"-v {value}: {key!r} is not a variable name", "e.g. -v COMMUNICATOR=naive")
                variables[key] = setting
            request = replace(request, variables=variables)
    return request


def read_request(script: str, options: list[str] = ()) -> Request:
    """The script's #PBS lines, then the command line's options, which win (as with qsub)."""
    request = Request()
    for line in directive_lines(script):
        try:
            request = apply_options(shlex.split(line), request)
        except JobError as e:
            raise JobError(f"#PBS {line}: {e.message}", e.hint) from None
    return apply_options(list(options), request)

"""PBS job requests: the `#PBS` lines of a job script and `qsub` options, read the way PBS Pro
does."""

from __future__ import annotations

import argparse
import difflib
import re
import shlex
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from course import i18n
from course.errors import JobError
from course.i18n import _

# The resources PBS Pro sites use (`-l NAME=...`), and Torque's `nodes`, which Slurm's qsub wrapper
# reads too. A name outside these lists is refused, not ignored: `-l selct=1:mpiprocs=2` would
# otherwise run a stage-3 job with one rank. A site's own resources go into its profile's
# `resources` list.
_JOB_OR_CHUNK = ("ncpus", "ngpus", "mpiprocs", "ompthreads", "mem", "vmem")  # either level
JOB_RESOURCES = (
    "select",
    "place",
    "walltime",
    "nodes",
    *_JOB_OR_CHUNK,
    "pmem",
    "pvmem",
    "cput",
    "pcput",
    "file",
    "software",
    "host",
    "arch",
    "soft_walltime",
    "min_walltime",
    "max_walltime",
    "naccelerators",
    "accelerator_model",
    "preempt_targets",
)
CHUNK_RESOURCES = (
    *_JOB_OR_CHUNK,
    "host",
    "vnode",
    "arch",
    "accelerator",
    "naccelerators",
    "accelerator_model",
    "accelerator_memory",
    "aoe",
)
NODE_PROPERTIES = (
    "ppn",
    "gpus",
)  # Torque's nodes=N:ppn=M:gpus=G (other words there name node features)
_COUNTS = {
    "mpiprocs": "mpiprocs",
    "ompthreads": "ompthreads",
    "ngpus": "ngpus",
    "ncpus": "ncpus",
    "ppn": "mpiprocs",
    "gpus": "ngpus",
}


@dataclass(frozen=True)
class Request:
    """What a job asks the scheduler for."""

    nodes: int = 1  # select=N
    mpiprocs: int = 1  # MPI ranks per node
    ngpus: int = 0  # GPUs per node (PBS Pro's ngpus; 0: not asked)
    ncpus: int = 0
    ompthreads: int = 0  # threads per rank (PBS Pro sets OMP_NUM_THREADS from it; 0: not asked)
    walltime: int | None = None  # seconds
    walltime_text: str | None = None  # as written, e.g. "1:00" (which PBS reads as one minute)
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
        raise JobError(
            _("walltime {text} is not HH:MM:SS").format(text=repr(text)),
            _("e.g. #PBS -l walltime=00:20:00"),
        )
    seconds = 0
    for part in parts:
        seconds = seconds * 60 + int(part)
    return seconds


def format_walltime(seconds: int) -> str:
    return f"{seconds // 3600:02d}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def _hours(n: int) -> str:
    return _("{n} hour").format(n=n) if n == 1 else _("{n} hours").format(n=n)


def _minutes(n: int) -> str:
    return _("{n} minute").format(n=n) if n == 1 else _("{n} minutes").format(n=n)


def _seconds(n: int) -> str:
    return _("{n} second").format(n=n) if n == 1 else _("{n} seconds").format(n=n)


def _duration(seconds: int) -> str:
    """'1 hour', '30 minutes', '1 minute 30 seconds': each unit one message with its number (a
    language without plurals says the two alike), in the student's language."""
    parts = zip((seconds // 3600, seconds % 3600 // 60, seconds % 60), (_hours, _minutes, _seconds))
    said = [unit(n) for n, unit in parts if n]
    return " ".join(said) or _seconds(0)


def without_hours(text: str) -> tuple[str, str] | None:
    """For a walltime written without hours ('1:00', '90'): (what it means, how to write what was
    likely meant); None for HH:MM:SS. Such a walltime is valid PBS but most often a mistake: 1:00
    meant as an hour is a minute, 90 meant as minutes (as Slurm reads it) is 90 seconds."""
    parts = text.split(":")
    if len(parts) == 3:
        return None
    seconds = parse_walltime(text)
    numbers = [int(part) for part in parts]
    # What the writer likely meant: HH:MM, or, for one number, minutes (as Slurm reads --time=90).
    meant = numbers[0] * 3600 + numbers[1] * 60 if len(numbers) == 2 else numbers[0] * 60
    return (
        # TRANSLATORS: {duration} is how long the walltime is, e.g. "1 minute"
        _("walltime={text} is {duration} (PBS reads [[hours:]minutes:]seconds)").format(
            text=text, duration=_duration(seconds)
        ),
        # TRANSLATORS: {meant} is the time likely meant ("1 hour") and {meant_walltime} how to
        # write it (01:00:00); {duration} and {walltime} the same of what was written
        _("for {meant} write {meant_walltime}, for {duration} {walltime}").format(
            meant=_duration(meant),
            meant_walltime=format_walltime(meant),
            duration=_duration(seconds),
            walltime=format_walltime(seconds),
        ),
    )


def unknown_resource(name: str, known: Collection[str], where: str) -> JobError:
    """The error for a resource PBS would not know, naming the nearest one it does. `where` (the
    option or line, as written) prefixes the message: _within reads it there."""
    nearest = difflib.get_close_matches(name, known, n=1)
    hint = (
        _(
            "did you mean {nearest}? (a resource only your site has goes into its profile's "
            "`resources` list)"
        ).format(nearest=nearest[0])
        if nearest
        else _(
            "PBS knows {known} (a resource only your site has goes into its profile's `resources` "
            "list)"
        ).format(known=i18n.listed(known))
    )
    return JobError(f"{where}: " + _("unknown resource {name}").format(name=repr(name)), hint)


def _count(key: str, value: str, where: str) -> int:
    if not value.isdigit():
        raise JobError(
            f"{where}: " + _("{key} must be a number").format(key=key),
            _("e.g. {key}=2").format(key=key),
        )
    return int(value)


def parse_select(text: str, request: Request, extra: Collection[str] = ()) -> Request:
    """'2:mpiprocs=2:ngpus=2' -> 2 nodes, 2 ranks and 2 GPUs per node."""
    chunks = text.split("+")
    if len(chunks) > 1:
        raise JobError(
            _("select={text} mixes chunk kinds").format(text=text),
            _("the course's jobs use one kind: select=N:mpiprocs=M"),
        )
    count, *resources = chunks[0].split(":")
    if not count.isdigit() or int(count) < 1:
        raise JobError(
            f"select={text}: " + _("the node count must come first"),
            _("e.g. -l select=2:mpiprocs=2"),
        )
    values: dict[str, Any] = {"nodes": int(count)}
    for resource in resources:
        key, _equals, value = resource.partition("=")
        if key not in CHUNK_RESOURCES and key not in extra:
            raise unknown_resource(key, [*CHUNK_RESOURCES, *extra], f"select={text}")
        if key in _COUNTS:
            values[_COUNTS[key]] = _count(key, value, f"select={text}")
    return replace(request, **values)


def parse_nodes(text: str, request: Request) -> Request:
    """Torque's 'N:ppn=M:gpus=G' -> N nodes, M ranks and G GPUs per node."""
    count, *properties = text.split(":")
    if not count.isdigit() or int(count) < 1:
        raise JobError(
            f"nodes={text}: " + _("the node count must come first"),
            _("e.g. -l nodes=2:ppn=2, or PBS Pro's -l select=2:mpiprocs=2"),
        )
    values: dict[str, Any] = {"nodes": int(count)}
    for item in properties:
        key, equals, value = item.partition("=")
        if equals and key not in NODE_PROPERTIES:
            raise unknown_resource(key, NODE_PROPERTIES, f"nodes={text}")
        if equals:
            values[_COUNTS[key]] = _count(key, value, f"nodes={text}")
    return replace(request, **values)


def _within(error: JobError, context: str) -> JobError:
    """`error` prefixed with where it was found, the message's own prefix left out if `context`
    holds it (a prefix is the option or line as written, never translated: `where: what`)."""
    where, said, what = error.message.partition(": ")
    return JobError(
        f"{context}: {what if said and where in context else error.message}", error.hint
    )


def _apply_resource(item: str, request: Request, extra: Collection[str]) -> Request:
    """One `NAME=VALUE` of `-l`."""
    key, _, setting = item.partition("=")
    if key not in JOB_RESOURCES and key not in extra:
        raise unknown_resource(key, [*JOB_RESOURCES, *extra], item)
    if key == "select":
        return parse_select(setting, request, extra)
    if key == "nodes":
        return parse_nodes(setting, request)
    if key == "walltime":
        return replace(request, walltime=parse_walltime(setting), walltime_text=setting)
    if key in ("ngpus", "mpiprocs", "ncpus", "ompthreads"):
        counts: dict[str, Any] = {key: _count(key, setting, item)}
        return replace(request, **counts)
    return request


def _qsub_parser() -> argparse.ArgumentParser:
    """qsub's options as PBS reads them: the ones the kit uses, and the others a job script may
    carry (accepted, left to qsub). A repeated -l, -v or -W adds to the ones before it."""
    parser = argparse.ArgumentParser(
        prog="qsub", add_help=False, allow_abbrev=False, exit_on_error=False
    )
    for flag in ("-l", "-v", "-W"):
        parser.add_argument(flag, action="append", default=[])
    for flag in ("-q", "-N", "-j", "-o", "-e", "-m", "-M", "-A", "-P", "-r"):
        parser.add_argument(flag)
    parser.add_argument("-V", action="store_true")
    return parser


_QSUB = _qsub_parser()


def apply_options(
    options: list[str], request: Request | None = None, extra: Collection[str] = ()
) -> Request:
    """Apply qsub options (as in `qsub -l select=1:mpiprocs=2 -N x`) to a request; `extra`: the
    site's own resource names, allowed besides PBS's."""
    request = request or Request()
    try:
        parsed, unknown = _QSUB.parse_known_args(list(options))
    except argparse.ArgumentError as e:  # the only one these options raise: a value missing
        raise JobError(
            _("qsub option {flag} needs a value").format(flag=e.argument_name),
            _("e.g. {flag} ...").format(flag=e.argument_name),
        ) from None
    if unknown:
        raise JobError(
            _("unknown qsub option {option}").format(option=repr(unknown[0])),
            _("see `man qsub`; the course's jobs use -l, -q, -N, -W, -j, -v"),
        )
    for value in parsed.l:
        try:
            for item in value.split(","):
                request = _apply_resource(item, request, extra)
        except JobError as e:
            raise _within(e, f"-l {value}") from None
    for flag, field_name in (("q", "queue"), ("N", "name"), ("j", "join")):
        if getattr(parsed, flag) is not None:
            request = replace(request, **{field_name: getattr(parsed, flag)})
    for value in parsed.W:
        key, _equals, setting = value.partition("=")
        if key == "group_list":
            request = replace(request, group=setting)
    variables = dict(request.variables)
    for value in parsed.v:
        for pair in value.split(","):
            key, _equals, setting = pair.partition("=")
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
                raise JobError(
                    f"-v {value}: " + _("{key} is not a variable name").format(key=repr(key)),
                    _("e.g. -v COMMUNICATOR=naive"),
                )
            variables[key] = setting
    return replace(request, variables=variables)


def read_request(script: str, options: Sequence[str] = (), extra: Collection[str] = ()) -> Request:
    """The script's #PBS lines, then the command line's options, which win (as with qsub)."""
    request = Request()
    for line in directive_lines(script):
        try:
            request = apply_options(shlex.split(line), request, extra)
        except JobError as e:
            raise _within(e, f"#PBS {line}") from None
    return apply_options(list(options), request, extra)

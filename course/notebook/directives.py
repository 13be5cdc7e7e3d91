"""The stage-3 job's resource request, written by the student as the 2018 Reedbush-H hands-on had
them do.

The student's resource_request(site, nodes, ranks_per_node, walltime) returns the `#PBS` lines; they
are read with the kit's own directive parser (course.cluster.pbs), checked against what the site
needs, and written into jobs/run_multi_node_training.sh in place of the instructor's defaults (the
lines of the site's own scheduler, e.g. `#SBATCH --gres`, are kept). `course site apply` writes the
defaults again.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from course import paths
from course.cluster import pbs, siteenv, sites
from course.contracts import stages
from course.errors import CourseError, JobError
from course.fileio import atomic_file


@dataclass(frozen=True)
class Site:
    """What a job script's request must say for a site."""

    name: str
    queue: str | None  # the queue its jobs go to (-q); None: the site has none
    group: str | None  # the group its jobs are charged to (-W group_list); None: none
    resources: tuple[str, ...] = ()  # its own -l resource names, besides PBS's

    def __repr__(self) -> str:
        return f"Site(name={self.name!r}, queue={self.queue!r}, group={self.group!r})"


def applied_site(folder: Path = Path(".")) -> Site:
    """The site whose profile was applied to `folder`'s jobs/ (course site apply)."""
    settings = siteenv.of_folder(folder)
    return Site(settings.site or "?", settings.queue, settings.group, settings.resources)


def request_shape(folder: Path = Path(".")) -> tuple[int, int]:
    """(nodes, ranks per node) of the largest run of the site's stage-3 comparison."""
    return siteenv.of_folder(folder).largest_run


def check(lines, site: Site, nodes: int, ranks_per_node: int, walltime: str) -> pbs.Request:
    """The request `lines` make, read as PBS reads a job script; CourseError saying what to
    change."""
    if not isinstance(lines, (list, tuple)) or not all(isinstance(line, str) for line in lines):
        raise CourseError(
            f"resource_request returned {type(lines).__name__}, not a list of lines",
            'return a list such as ["#PBS -l select=1:mpiprocs=2", ...]',
        )
    for line in lines:
        if not line.startswith("#PBS "):
            raise CourseError(
                f"{line!r} is not a #PBS line", "each line starts with '#PBS ' and one qsub option"
            )
    try:
        request = pbs.read_request("#!/bin/bash\n" + "\n".join(lines) + "\n", extra=site.resources)
    except JobError as e:
        raise CourseError(e.message, e.hint) from None
    wanted = {"nodes": nodes, "MPI ranks per node": ranks_per_node}
    got = {"nodes": request.nodes, "MPI ranks per node": request.mpiprocs}
    for what in wanted:
        if got[what] != wanted[what]:
            raise CourseError(
                f"the lines ask for {got[what]} {what}; the run needs {wanted[what]}",
                "-l select=NODES:mpiprocs=RANKS_PER_NODE asks for NODES chunks (nodes here), each "
                "with RANKS_PER_NODE MPI ranks",
            )
    if request.walltime != pbs.parse_walltime(walltime):
        asked = "no walltime" if request.walltime is None else pbs.format_walltime(request.walltime)
        raise CourseError(
            f"the lines ask for {asked}; the run needs {walltime}",
            "-l walltime=HH:MM:SS: too little and the job is killed, too much and it waits longer "
            "in the queue",
        )
    for name, needed, found in (
        ("queue", site.queue, request.queue),
        ("group", site.group, request.group),
    ):
        if needed and found != needed:
            raise CourseError(
                f"{site.name} runs jobs in {name} {needed}; the lines "
                + (f"ask for {found}" if found else f"name no {name}"),
                f"a job without the site's {name} is refused at qsub (or charged to nobody): "
                f"which of site's fields holds it, and which #PBS option names a {name}?",
            )
        if not needed and found:
            raise CourseError(
                f"{site.name} has no {name}s, and the lines name {name} {found}",
                f"site.{name} is None here: a {name} PBS does not know refuses the job",
            )
    return request


def write(lines: list[str], folder: Path = Path(".")) -> Path:
    """Put `lines` in the stage-3 job script in place of the default #PBS lines; keep the site's
    other ones."""
    script = Path(folder) / stages.MULTI_NODE.job_path
    text = script.read_text()
    if sites.BEGIN not in text or sites.END not in text:
        raise CourseError(
            f"{script} has no site directive markers",
            f"restore it: python -m course site apply {applied_site(folder).name}",
        )
    block = text.split(sites.BEGIN, 1)[1].split(sites.END, 1)[0]
    kept = [
        line for line in block.splitlines() if line.startswith("#") and not line.startswith("#PBS")
    ]
    mode = script.stat().st_mode
    with atomic_file(script, "w") as f:
        f.write(sites.rewrite_directives(text, [*lines, *kept], str(script)))
    script.chmod(mode)
    return script


def use(resource_request, walltime: str, folder: Path = Path(".")) -> list[str]:
    """Call the student's resource_request for this site's largest stage-3 run, check it, write it
    into the job script and show the result; returns the lines."""
    site = applied_site(folder)
    nodes, ranks_per_node = request_shape(folder)
    lines = resource_request(site, nodes, ranks_per_node, walltime)
    check(lines, site, nodes, ranks_per_node, walltime)
    script = write(lines, folder)
    block = script.read_text().split(sites.BEGIN, 1)[1].split(sites.END, 1)[0].strip()
    print(
        f"{Path(paths.JOBS_DIR) / script.name} now asks for {nodes} node(s) x {ranks_per_node} MPI "
        "rank(s) "
        f"for {walltime}:\n{block}"
    )
    return lines

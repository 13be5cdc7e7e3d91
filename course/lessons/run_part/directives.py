"""The stage-3 job's resource request, derived by the student from the site's hardware and their
own measured epoch time, and written as the 2018 Reedbush-H hands-on had them write it ("2 GPUs per
node and 2 nodes, so...").

The student's resource_request(site, ranks, threads_per_rank, epoch_seconds, epochs) returns the
`#PBS` lines; they are read with the kit's own directive parser (course.cluster.pbs), checked
against what the run needs on that site (`check`), and written into jobs/run_multi_node_training.sh
in place of the instructor's defaults (the lines of the site's own scheduler, e.g. `#SBATCH --gres`,
are kept). `course site apply` writes the defaults again.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from course import evidence, paths
from course.cluster import pbs, siteenv, sites
from course.contracts import stages
from course.errors import CourseError, JobError
from course.fileio import atomic_file
from course.i18n import _

# The walltime's margin over the training's measured time, for start-up, evaluation and a slower
# node: at least this share of it and at least this many seconds; a request beyond three margins
# only waits longer in the queue.
MARGIN_SHARE = 0.2
MARGIN_SECONDS = 600
MARGINS_AT_MOST = 3


@dataclass(frozen=True)
class Site:
    """What a job script's request must say for a site, and the nodes it has."""

    name: str
    queue: str | None  # the queue its jobs go to (-q); None: the site has none
    group: str | None  # the group its jobs are charged to (-W group_list); None: none
    gpus_per_node: int = 0  # one rank per GPU; 0: a site of CPU nodes
    cores_per_node: int = 1  # what a job may use of a node's cores (CPU sites)
    resources: tuple[str, ...] = ()  # its own -l resource names, besides PBS's
    sockets_per_node: int = 1  # its nodes' sockets; their GPUs spread evenly over them

    def __repr__(self) -> str:
        return (
            f"Site(name={self.name!r}, queue={self.queue!r}, group={self.group!r}, "
            f"gpus_per_node={self.gpus_per_node}, cores_per_node={self.cores_per_node}, "
            f"sockets_per_node={self.sockets_per_node})"
        )


def applied_site(folder: Path = Path(".")) -> Site:
    """The site whose profile was applied to `folder`'s jobs/ (course site apply). A CPU site's
    nodes hold the ranks per node of its largest stage-3 run."""
    settings = siteenv.of_folder(folder)
    per_node = settings.largest_run[1]
    return Site(
        settings.site or "?",
        settings.queue,
        settings.group,
        settings.gpus_per_node,
        per_node * settings.threads_per_rank,
        settings.resources,
    )


def ranks_per_node(site: Site, threads_per_rank: int) -> int:
    """The most ranks a node of `site` takes: one per GPU, or on CPU nodes a core per thread."""
    return site.gpus_per_node or max(1, site.cores_per_node // threads_per_rank)


def walltime_range(epoch_seconds: float, epochs: int) -> tuple[int, int]:
    """(fewest, most) seconds a request may ask for a training of `epochs` at `epoch_seconds`."""
    training = epoch_seconds * epochs
    margin = max(MARGIN_SHARE * training, MARGIN_SECONDS)
    return math.ceil(training + margin), math.ceil(training + MARGINS_AT_MOST * margin)


def not_lines(kind: str) -> CourseError:
    """What `check` says of a result of type `kind` that is no list of lines."""
    return CourseError(
        _("resource_request returned {kind}, not a list of lines").format(kind=kind),
        _('return a list such as ["#PBS -l select=1:mpiprocs=2", ...]'),
    )


def check(
    lines, site: Site, ranks: int, threads_per_rank: int, epoch_seconds: float, epochs: int
) -> pbs.Request:
    """The request `lines` make, read as PBS reads a job script; CourseError saying what is wrong
    with it for a run of `ranks` ranks of `threads_per_rank` threads, `epochs` epochs of
    `epoch_seconds`."""
    if not isinstance(lines, (list, tuple)) or not all(isinstance(line, str) for line in lines):
        raise not_lines(type(lines).__name__)
    for line in lines:
        if not line.startswith("#PBS "):
            raise CourseError(
                _("{line} is not a #PBS line").format(line=repr(line)),
                _("each line starts with '#PBS ' and one qsub option"),
            )
    try:
        request = pbs.read_request("#!/bin/bash\n" + "\n".join(lines) + "\n", extra=site.resources)
    except JobError as e:
        raise CourseError(e.message, e.hint) from None
    _check_shape(request, site, ranks, threads_per_rank)
    _check_walltime(request, epoch_seconds, epochs)
    for name, needed, found in (
        ("queue", site.queue, request.queue),
        ("group", site.group, request.group),
    ):
        words = _words(name)
        if needed and found != needed:
            raise CourseError(
                (
                    _("{site} runs jobs in {what} {needed}; the lines ask for {found}")
                    if found
                    else _("{site} runs jobs in {what} {needed}; the lines name no {what}")
                ).format(site=site.name, what=words["what"], needed=needed, found=found),
                _(
                    "a job without the site's {what} is refused at qsub (or charged to nobody): "
                    "which of site's fields holds it, and which #PBS option names a {what}?"
                ).format(what=words["what"]),
            )
        if not needed and found:
            raise CourseError(
                _("{site} has no {whats}, and the lines name {what} {found}").format(
                    site=site.name, whats=words["whats"], what=words["what"], found=found
                ),
                _("site.{field} is None here: a {what} PBS does not know refuses the job").format(
                    field=name, what=words["what"]
                ),
            )
    return request


def _words(name: str) -> dict[str, str]:
    """A request's field ("queue" or "group") as the messages say it, one and several."""
    if name == "queue":
        return {"what": _("queue"), "whats": _("queues")}
    return {"what": _("group"), "whats": _("groups")}


def _check_shape(request: pbs.Request, site: Site, ranks: int, threads_per_rank: int) -> None:
    """Every rank started, none sharing a GPU or a core, on as few nodes as hold them."""
    most = ranks_per_node(site, threads_per_rank)
    holds = (
        _("a node of {site} has {gpus} GPU(s), one per rank").format(
            site=site.name, gpus=site.gpus_per_node
        )
        if site.gpus_per_node
        else _(
            "a node of {site} gives a job {cores} core(s), one per thread, and each rank runs "
            "{threads} thread(s)"
        ).format(site=site.name, cores=site.cores_per_node, threads=threads_per_rank)
    )
    if request.ranks != ranks:
        raise CourseError(
            _(
                "the lines start {nodes} node(s) x {mpiprocs} rank(s) = {started} rank(s); the "
                "run needs {ranks}"
            ).format(
                nodes=request.nodes,
                mpiprocs=request.mpiprocs,
                started=request.ranks,
                ranks=ranks,
            ),
            _("select=NODES:mpiprocs=M starts M ranks on each of NODES nodes"),
        )
    if request.mpiprocs > most:
        raise CourseError(
            _("{mpiprocs} ranks per node would share what a node has: {holds}").format(
                mpiprocs=request.mpiprocs, holds=holds
            ),
            _(
                "ranks beyond what a node holds share a GPU or cores, and every rank then runs "
                "slower"
            ),
        )
    fewest = math.ceil(ranks / most)
    if request.nodes > fewest:
        raise CourseError(
            # Never the number of nodes (a student would copy it): what it follows from.
            _("{nodes} nodes for {ranks} ranks leave part of each idle: {holds}").format(
                nodes=request.nodes, ranks=ranks, holds=holds
            ),
            _(
                "a job on more nodes than it needs waits longer in the queue, is charged for the "
                "idle parts, and its ranks talk across the network where they could share a node"
            ),
        )
    asked = request.ompthreads or 1
    if asked != threads_per_rank:
        raise CourseError(
            (
                _("each rank runs {threads} thread(s), and the lines ask for ompthreads={asked}")
                if request.ompthreads
                else _("each rank runs {threads} thread(s), and the lines ask for no ompthreads")
            ).format(threads=threads_per_rank, asked=request.ompthreads),
            _(
                "PBS sets each rank's OMP_NUM_THREADS from the chunk's ompthreads (1 when not "
                "asked)"
            ),
        )


def _check_walltime(request: pbs.Request, epoch_seconds: float, epochs: int) -> None:
    """Enough for the measured training and its margin, not so much that it waits for nothing."""
    fewest, most = walltime_range(epoch_seconds, epochs)
    training = pbs.format_walltime(math.ceil(epoch_seconds * epochs))
    if request.walltime is None:
        raise CourseError(
            _("the lines ask for no walltime"),
            _("without one the queue's default applies, which may be shorter than the training"),
        )
    asked = pbs.format_walltime(request.walltime)
    if request.walltime < fewest:
        raise CourseError(
            _(
                "walltime {asked} leaves too little margin: {epochs} epoch(s) of {seconds:.0f} s "
                "take {training}, and the margin must be at least {share:.0%} of that and at least "
                "{minutes} minutes"
            ).format(
                asked=asked,
                epochs=epochs,
                seconds=epoch_seconds,
                training=training,
                share=MARGIN_SHARE,
                minutes=MARGIN_SECONDS // 60,
            ),
            _("a job killed at its walltime resumes from its snapshot only when submitted again"),
        )
    if request.walltime > most:
        raise CourseError(
            _(
                "walltime {asked} is more than the training ({training}) and {margins} margins"
            ).format(asked=asked, training=training, margins=MARGINS_AT_MOST),
            _(
                "the scheduler reserves the whole walltime: a longer request waits longer in the "
                "queue and holds the nodes from others"
            ),
        )


def measured_epochs(folder: Path = Path(".")) -> tuple[float, int]:
    """(seconds per epoch, epochs) of the student's newest traced stage-1 run: one rank's epoch
    bounds what a rank of stage 3 takes (it trains on its part of the data)."""
    found = [run for run in evidence.runs(stages.SINGLE_GPU.name, folder) if run.traced]
    if not found:
        raise CourseError(
            _("there is no traced stage-1 run in runs/ to measure an epoch's time with"),
            _("run notebook 01's job first: its epoch time sets this job's walltime"),
        )
    record = found[-1].record
    epochs = len(record["log"])
    # The trainer's elapsed time goes on across a resumption; the wall time is the last job's.
    seconds = record["log"][-1].get("elapsed_time") or record["wall_seconds"]
    return seconds / epochs, epochs


def write(lines: list[str], folder: Path = Path(".")) -> Path:
    """Put `lines` in the stage-3 job script in place of the default #PBS lines; keep the site's
    other ones."""
    script = Path(folder) / stages.MULTI_NODE.job_path
    text = script.read_text(encoding="utf-8")  # whatever the locale: an edition's comments
    if sites.BEGIN not in text or sites.END not in text:
        raise CourseError(
            _("{script} has no site directive markers").format(script=script),
            _("restore it: {command}").format(
                command=f"python -m course site apply {applied_site(folder).name}"
            ),
        )
    block = text.split(sites.BEGIN, 1)[1].split(sites.END, 1)[0]
    kept = [
        line for line in block.splitlines() if line.startswith("#") and not line.startswith("#PBS")
    ]
    mode = script.stat().st_mode
    with atomic_file(script) as f:
        f.write(sites.rewrite_directives(text, [*lines, *kept], str(script)).encode())
    script.chmod(mode)
    return script


def use(resource_request, folder: Path = Path(".")) -> list[str]:
    """Call the student's resource_request for this site's largest stage-3 run, with the epoch
    time of their stage-1 run; check it, write it into the job script and show the result; returns
    the lines."""
    site = applied_site(folder)
    nodes, per_node = siteenv.of_folder(folder).largest_run
    threads = siteenv.of_folder(folder).threads_per_rank
    resource_request(site, nodes * per_node, threads, 60.0, 1)  # a stub says so before the runs
    epoch_seconds, epochs = measured_epochs(folder)
    lines = resource_request(site, nodes * per_node, threads, epoch_seconds, epochs)
    request = check(lines, site, nodes * per_node, threads, epoch_seconds, epochs)
    script = write(lines, folder)
    block = (
        script.read_text(encoding="utf-8").split(sites.BEGIN, 1)[1].split(sites.END, 1)[0].strip()
    )
    print(
        _(
            "{script} now asks for {nodes} node(s) x {mpiprocs} MPI rank(s) for {walltime} "
            "({epochs} epoch(s) of {seconds:.0f} s measured in stage 1):"
        ).format(
            script=Path(paths.JOBS_DIR) / script.name,
            nodes=request.nodes,
            mpiprocs=request.mpiprocs,
            walltime=pbs.format_walltime(request.walltime or 0),
            epochs=epochs,
            seconds=epoch_seconds,
        )
        + f"\n{block}"
    )
    return lines

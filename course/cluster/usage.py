"""Node-hours and GPU-hours: what a job costs, what a student's jobs have used, and the site
profile's per-student budget ([budget]), which `course submit` checks before it submits.

Node-hours count whole nodes (what a site that allocates whole nodes charges); GPU-hours the GPUs a
job uses (`gpus_used`). `course plan` (course.instructor.allocation) counts the course's jobs with
the same Usage.

What a student has used, in `used`:
- each run in runs/*/results.json that a job wrote: its wall time (`wall_seconds`, its last job's;
  for a resumed run also each earlier job's time up to its last snapshot) x its nodes (its distinct
  hosts) and its GPUs (distinct host and device pairs of a GPU run); runs made outside a job use no
  allocation and do not count;
- each job `course submit` submitted that has not ended: its walltime x the nodes and GPUs it asks
  for, as it may use all of it (the run it is writing is not counted on top).
The jobs submitted are kept per user in the ledger (LEDGER in the local scheduler's state folder),
with the folder each came from: the runs of all those folders count, not only the current one's.

What it does not defend against: a student who deletes runs/ or the ledger, edits a results file, or
submits with `qsub` itself is not counted. The scheduler's own accounting is the real limit; this
keeps a student from running out halfway through the class without knowing why.
"""

from __future__ import annotations

import fcntl
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path

from course import i18n
from course.cluster import job as following
from course.cluster import localsched, pbs
from course.cluster.siteenv import SiteSettings
from course.contracts import jobend, joblog, model_parallel, results, stages
from course.errors import JobError, ResultsError
from course.fileio import atomic_file
from course.i18n import _

NODE_HOURS, GPU_HOURS = "node-hours", "GPU-hours"
BENCHMARK_SCRIPT = "run_allreduce_benchmark.sh"  # MPI between ranks: it uses no GPU
# The jobs that run on CPU ranks only, wherever they run: the benchmark and notebook 08's split.
CPU_SCRIPTS = (BENCHMARK_SCRIPT, model_parallel.JOB_SCRIPT)
LEDGER = "submitted-jobs.json"


@dataclass(frozen=True)
class Usage:
    """A job's or a run's share of the allocation."""

    what: str
    nodes: int
    gpus: int  # the GPUs it uses
    seconds: float
    source: str  # where the time comes from: a run folder, a job, or "walltime"

    @property
    def node_hours(self) -> float:
        return self.nodes * self.seconds / 3600

    @property
    def gpu_hours(self) -> float:
        return self.gpus * self.seconds / 3600

    def hours(self, kind: str) -> float:
        return self.node_hours if kind == NODE_HOURS else self.gpu_hours


def gpus_used(script: str, ranks_per_node: int, site_gpus: int, asked: int = 0) -> int:
    """The GPUs per node a job of `script` (a jobs/ file name) uses: none for the allreduce
    benchmark and the model-parallel job (CPU_SCRIPTS), every GPU of the node for stage 2 (one
    process drives them all), else the ngpus it asks for or one per rank; `site_gpus`: the
    profile's gpus_per_node (0: whatever is there)."""
    if script in CPU_SCRIPTS:
        return 0
    if script == stages.MULTI_GPU.job_script:
        return site_gpus or asked
    return asked or min(ranks_per_node, site_gpus)


def limits(settings: SiteSettings) -> dict[str, float]:
    """{kind: hours per student} of the budget the site profile sets; {} for none."""
    budget = {
        NODE_HOURS: settings.node_hours_per_student,
        GPU_HOURS: settings.gpu_hours_per_student,
    }
    return {kind: hours for kind, hours in budget.items() if hours is not None}


def hours(value: float) -> str:
    return f"{value:.1f}" if value >= 10 else f"{value:.2f}" if value >= 1 else f"{value:.3f}"


def job_usage(script: Path, options: Sequence[str], settings: SiteSettings) -> Usage:
    """What a job may use: its walltime x the nodes and GPUs its directives and `options` ask for;
    JobError when it asks for no walltime."""
    request = pbs.read_request(script.read_text(encoding="utf-8"), options, settings.resources)
    if request.walltime is None:
        raise JobError(
            _(
                "{script} asks for no walltime, so what it may use cannot be counted against your "
                "budget"
            ).format(script=script.name),
            _("give it one: -l walltime=HH:MM:SS"),
        )
    per_node = gpus_used(script.name, request.mpiprocs, settings.gpus_per_node, request.ngpus)
    return Usage(script.name, request.nodes, request.nodes * per_node, request.walltime, "walltime")


def run_usage(record: dict) -> Usage:
    """What a run (a loaded results record) used."""
    hosts = record["hosts"]
    gpus = len(set(zip(hosts, record["devices"]))) if record.get("device_kind") == "gpu" else 0
    earlier = (record.get("segments") or [])[:-1]  # resumed: the jobs before its last
    seconds = float(record.get("wall_seconds") or 0) + sum(map(_segment_seconds, earlier))
    folder = Path(record["_path"]).parent
    return Usage(
        record["stage"], len(set(hosts)), gpus, seconds, f"{results.RUNS_DIR}/{folder.name}"
    )


def _segment_seconds(segment: dict) -> float:
    """An earlier job's time on a resumed run, up to its last snapshot (what is known of it)."""
    if not segment.get("snapshot_at") or not segment.get("started_at"):
        return 0.0
    started = datetime.fromisoformat(segment["started_at"])
    return max(0.0, (datetime.fromisoformat(segment["snapshot_at"]) - started).total_seconds())


# --- the ledger of submitted jobs ------------------------------------------------------------


def ledger_path() -> Path:
    return localsched.state_dir() / LEDGER


# What each entry of the ledger holds (record() writes them): the budget needs all of it.
ENTRY_KEYS: dict[str, type | tuple[type, ...]] = {
    "id": str,
    "scheduler": str,
    "folder": str,
    "what": str,
    "nodes": int,
    "gpus": int,
    "seconds": (int, float),
}


@dataclass(frozen=True)
class Ledger:
    """The ledger's entries that can be used, and what is wrong with the file ("" when nothing)."""

    entries: list[dict]
    problem: str = ""


def _well_formed(entry: object) -> bool:
    return isinstance(entry, dict) and all(
        isinstance(entry.get(key), kind) for key, kind in ENTRY_KEYS.items()
    )


def read_ledger() -> Ledger:
    """The ledger as far as it can be read: a missing file is an empty ledger, a damaged one is
    said (its well-formed entries still count)."""
    path = ledger_path()
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return Ledger([])
    except (OSError, UnicodeDecodeError) as error:
        return Ledger([], _("cannot be read ({error})").format(error=error))
    try:
        entries = json.loads(text)
    except ValueError:
        return Ledger(
            [],
            _("is empty")
            if not text.strip()
            else _("is not whole JSON (cut short, or edited by hand)"),
        )
    if not isinstance(entries, list):
        return Ledger([], _("is not a list of jobs"))
    usable = [entry for entry in entries if _well_formed(entry)]
    if len(usable) < len(entries):
        return Ledger(
            usable,
            _("has {bad} of {total} entries without what the budget needs ({keys})").format(
                bad=len(entries) - len(usable), total=len(entries), keys=i18n.listed(ENTRY_KEYS)
            ),
        )
    return Ledger(usable)


def set_aside_damaged() -> str:
    """When the ledger is damaged: keep the file under another name, start a new one with the
    entries that could be read, and return what the student is told ("" when it is whole). The
    budget is a warning aid, so a damaged ledger never stops a submission."""
    path = ledger_path()
    if not read_ledger().problem:  # the usual case: no lock taken, nothing written
        return ""
    with open(path.with_suffix(".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        ledger = read_ledger()
        if not ledger.problem:  # another submission set it aside meanwhile
            return ""
        kept = path.with_name(f"{path.name}.damaged-{datetime.now():%Y%m%d-%H%M%S}")
        try:
            path.rename(kept)
            with atomic_file(path, "w") as f:
                json.dump(ledger.entries, f, indent=1)
        except OSError as error:
            done = _(
                "It could not be set aside ({error}): move it away yourself "
                "(mv {path} {path}.damaged) and a new one starts with your next job."
            ).format(error=error, path=path)
        else:
            done = _(
                "The file is kept as {kept}, and a new ledger starts with the {count} job(s) "
                "that could be read."
            ).format(kept=kept, count=len(ledger.entries))
    return " ".join(
        [
            # TRANSLATORS: {problem} says what is wrong with the file, e.g. "is empty"
            _(
                "warning: the ledger of your submitted jobs {path} {problem}. It only warns you "
                "before your budget runs out (the scheduler's own accounting is the real limit), "
                "so course submit carries on without the jobs it could not list."
            ).format(path=path, problem=ledger.problem),
            done,
        ]
    )


def record(job_id: str, scheduler: str, folder: Path, asked: Usage) -> None:
    """Add a submitted job to the ledger (atomically, one writer at a time)."""
    path = ledger_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        entry = {"id": job_id, "scheduler": scheduler, "folder": str(folder), **asdict(asked)}
        with atomic_file(path, "w") as f:
            json.dump([*read_ledger().entries, entry], f, indent=1)


def _ended(entry: dict) -> bool:
    """Whether a ledger's job has ended: its log says so, else its scheduler (a job it no longer
    knows has ended; one whose state it cannot tell is taken as still running)."""
    log = joblog.find(Path(entry["folder"]), entry["id"])
    text = joblog.read(log) if log is not None else ""
    if jobend.exit_status(text) is not None or jobend.killed_by_scheduler(text):
        return True
    if entry["scheduler"] == "local":
        try:
            return localsched.find(entry["id"]).exit_status() is not None
        except JobError:  # the local scheduler no longer knows it
            return True
    return following.qstat_state(entry["id"]) == "finished"


def used(folder: Path) -> tuple[list[Usage], list[Usage]]:
    """What the student has used: (the runs of `folder` and of every folder they submitted from,
    the jobs they submitted that have not ended, at their walltime)."""
    entries = read_ledger().entries
    running = [entry for entry in entries if not _ended(entry)]
    running_ids = {joblog.job_number(entry["id"]) for entry in running}
    folders = {Path(folder).resolve(), *(Path(entry["folder"]) for entry in entries)}
    spent = []
    for place in sorted(folders):
        for path in results.find(place):
            try:
                run = results.load(path)
            except ResultsError:  # not a run's record: nothing known of what it used
                continue
            job_id = (run.get("job") or {}).get("id")
            if job_id and joblog.job_number(job_id) not in running_ids:
                spent.append(run_usage(run))
    jobs = [
        Usage(
            entry["what"],
            entry["nodes"],
            entry["gpus"],
            entry["seconds"],
            _("job {job} (not ended)").format(job=entry["id"]),
        )
        for entry in running
    ]
    return spent, jobs


def check(
    folder: Path, script: Path, options: Sequence[str], settings: SiteSettings
) -> tuple[Usage, str]:
    """(what the job may use, one line of what is left after it) when the student's budget has
    room for it; JobError, saying what was used and what to do, when it has not. Only where the
    site sets a budget."""
    asked = job_usage(script, options, settings)
    damaged = set_aside_damaged()
    runs, jobs = used(folder)
    spent = runs + jobs
    parts = []
    for kind, limit in limits(settings).items():
        so_far = sum(usage.hours(kind) for usage in spent)
        total = so_far + asked.hours(kind)
        named = _("node-hours") if kind == NODE_HOURS else _("GPU-hours")
        if total > limit:
            listed = i18n.listed(
                f"{u.source}: {hours(u.hours(kind))}" for u in spent if u.hours(kind)
            )
            fields = dict(left=hours(max(0.0, limit - so_far)), kind=named)
            raise JobError(
                (f"{damaged}\n" if damaged else "")
                # TRANSLATORS: {kind} is node-hours or GPU-hours; {spent} lists where the hours
                # used went ("runs/single_gpu-9.local: 0.008, job 12.local (not ended): 0.033")
                + _(
                    "{script} was NOT SUBMITTED: it would take your {kind} to {total} of the "
                    "{limit} each student has on site {site}. You have used {used} ({spent}); this "
                    "job may use {asked} ({nodes} node(s), {gpus} GPU(s), walltime {walltime})."
                ).format(
                    script=script.name,
                    kind=named,
                    total=hours(total),
                    limit=hours(limit),
                    site=settings.site,
                    used=hours(so_far),
                    spent=listed or _("no runs or pending jobs yet"),
                    asked=hours(asked.hours(kind)),
                    nodes=asked.nodes,
                    gpus=asked.gpus,
                    walltime=pbs.format_walltime(int(asked.seconds)),
                ),
                # TRANSLATORS: {kind} is node-hours or GPU-hours
                _(
                    "ask for less ({left} {kind} are left): a shorter walltime "
                    "(-l walltime=HH:MM:SS) or fewer nodes (-l select=NODES:mpiprocs=RANKS), or "
                    "wait for your jobs that have not ended (each counts its whole walltime till "
                    "then); or ask your instructor for more"
                ).format(**fields)
                if jobs
                else _(
                    "ask for less ({left} {kind} are left): a shorter walltime "
                    "(-l walltime=HH:MM:SS) or fewer nodes (-l select=NODES:mpiprocs=RANKS); or "
                    "ask your instructor for more"
                ).format(**fields),
            )
        parts.append(
            # TRANSLATORS: {kind} is node-hours or GPU-hours
            _("{used} of {limit} {kind} used, this job up to {asked}, {left} left after it").format(
                used=hours(so_far),
                limit=hours(limit),
                kind=named,
                asked=hours(asked.hours(kind)),
                left=hours(limit - total),
            )
        )
    # TRANSLATORS: {parts} is what is used and left of each kind of hours, joined with "; "
    line = _("budget on site {site}: {parts}").format(
        site=settings.site, parts=i18n.listed(parts, "; ")
    )
    return asked, f"{damaged}\n{line}" if damaged else line

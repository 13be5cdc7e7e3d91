"""`python -m course plan --students N`: what the course's jobs cost on the applied site, for an
allocation or reservation request.

    python -m course plan --students 40                     # times: the job scripts' walltimes
    python -m course plan --students 40 --measured DIR      # times: the runs of a dry run in DIR

Every job the notebooks submit is counted: stage 1's and stage 2's job once each (stage 2 only where
the site profile declares 2 or more GPUs per node: its notebook submits nothing without them),
stage 3's comparison and its two step profiles (course.cluster.plan), and the allreduce benchmark
on 2 and 4 ranks of one node, twice (the benchmark cells of 04_step_time.ipynb and of
05_the_exchange.ipynb; on GPU nodes only as many ranks as GPUs, as `course submit` allows). A
job's time is the longest run of the same kind in DIR/runs/*/results.json (its training's wall
time scaled to the site's epochs; the job's start-up is not in it; `course site verify` writes
such a DIR), else its walltime from the job script (an upper bound: what the scheduler reserves).
Every job is budgeted --resubmit times, for the tries that fail or are cut short.

Node-hours count whole nodes (what a site that allocates whole nodes charges); GPU-hours the GPUs
the job uses: one per rank, every GPU of the node in stage 2, none for the benchmark
(course.cluster.usage, which `course submit` counts a student's jobs with). Where the site profile
sets a per-student budget ([budget]), the plan shows it beside its own estimate and warns when the
estimate exceeds it.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from course import paths
from course.cli import command_parser
from course.cluster import pbs, plan, siteenv, usage
from course.cluster.siteenv import SiteSettings
from course.cluster.usage import Usage
from course.contracts import lessons, model_parallel, results, stages
from course.errors import CourseError, ResultsError

RESUBMIT = 2.0  # each job twice: a try that fails or is cut short, and the one that counts


@dataclass(frozen=True)
class Budget:
    site: str
    jobs: list[Usage]
    students: int
    resubmit: float
    left_out: list[str]  # jobs the notebooks do not submit on this site, and why
    gpus_per_node: int  # 0: the site profile declares no GPUs (CPU nodes)
    limits: dict[str, float]  # the site's budget per student, {kind: hours} (usage.limits)

    @property
    def node_hours(self) -> float:
        """Per student, resubmissions included."""
        return self.resubmit * sum(job.node_hours for job in self.jobs)

    @property
    def gpu_hours(self) -> float:
        return self.resubmit * sum(job.gpu_hours for job in self.jobs)

    def hours(self, kind: str) -> float:
        return self.node_hours if kind == usage.NODE_HOURS else self.gpu_hours

    @property
    def peak_nodes(self) -> int:
        """Nodes in use when every student's largest job runs at once."""
        return self.students * max(job.nodes for job in self.jobs)

    @property
    def peak_gpus(self) -> int:
        return self.students * max(job.gpus for job in self.jobs)

    @property
    def reservation_hours(self) -> float:
        """How long the class takes on peak_nodes nodes: each student's jobs one after another
        (the notebooks wait for each), the students side by side."""
        return self.resubmit * sum(job.seconds for job in self.jobs) / 3600


def _record_matches(record: dict, stage: str, run: plan.PlannedRun | None, batch: int) -> bool:
    """Whether a results record is a run of `stage` (and of the planned `run`: the same ranks,
    communication, rule, profiling and batch per worker; `batch`: the site's)."""
    if record.get("stage") != stage:
        return False
    if run is None:
        return True
    return (
        record.get("workers") == run.nodes * run.per_node
        and (record.get("communicator") or "") == run.communicator
        and (record.get("allreduce") or "") == run.allreduce
        and ((record.get("lr_schedule") or {}).get("rule") or stages.TAUGHT_LR_RULE) == run.lr_rule
        and bool(record.get("profile")) == run.profile
        and (record.get("batch_size") or {}).get("per_worker") == (run.batch_per_worker or batch)
    )


def measured_runs(folder: Path) -> list[dict]:
    """The results files of a dry run (finished or not: a cut-short run still took its time)."""
    found = []
    for path in results.find(folder):
        try:
            found.append(results.load(path))
        except ResultsError as e:
            raise CourseError(
                f"a run of the dry run cannot be read: {e.message}", e.hint or ""
            ) from None
    if not found:
        raise CourseError(
            f"no runs in {Path(folder, results.RUNS_DIR)}/ to take the times from",
            "give the folder the dry run's jobs were submitted from (it holds runs/), or leave "
            "out --measured to budget the walltimes",
        )
    return found


def _time(
    measured: list[dict],
    stage: str,
    run: plan.PlannedRun | None,
    batch: int,
    walltime: int | None,
    what: str,
    epochs: int,
) -> tuple[float, str]:
    """(seconds, where from): the longest matching measured run, its time scaled to the epochs a
    student's run trains (`epochs`: a verify run trains one), else the walltime."""
    matching = [
        r for r in measured if _record_matches(r, stage, run, batch) and r.get("wall_seconds")
    ]
    if matching:
        wanted = 1 if run is not None and run.profile else epochs
        times = {
            Path(r["_path"]).parent.name: r["wall_seconds"]
            * wanted
            / (r.get("epochs_planned") or wanted)
            for r in matching
        }
        longest = max(times, key=lambda name: times[name])
        return float(times[longest]), longest
    if walltime is None:
        raise CourseError(
            f"{what}: its job script asks for no walltime and no run of it was measured",
            "set the job's walltime in the site profile and apply it, or give --measured with a "
            "dry run that ran it",
        )
    return float(walltime), "walltime"


def _walltime(folder: Path, script: str, settings: SiteSettings) -> int | None:
    path = folder / paths.JOBS_DIR / script
    if not path.is_file():
        raise CourseError(f"{path} does not exist", "give the kit's folder, with jobs/ in it")
    return pbs.read_request(path.read_text(), extra=settings.resources).walltime


def budget(
    folder: Path, students: int, resubmit: float = RESUBMIT, measured: list[dict] | None = None
) -> Budget:
    """The course's jobs on the site applied in `folder`/jobs, with their times."""
    if students < 1 or resubmit < 1:
        raise CourseError(
            f"--students {students} and --resubmit {resubmit:g}: a plan needs at least 1 of each",
            "e.g. --students 40 --resubmit 2",
        )
    settings = siteenv.of_folder(folder)
    measured = measured or []
    gpus, batch = settings.gpus_per_node, plan.site_batch(settings)
    epochs = plan.site_epochs(settings)
    jobs, left_out = [], []

    def add(what: str, stage: stages.Stage, run, nodes: int, per_node: int) -> None:
        walltime = _walltime(folder, stage.job_script, settings)
        seconds, source = _time(measured, stage.name, run, batch, walltime, what, epochs)
        used = nodes * usage.gpus_used(stage.job_script, per_node, gpus)
        jobs.append(Usage(what, nodes, used, seconds, source))

    add("stage 1", stages.SINGLE_GPU, None, 1, 1)
    if gpus >= 2:
        add("stage 2", stages.MULTI_GPU, None, 1, 1)
    else:
        left_out.append(
            f"stage 2: the site profile declares {gpus} GPU(s) per node (gpus_per_node), and its "
            "notebook submits its job only where there are 2 or more"
        )
    chosen = lessons.load(folder).jobs  # the chosen lessons' jobs only (course.toml)
    runs = plan.comparison_plan(folder) if lessons.STAGE_3 in chosen else []
    runs += plan.profile_plan(folder) if lessons.PROFILE in chosen else []
    for run in runs:
        what = "stage 3: " + run.describe(settings.select).split(":  qsub")[0]
        add(what, stages.MULTI_NODE, run, run.nodes, run.per_node)

    def add_walltime(what: str, script: str, nodes: int, per_node: int) -> None:
        """A job whose time is its walltime (its time is not measured): on CPU ranks only."""
        seconds = _walltime(folder, script, settings)
        if seconds is None:
            raise CourseError(
                f"jobs/{script} asks for no walltime, and its time is not measured",
                f"set it in the site profile ([jobs.{script[:-3]}] walltime), apply it",
            )
        used = nodes * usage.gpus_used(script, per_node, gpus)
        jobs.append(
            Usage(f"{what}: {nodes} node(s) x {per_node} ranks", nodes, used, seconds, "walltime")
        )

    # Notebook 04's benchmark, then notebook 05's (the ring against a parameter server): the same
    # job script on the same ranks.
    benchmarks = {
        lessons.BENCHMARK: "allreduce benchmark",
        lessons.EXCHANGE_BENCHMARK: "allreduce benchmark, ring against parameter server",
    }
    for kind in (what for job, what in benchmarks.items() if job in chosen):
        for nodes, per_node in plan.benchmark_plan(folder):
            add_walltime(kind, usage.BENCHMARK_SCRIPT, nodes, per_node)
    if lessons.MODEL_PARALLEL in chosen:
        add_walltime(
            "model against data parallelism (notebook 08)", model_parallel.JOB_SCRIPT, 1, 2
        )
    return Budget(settings.site, jobs, students, resubmit, left_out, gpus, usage.limits(settings))


def render(budget: Budget) -> str:
    """The jobs, the totals, and the text of a request, for the terminal."""
    width = max(len(job.what) for job in budget.jobs)
    lines = [
        f"The course's jobs on site {budget.site}, per student (the totals count each job "
        f"x{budget.resubmit:g} for resubmissions):",
        f"  {'job':<{width}}  nodes  GPUs  minutes  node-h  GPU-h  time from",
    ]
    for job in budget.jobs:
        lines.append(
            f"  {job.what:<{width}}  {job.nodes:>5}  {job.gpus:>4}  {job.seconds / 60:>7.1f}  "
            f"{job.node_hours:>6.2f}  {job.gpu_hours:>5.2f}  {job.source}"
        )
    lines += [f"  left out: {why}" for why in budget.left_out]
    n = budget.students
    lines += [
        "",
        f"per student: {usage.hours(budget.node_hours)} node-hours, "
        f"{usage.hours(budget.gpu_hours)} GPU-hours",
        *against_limits(budget),
        f"class of {n}: {usage.hours(n * budget.node_hours)} node-hours, "
        f"{usage.hours(n * budget.gpu_hours)} GPU-hours",
        f"largest simultaneous demand: {budget.peak_nodes} nodes ({budget.peak_gpus} GPUs), when "
        "every student's largest job runs at once",
        "",
        "Allocation request:",
        "",
        request(budget),
    ]
    return "\n".join(lines)


def against_limits(budget: Budget) -> list[str]:
    """The site's per-student budget beside the plan's estimate, and a warning for each kind of
    hours the estimate exceeds it in (`course submit` would refuse students jobs before the end)."""
    if not budget.limits:
        return []
    limits = ", ".join(f"{usage.hours(limit)} {kind}" for kind, limit in budget.limits.items())
    lines = [f"site budget per student ([budget] of the site profile): {limits}"]
    for kind, limit in budget.limits.items():
        if budget.hours(kind) > limit:
            lines.append(
                f"warning: the plan's {usage.hours(budget.hours(kind))} {kind} per student exceed "
                f"the budget's {usage.hours(limit)}: `course submit` would refuse students jobs "
                "before the course's end; raise the budget in the site profile, or plan shorter "
                "walltimes or fewer resubmissions (--resubmit)"
            )
    return lines


def request(budget: Budget) -> str:
    n = budget.students
    measured = [job for job in budget.jobs if job.source != "walltime"]
    times = (
        "measured in a dry run of the course on this system, walltimes for the rest"
        if measured
        else "the jobs' walltimes, an upper bound"
    )
    gpus = budget.gpus_per_node
    hours = f"{usage.hours(n * budget.node_hours)} node-hours" + (
        f" ({usage.hours(n * budget.gpu_hours)} GPU-hours)" if gpus else ""
    )
    per_student = f"{usage.hours(budget.node_hours)} node-hours" + (
        f" and {usage.hours(budget.gpu_hours)} GPU-hours" if gpus else ""
    )
    nodes = f"nodes with {gpus} GPUs each" if gpus else "CPU nodes"
    return (
        f"We request {hours} on {budget.site} for a hands-on course on distributed deep-learning "
        f"training (Chainer, ChainerMN, CuPy) for {n} students. Each student runs "
        f"{len(budget.jobs)} batch jobs on up to {max(job.nodes for job in budget.jobs)} {nodes}: "
        f"{per_student} per student, every job counted {budget.resubmit:g} time(s) for "
        f"resubmissions (times: {times}). The students submit during the class, so we also ask "
        f"for a reservation (or a dedicated queue) of {budget.peak_nodes} nodes for "
        f"{usage.hours(budget.reservation_hours)} hours, in which every student's jobs run one "
        "after another and the students' side by side."
    )


def main(argv: list[str] | None = None) -> int:
    parser = command_parser("course plan", __doc__)
    parser.add_argument("--students", type=int, required=True, help="how many take the course")
    parser.add_argument(
        "--resubmit",
        type=float,
        default=RESUBMIT,
        help="times each job is budgeted (default %(default)g)",
    )
    parser.add_argument(
        "--measured", type=Path, default=None, help="a dry run's folder: its runs/ give the times"
    )
    parser.add_argument(
        "--folder",
        type=Path,
        default=None,
        help="the kit's folder, site applied (default: the kit)",
    )
    args = parser.parse_args(argv)
    folder = args.folder or paths.kit_root()
    measured = measured_runs(args.measured) if args.measured else None
    print(render(budget(folder, args.students, args.resubmit, measured)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

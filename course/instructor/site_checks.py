"""The checks of `python -m course site verify`, read from its jobs' own outputs.

Every fact comes from what the jobs left in the verify folder: the probe job's line
(course.diagnostics.probe), the training runs' results.json traced to their logs (course.evidence),
the rank lines of stage 3's log, the allreduce benchmark's files, and how each job ended. Nothing is
assumed where a job did not say it: a check whose job did not run fails and says why.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from course import comparison, evidence, paths
from course.cluster import pbs, plan
from course.cluster.job import Job
from course.cluster.siteenv import SiteSettings
from course.contracts import benchmark, grading_rules, joblog, stages
from course.diagnostics import probe
from course.errors import CourseError
from course.instructor.site_report import Check

# A stage's walltime must hold its whole run times this: a busier node, evaluations and snapshots
# that the one-epoch run of verify measures only once, and a queue that starts the job late.
WALLTIME_MARGIN = 1.5
NO_GPU = "no GPU on these nodes"
APPLY_AGAIN = "then apply the profile (python -m course site apply PROFILE) and verify again"


@dataclass(frozen=True)
class Outcome:
    """How one job of the verify run went: its job (None: not submitted), exit status (None: not
    ended), seconds from its start to its end, and a note where it did not end normally."""

    job: Job | None
    status: int | None
    seconds: float | None
    note: str = ""

    def problem(self, what: str) -> str | None:
        """Why the job did not end well, with the diagnosis of its log; None when it exited 0."""
        if self.status == 0:
            return None
        if self.job is None or self.status is None:
            return f"{what}: {self.note or 'not submitted'}"
        return (
            f"{what} (job {self.job.id}) ended with exit status {self.status}: "
            f"{self.job.diagnosis()}"
        )

    @property
    def log_text(self) -> str:
        return self.job.log_text() if self.job is not None else ""

    @property
    def log_name(self) -> list[str]:
        log = self.job.find_log() if self.job is not None else None
        return [log.name] if log is not None else []


@dataclass(frozen=True)
class Findings:
    checks: list[Check]
    versions: dict[str, str | None]
    hosts: dict[str, list[str]]  # per job key: where its ranks ran
    dataset: str


def probe_facts(outcome: Outcome) -> dict | None:
    """What the probe job printed (course.diagnostics.probe), None where it printed nothing."""
    for line in reversed(outcome.log_text.splitlines()):
        if line.startswith(probe.PREFIX):
            try:
                return json.loads(line[len(probe.PREFIX) :])
            except json.JSONDecodeError:  # cut short: the job was killed while it wrote it
                return None
    return None


def stage_run(folder: Path, stage: stages.Stage, outcome: Outcome) -> evidence.Run | None:
    """The run of `stage` that the outcome's job wrote, traced to its log."""
    if outcome.job is None:
        return None
    found = [run for run in evidence.runs(stage.name, folder) if run.job_id == outcome.job.id]
    return found[-1] if found else None


def evaluate(
    folder: Path, settings: SiteSettings, outcomes: dict[str, Outcome], grading: Path
) -> Findings:
    facts = probe_facts(outcomes["probe"])
    runs = {
        key: stage_run(folder, stage, outcomes[key])
        for key, stage in (
            ("stage1", stages.SINGLE_GPU),
            ("stage2", stages.MULTI_GPU),
            ("stage3", stages.MULTI_NODE),
        )
    }
    hosts = {key: run.hosts for key, run in runs.items() if run is not None}
    if facts:
        hosts["probe"] = [facts["host"]]
    bench = _benchmark_files(folder, outcomes["benchmark"])
    if bench:
        hosts["benchmark"] = sorted({host for record in bench for host in record["hosts"]})
    checks = [
        software(facts, outcomes["probe"]),
        dataset(facts, outcomes["probe"]),
        joined_logs(outcomes),
        gpus(facts, settings, runs["stage3"]),
        cudnn_nccl(facts),
        mpi_reach(settings, outcomes["stage3"]),
    ]
    for key, stage in (
        ("stage1", stages.SINGLE_GPU),
        ("stage2", stages.MULTI_GPU),
        ("stage3", stages.MULTI_NODE),
    ):
        checks.append(walltime(folder, settings, stage, outcomes[key], runs[key]))
    checks.append(allreduce(outcomes["benchmark"], bench, settings))
    checks.append(efficiency(runs["stage1"], runs["stage3"], grading))
    versions = (facts or {}).get("versions") or {}
    name = ((facts or {}).get("dataset") or {}).get("name") or settings.dataset
    return Findings(checks, versions, hosts, name)


def software(facts: dict | None, outcome: Outcome) -> Check:
    name = "modules and Python environment on the compute nodes"
    fix = (
        "load the modules and activate the kit's environment in the site profile's "
        f"environment.setup (e.g. module load ...; source .../.venv/bin/activate), {APPLY_AGAIN}"
    )
    if facts is None:
        said = outcome.problem("the probe job") or "the probe job printed nothing about the node"
        return Check(name, "fail", said, fix, outcome.log_name)
    versions = facts["versions"]
    shown = ", ".join(f"{lib} {versions.get(lib) or 'not installed'}" for lib in versions)
    errors = facts["import_errors"]
    if errors:
        said = f"on {facts['host']}: " + "; ".join(f"{lib}: {why}" for lib, why in errors.items())
        return Check(name, "fail", said, fix, outcome.log_name)
    return Check(name, "ok", f"on {facts['host']}: {shown}", "", outcome.log_name)


def dataset(facts: dict | None, outcome: Outcome) -> Check:
    name = "the data set readable from the compute nodes"
    if facts is None:
        return Check(name, "fail", outcome.problem("the probe job") or "not probed", "", [])
    found = facts["dataset"]
    if found["readable"]:
        said = f"{found['name']} ({found['train']} training / {found['test']} test images) in "
        return Check(name, "ok", said + found["path"], "", outcome.log_name)
    how = found["hint"] or "python -m course data"
    fix = (
        "prepare the data set where the compute nodes read it: on a file system they mount, named "
        f"by environment.dataset_root in the site profile ({how}), {APPLY_AGAIN}"
    )
    said = f"on {facts['host']}: {found['error']}"
    return Check(name, "fail", said, fix, outcome.log_name)


def joined_logs(outcomes: dict[str, Outcome]) -> Check:
    name = "job logs joined (stdout and stderr in one <script>.o<id>, qsub -j oe)"
    fix = (
        "submit with qsub -j oe (python -m course submit does) and leave out any #SBATCH --error "
        f"or #PBS -e line in the site profile's directives, {APPLY_AGAIN}"
    )
    ran = {key: o for key, o in outcomes.items() if o.job is not None and o.status is not None}
    missing = [o.job.id for o in ran.values() if o.job is not None and o.job.find_log() is None]
    if missing:
        return Check(name, "fail", f"no log for job(s) {', '.join(missing)}", fix, [])
    probe_log = outcomes["probe"].log_text
    if "probe" in ran and probe.STDERR_MARK not in probe_log:
        said = "the probe job's stderr is not in its log"
        return Check(name, "fail", said, fix, outcomes["probe"].log_name)
    if not ran:
        return Check(name, "fail", "no job ended", "see the jobs' lines below", [])
    logs = [name for o in ran.values() for name in o.log_name]
    return Check(name, "ok", f"{len(logs)} log(s), stderr joined: {', '.join(logs)}", "", logs)


def gpus(facts: dict | None, settings: SiteSettings, stage3: evidence.Run | None) -> Check:
    name = "GPUs visible per rank, and their binding"
    seen = ((facts or {}).get("gpus") or {}).get("count", 0)
    if not seen and not settings.gpus_per_node:
        return Check(name, "skipped", NO_GPU)
    fix = (
        "ask for the GPUs in the directives of the site profile (e.g. #SBATCH --gres=gpu:{gpus} or "
        f"#PBS -l ngpus={{gpus}}) or set gpus_per_node to what the nodes have, {APPLY_AGAIN}"
    )
    if seen < settings.gpus_per_node:
        said = (
            f"a job sees {seen} GPU(s); the profile says gpus_per_node = {settings.gpus_per_node}"
        )
        return Check(name, "fail", said, fix)
    if stage3 is None:
        return Check(name, "fail", "stage 3 left no run to show its ranks' devices", fix)
    text = joblog.read(stage3.log) if stage3.log else ""
    places = joblog.rank_places(text)
    wrong = [p for p in places if p.device != f"@cupy:{p.intra_rank}"]
    binding = ", ".join(f"rank {p.rank} {p.host} {p.device}" for p in places)
    if wrong or not places or stage3.log is None:
        said = f"{seen} GPU(s) per node; ranks bound as {binding or 'the log does not say'}"
        return Check(name, "fail", said, "each rank must use the GPU of its intra_rank", [])
    return Check(name, "ok", f"{seen} GPU(s) per node; {binding}", "", [stage3.log.name])


def cudnn_nccl(facts: dict | None) -> Check:
    name = "cuDNN and NCCL working (GPU self-test)"
    test = (facts or {}).get("selftest")
    if test is None:
        return Check(name, "skipped", NO_GPU)
    said = "; ".join(line.strip() for line in test["lines"][1:])
    if test["status"] != 0:
        fix = 'install the gpu extra in the nodes\' environment: pip install -e ".[gpu]"'
        return Check(name, "fail", said, fix)
    return Check(name, "ok", said)


def mpi_reach(settings: SiteSettings, outcome: Outcome) -> Check:
    nodes, per_node = settings.largest_run
    name = f"MPI reaching every node ({nodes} node(s) x {per_node} ranks, stage 3)"
    fix = (
        "check environment.mpiexec in the site profile (its {hostfile} and how it starts ranks on "
        "other nodes: the scheduler's launcher, or ssh keys between the nodes) and that mpi4py was "
        f"built against the MPI library the nodes load, {APPLY_AGAIN}"
    )
    places = joblog.rank_places(outcome.log_text)
    if not places:
        said = outcome.problem("stage 3") or "the stage-3 log shows no rank lines"
        return Check(name, "fail", said, fix, outcome.log_name)
    counts: dict[str, int] = {}
    for place in places:
        counts[place.host] = counts.get(place.host, 0) + 1
    said = f"{len(places)} rank(s) on " + ", ".join(f"{h} x{n}" for h, n in counts.items())
    if len(counts) < nodes or len(places) < nodes * per_node:
        return Check(
            name, "fail", said + f"; asked for {nodes} x {per_node}", fix, outcome.log_name
        )
    return Check(name, "ok", said, "", outcome.log_name)


def walltime(
    folder: Path,
    settings: SiteSettings,
    stage: stages.Stage,
    outcome: Outcome,
    run: evidence.Run | None,
) -> Check:
    name = f"stage {stage.number}: runs, and fits its walltime"
    if outcome.note.startswith("skipped"):
        return Check(name, "skipped", outcome.note.removeprefix("skipped: "))
    problem = outcome.problem(f"stage {stage.number}")
    if problem or run is None:
        why = problem or f"job {outcome.job.id if outcome.job else '?'} wrote no results.json"
        fix = "read the job's log (below) and fix what it names, then verify again"
        return Check(name, "fail", why, fix, outcome.log_name)
    if run.problems:
        return Check(name, "fail", "its run does not count: " + run.problems[0], "", [])
    script = folder / paths.JOBS_DIR / stage.job_script
    limit = pbs.read_request(script.read_text(), extra=settings.resources).walltime
    times = [e["elapsed_time"] for e in run.record["log"] if "elapsed_time" in e]
    epoch = (times[-1] / len(times)) if times else float(run.record.get("wall_seconds") or 0)
    start_up = max(0.0, (outcome.seconds or 0.0) - float(run.record.get("wall_seconds") or 0))
    epochs = plan.epochs_of(settings.train_args)  # the profile's: what students' runs train
    needed = start_up + epochs * epoch
    evidence_ = [*outcome.log_name, str(run.path.relative_to(folder))]
    said = (
        f"ran on {', '.join(sorted(set(run.hosts)))} in {outcome.seconds or 0:.0f} s; an epoch "
        f"took {epoch:.1f} s and start-up {start_up:.0f} s, so the site's {epochs} epoch(s) need "
        f"about {needed / 60:.1f} min"
    )
    if limit is None:
        fix = f"set [jobs.{stage.job_script[:-3]}] walltime in the site profile, {APPLY_AGAIN}"
        return Check(name, "warn", said + "; the job script asks for no walltime", fix, evidence_)
    said += f"; walltime {pbs.format_walltime(limit)}"
    if needed * WALLTIME_MARGIN > limit:
        least = pbs.format_walltime(int(needed * WALLTIME_MARGIN) + 60)
        fix = (
            f"the walltime is too short: set [jobs.{stage.job_script[:-3]}] walltime to at least "
            f"{least} in the site profile (or fewer --epoch in environment.train_args), "
            + APPLY_AGAIN
        )
        return Check(name, "fail", said, fix, evidence_)
    return Check(name, "ok", said, "", evidence_)


def _benchmark_files(folder: Path, outcome: Outcome) -> list[dict]:
    if outcome.job is None:
        return []
    return [
        benchmark.load(folder / line["path"])
        for line in benchmark.logged(outcome.log_text)
        if (folder / line["path"]).is_file()
    ]


def allreduce(outcome: Outcome, files: list[dict], settings: SiteSettings) -> Check:
    nodes, per_node = settings.largest_run
    name = f"allreduce benchmark ({nodes} node(s) x {per_node} ranks)"
    if outcome.note.startswith("skipped"):
        return Check(name, "skipped", outcome.note.removeprefix("skipped: "))
    problem = outcome.problem("the allreduce benchmark")
    if problem or not files:
        said = problem or "its log names no benchmark file"
        return Check(
            name, "fail", said, "read the job's log and fix what it names", outcome.log_name
        )
    algorithms = sorted({record["algorithm"] for record in files})
    ranks = {record["ranks"] for record in files}
    said = f"{len(files)} burst(s) of {', '.join(algorithms)} on {', '.join(map(str, ranks))} ranks"
    return Check(name, "ok", said, "", outcome.log_name)


def efficiency(base: evidence.Run | None, run: evidence.Run | None, grading: Path) -> Check:
    name = "stage-3 efficiency against grading.toml's tiers"
    if base is None or run is None or not base.traced or not run.traced:
        return Check(name, "fail", "needs a counted stage-1 and stage-3 run; see those checks")
    try:
        rules = grading_rules.load(grading)
    except CourseError as e:
        return Check(name, "fail", e.message, e.hint or "")
    kind = run.record.get("device_kind", "gpu")
    limits = rules.efficiency(stages.MULTI_NODE.name, kind)
    value = comparison.efficiency(run, base)
    tiers = ", ".join(f"{minimum:g}: {share:.0%}" for minimum, share in limits.tiers)
    said = f"{value:.2f} on {run.workers} {kind} workers ({run.setting}); tiers on {kind}: {tiers}"
    earned = next((share for minimum, share in limits.tiers if value >= minimum), 0.0)
    if value > limits.suspicious_above:
        fix = "stage 1 ran slower than usual (a busy node?): verify again"
        return Check(name, "warn", said + "; above suspicious_above", fix)
    if not earned:
        fix = (
            "students' stage-3 runs at this size would earn no efficiency points: check the "
            "nodes' interconnect and the communicator, or lower [efficiency.multi_node] tiers in "
            "grading.toml"
        )
        return Check(name, "warn", said, fix)
    return Check(name, "ok", f"{said}; earns {earned:.0%} of the points")

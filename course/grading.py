"""Checks of the job outputs that come with a submission: do they agree with their job, how do they scale.

A run counts only when it is traced: its results file is sealed and unchanged, it finished,
and the scheduler's joined log of its job (``<name>.o<number>``, beside the notebooks) shows
the same job, the same images/sec and the file's SHA-256 (course.training prints them).
Efficiency is weak-scaling efficiency against the student's own stage-1 run: speedup divided
by the number of workers, with the same device kind, GPU model, model and batch per worker. Thresholds
and credit tiers are the instructor's, in grading.toml.
"""
from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from course import paths, results
from course.checks import fail, passed
from course.errors import GradingError, ResultsError
from course.fileio import sha256_file

CONFIG = "grading.toml"


@dataclass
class Run:
    """One results file and what tracing it to its job log found."""

    path: Path
    record: dict
    log: Path | None = None
    problems: list[str] = field(default_factory=list)  # each one takes the run out of grading
    notes: list[str] = field(default_factory=list)

    @property
    def traced(self) -> bool:
        return not self.problems

    @property
    def images_per_sec(self) -> float:
        return (self.record.get("throughput") or {}).get("images_per_sec") or 0.0

    @property
    def workers(self) -> int:
        return self.record.get("workers", 1)

    @property
    def setting(self) -> str:
        """The communication setting of a stage-3 run: communicator[/allreduce algorithm]."""
        communicator = self.record.get("communicator") or "-"
        return f"{communicator}/{self.record['allreduce']}" if self.record.get("allreduce") else communicator

    def describe(self) -> str:
        return f"{self.path.parent.name} (job {(self.record.get('job') or {}).get('id')})"


def trace(path: Path, folder: Path | None = None) -> Run:
    """Load a results file and check it against the job log in `folder` (default: beside runs/)."""
    path = Path(path)
    folder = Path(folder) if folder else path.parent.parent.parent
    record = results.load(path)
    run = Run(path, record)
    if not results.seal_ok(record):
        run.problems.append("the results file was edited after the job wrote it (its seal does not match)")
    if not record.get("complete"):
        run.problems.append(f"the run did not finish ({record.get('error') or 'no end recorded'})")
    if not record.get("throughput"):
        run.problems.append("the run measured no images/sec (too few steady iterations)")
    job_id = (record.get("job") or {}).get("id")
    if not job_id:
        run.problems.append("it did not run as a job (no job id): submit the job script, as the notebook shows")
        return run
    run.log = paths.job_log(folder, job_id, record["job"].get("name"))
    if run.log is None:
        run.problems.append(f"no job log *.o{job_id.split('.')[0]} beside the notebooks: hand in the log the "
                            "scheduler wrote (qsub -j oe) together with runs/")
        return run
    text = run.log.read_text(errors="replace")
    rel = f"{path.parent.name}/{results.FILENAME}"
    digests = re.findall(rf"^course: results \S*{re.escape(rel)} sha256=([0-9a-f]{{64}})$", text, re.MULTILINE)
    if not digests:
        run.problems.append(f"the log {run.log.name} does not name this results file")
    elif sha256_file(path) not in digests:
        run.problems.append(f"the results file differs from the one job {job_id} wrote "
                            f"(see its sha256 in {run.log.name})")
    rates = [float(x) for x in re.findall(r"^Throughput: ([\d.]+) \[images/sec\.\]", text, re.MULTILINE)]
    if run.images_per_sec and not any(abs(rate - round(run.images_per_sec, 2)) < 0.006 for rate in rates):
        run.problems.append(f"images/sec in the results ({run.images_per_sec:.2f}) is not what the log shows "
                            f"({', '.join(f'{r:.2f}' for r in rates) or 'none'})")
    if not re.search(rf"^course: run {record['stage']} \| job {re.escape(job_id)} .* {run.workers} worker\(s\)",
                     text, re.MULTILINE):
        run.problems.append(f"the log does not show a {record['stage']} run of job {job_id} "
                            f"with {run.workers} worker(s)")
    script = folder / (record.get("script") or {}).get("name", "")
    if script.is_file() and sha256_file(script) != record["script"].get("sha256"):
        run.notes.append(f"{script.name} has changed since this job ran it: run the job again after your last change")
    return run


def runs(stage: str, folder: Path = Path(".")) -> list[Run]:
    """Every results file of `stage` under folder/runs, traced, oldest first."""
    found = []
    for path in results.find(folder, stage):
        try:
            found.append(trace(path, folder))
        except ResultsError as e:
            found.append(Run(path, {"stage": stage}, problems=[e.message]))
    return found


def config() -> dict:
    """grading.toml: $COURSE_GRADING_CONFIG, else the first one found from here upwards."""
    explicit = os.environ.get("COURSE_GRADING_CONFIG")
    candidates = [Path(explicit)] if explicit else [p / CONFIG for p in (Path.cwd(), *Path.cwd().parents)]
    for candidate in candidates:
        if candidate.is_file():
            try:
                return tomllib.loads(candidate.read_text())
            except tomllib.TOMLDecodeError as e:
                raise GradingError(f"{candidate} is not valid TOML: {e}", "fix the line it names") from None
    raise GradingError(f"no {CONFIG} found (looked from {Path.cwd()} upwards)",
                       "grade inside the kit's course folder, or set COURSE_GRADING_CONFIG")


def baseline(folder: Path = Path(".")) -> Run | None:
    """The student's latest traced stage-1 run."""
    traced = [run for run in runs("single_gpu", folder) if run.traced]
    return traced[-1] if traced else None


def comparable(run: Run, base: Run) -> list[str]:
    """Why `run` cannot be compared with the stage-1 `base` run (empty if it can)."""
    differences = []
    for label, get in (("device kind", lambda r: r.record.get("device_kind")),
                       ("GPU model", lambda r: r.record.get("gpu_model")),  # a slower stage-1 GPU flatters
                       ("model", lambda r: (r.record.get("model") or {}).get("name")),
                       ("model width", lambda r: (r.record.get("model") or {}).get("width")),
                       ("batch per worker", lambda r: (r.record.get("batch_size") or {}).get("per_worker")),
                       ("data set", lambda r: (r.record.get("dataset") or {}).get("name"))):
        if get(run) != get(base):
            differences.append(f"{label}: {get(run)} here, {get(base)} in stage 1")
    return differences


def efficiency(run: Run, base: Run) -> float:
    return run.images_per_sec / (run.workers * base.images_per_sec)


def _latest_traced(stage: str, folder: Path) -> Run:
    __tracebackhide__ = True
    found = runs(stage, folder)
    if not found:
        fail(f"there is no {stage} run in {Path(folder, results.RUNS_DIR)}/",
              "submit the stage's job and hand in runs/ with its log (<job script>.o<number>)")
    traced = [run for run in found if run.traced]
    if not traced:
        last = found[-1]
        fail(f"no {stage} run can be traced to its job; the latest, {last.describe()}: {'; '.join(last.problems)}")
    return traced[-1]


def grade_run(stage: str, points: float, folder: Path = Path(".")) -> float:
    """Full points for a traced, complete run of `stage`; CheckFailed (no points) otherwise."""
    __tracebackhide__ = True
    run = _latest_traced(stage, folder)
    for note in run.notes:
        print(f"note: {note}")
    passed(f"{run.describe()}: {run.images_per_sec:.1f} img/s on {run.workers} worker(s), traced to {run.log.name}")
    return points


def _limits(stage: str, kind: str) -> tuple[list, float]:
    """(tiers best first, suspicious_above) for `stage` on `kind` (gpu or cpu) from grading.toml."""
    settings = config().get("efficiency", {})
    for_stage = settings.get(stage, {})
    for_kind = for_stage.get(kind, {})
    tiers = for_kind.get("tiers", for_stage.get("tiers", []))
    default = for_stage.get("suspicious_above", settings.get("suspicious_above", 1.05))
    ceiling = for_kind.get("suspicious_above", default)
    return sorted(tiers, reverse=True), ceiling


def grade_efficiency(stage: str, points: float, folder: Path = Path(".")) -> float:
    """Points by weak-scaling efficiency: the best traced `stage` run on the most workers that
    stays below the sanity ceiling, against the student's own stage-1 run."""
    __tracebackhide__ = True
    base = baseline(folder)
    if base is None:
        fail("no traced stage-1 run to compare with", "stage 1's results and job log must come with the submission")
    found = runs(stage, folder)
    if not found:
        fail(f"there is no {stage} run in {Path(folder, results.RUNS_DIR)}/",
              "submit the stage's job where it can run (stage 2 needs a node with 2 or more GPUs) and hand in "
              "runs/ with the job log")
    candidates = [run for run in found if run.traced and run.workers > 1 and not comparable(run, base)]
    if not candidates:
        untraced = [run for run in found if run.workers > 1]
        why = "; ".join(run.problems[0] if run.problems else comparable(run, base)[0] for run in untraced[-3:])
        fail(f"no traced {stage} run on 2 or more workers compares with stage 1 ({why or 'none found'})",
              "run every stage with the same site settings (model, width, batch per worker, data set)")
    tiers, ceiling = _limits(stage, base.record.get("device_kind", "gpu"))
    most = max(run.workers for run in candidates)
    ranked = sorted((run for run in candidates if run.workers == most), key=lambda run: efficiency(run, base))
    plausible = [run for run in ranked if efficiency(run, base) <= ceiling]
    best = plausible[-1] if plausible else ranked[0]
    value = efficiency(best, base)
    measured = (f"{best.describe()}: {best.images_per_sec:.1f} img/s on {best.workers} workers against "
                f"{base.images_per_sec:.1f} img/s on 1 in {base.describe()}: efficiency {value:.3f}")
    if value > ceiling:
        fail(f"{measured}, above {ceiling}: more than linear speedup means the runs do not compare",
              "run stage 1 and this stage again with the same settings, on the same kind of node")
    for minimum, share in tiers:
        if value >= minimum:
            print(f"{measured} >= {minimum}: {share:.0%} of the points")
            return round(points * share, 3)
    lowest = tiers[-1][0] if tiers else 0
    fail(f"{measured}, below {lowest}",
          "look at the job log: too few steady iterations, other jobs on the node, or too small a batch per "
          "worker for the communication to hide behind")


def grade_comparisons(points: float, folder: Path = Path(".")) -> float:
    """Stage 3: traced runs with at least two rank counts and two communication settings."""
    __tracebackhide__ = True
    found = runs("multi_node", folder)
    traced = [run for run in found if run.traced]
    counts = sorted({run.workers for run in traced})
    settings = sorted({run.setting for run in traced})
    if len(counts) < 2 or len(settings) < 2:
        left_out = "".join(f"; {run.describe()} does not count: {run.problems[0]}" for run in found if not run.traced)
        fail(f"traced stage-3 runs cover rank counts {counts} and communication settings {settings}{left_out}",
              "the comparison needs at least two of each: run the notebook's comparison cell")
    passed(f"stage-3 runs compare rank counts {counts} and communication settings {settings}")
    return points


def show_comparisons(folder: Path = Path(".")) -> None:
    """Print what the stage-3 comparison covers so far (the visible self-check; never raises)."""
    traced = [run for run in runs("multi_node", folder) if run.traced]
    print(f"Traced stage-3 runs cover rank counts {sorted({run.workers for run in traced})} and communication "
          f"settings {sorted({run.setting for run in traced})}; the comparison needs two of each.")


def show(stage: str, folder: Path = Path(".")) -> list[Run]:
    """Print whether the job outputs of `stage` will count (the visible self-check; never raises)."""
    found = runs(stage, folder)
    if not found:
        print(f"No {stage} run yet in {Path(folder, results.RUNS_DIR)}/: submit the job above.")
    for run in found:
        status = "traced to " + run.log.name if run.traced else "WILL NOT COUNT: " + "; ".join(run.problems)
        print(f"{run.describe()}: {run.images_per_sec:.1f} img/s, {run.workers} worker(s) [{status}]")
        for note in run.notes:
            print(f"  note: {note}")
    return found

"""Points from a submission's job outputs, by the instructor's rules in grading.toml.

The hidden tests of the notebooks call these: a traced run of a stage, its weak-scaling
efficiency against the student's own stage-1 run (in credit tiers), and stage 3's comparison.
Each either returns the points it gives or raises CheckFailed saying why it gives none;
course.evidence decides which runs count.
"""
from __future__ import annotations

import os
import tomllib
from pathlib import Path

from course import evidence, results, stages
from course.errors import GradingError
from course.evidence import Run, comparable, efficiency
from course.notebook.checks import fail, passed

CONFIG = "grading.toml"


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


def _latest_traced(stage: str, folder: Path) -> Run:
    __tracebackhide__ = True
    found = evidence.runs(stage, folder)
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
    base = evidence.baseline(folder)
    if base is None:
        fail("no traced stage-1 run to compare with", "stage 1's results and job log must come with the submission")
    found = evidence.runs(stage, folder)
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
    found = evidence.runs(stages.MULTI_NODE.name, folder)
    coverage = evidence.comparison_coverage(found)
    if not coverage.complete:
        left_out = "".join(f"; {run.describe()} does not count: {run.problems[0]}" for run in found if not run.traced)
        fail(f"traced stage-3 runs cover {coverage.describe()}{left_out}",
             f"the comparison needs at least {coverage.NEEDED} of each: run the notebook's comparison cell")
    passed(f"stage-3 runs compare {coverage.describe()}")
    return points


def accuracy_target(dataset: str) -> float | None:
    """The validation accuracy runs on `dataset` must reach (grading.toml [accuracy] target); a variant
    `<base>_<size>px_<percent>p` without its own entry takes its base's. None: no target set."""
    targets = config().get("accuracy", {}).get("target", {})
    base = dataset.split("_")[0]
    value = targets.get(dataset, targets.get(base))
    return float(value) if value is not None else None


def _near(a: float | None, b: float | None) -> bool:
    """Whether two learning rates are the same up to the 5% that averaging over an epoch's updates blurs."""
    return a is not None and b is not None and abs(a - b) <= 0.05 * abs(b)


def collapse_hint(run: Run, base: Run) -> str:
    """What most likely kept a run below the target, from the learning rates it really used (the log's
    `lr`, observed at every update) and its updates against stage 1's."""
    plan = run.record.get("lr_schedule") or {}
    drop = plan.get("drop_from_iteration")  # the final drop lowers every rule's rate: judge the rates before it
    rates = [point["lr"] for point in run.accuracy_curve
             if point.get("lr") is not None and (drop is None or (point["iteration"] or 0) <= drop)]
    start, target = plan.get("start"), plan.get("target")
    if rates and target and run.workers > 1 and _near(rates[0], target) and not _near(start, target):
        return (f"the learning rate was already {rates[0]:.3g} (N x the single-worker rate) in the first epoch: no "
                "warm-up; check learning_rate_schedule (the check above)")
    if rates and run.workers > 1 and _near(rates[-1], plan.get("start") or rates[-1]) and not _near(rates[-1], target):
        return (f"the learning rate stayed at {rates[-1]:.3g}, the single-worker rate, with an N times larger batch: "
                "no scaling; check learning_rate_schedule")
    updates = (run.accuracy_curve[-1]["iteration"] if run.accuracy_curve else 0) or 0
    base_updates = (base.accuracy_curve[-1]["iteration"] if base.accuracy_curve else 0) or 0
    return (f"{updates} updates against {base_updates} in stage 1: N ranks make N times fewer updates per epoch; "
            "train more epochs, or check the warm-up's length")


def grade_accuracy_at_scale(points: float, folder: Path = Path(".")) -> float:
    """Stage 3 on the most ranks with the taught warm-up rule: half the points for reaching the target
    accuracy, half (in grading.toml's tiers) for its time-to-accuracy speedup over stage 1."""
    __tracebackhide__ = True
    base = evidence.baseline(folder)
    if base is None:
        fail("no traced stage-1 run to compare with", "stage 1's results and job log must come with the submission")
    dataset = (base.record.get("dataset") or {}).get("name", "")
    target = accuracy_target(dataset)
    if target is None:
        fail(f"grading.toml sets no accuracy target for the data set {dataset!r}",
             "the instructor adds it under [accuracy] target")
    candidates = evidence.accuracy_candidates(evidence.runs(stages.MULTI_NODE.name, folder), base)
    if not candidates:
        fail(f"no traced stage-3 run on 2 or more workers with the {stages.TAUGHT_LR_RULE} rule compares with "
             "stage 1", "run the notebook's comparison cell and hand in runs/ with the job logs")
    most = candidates[0].workers
    reached = [(run, point) for run in candidates if (point := run.time_to_accuracy(target))]
    if not reached:
        best = max(candidates, key=lambda run: run.final_accuracy or 0.0)
        ended = "made no evaluation" if best.final_accuracy is None else \
            f"ended at validation accuracy {best.final_accuracy:.3f}"
        fail(f"{best.describe()} on {most} ranks {ended}, below the target {target}",
             f"most likely: {collapse_hint(best, base)}")
    run, point = min(reached, key=lambda pair: pair[1]["seconds"])
    earned = points / 2
    measured = (f"{run.describe()} reached {target} at epoch {point['epoch']} (iteration {point['iteration']}, "
                f"{point['seconds']:.0f} s)")
    base_point = base.time_to_accuracy(target)
    if base_point is None:
        print(f"{measured}; stage 1 ({base.describe()}) never reached it, so there is no speedup to compare")
        return round(earned, 3)
    speedup = base_point["seconds"] / point["seconds"]
    tiers = sorted(config().get("accuracy", {}).get("speedup", {}).get("tiers", []), reverse=True)
    share = next((share for minimum, share in tiers if speedup >= minimum), 0.0)
    print(f"{measured}; stage 1 took {base_point['seconds']:.0f} s: time-to-accuracy speedup {speedup:.2f} on {most} "
          f"ranks -> {share:.0%} of the speedup points")
    return round(earned + points / 2 * share, 3)

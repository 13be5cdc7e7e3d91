"""Points from a submission's job outputs, by the instructor's rules in grading.toml.

The hidden tests of the notebooks call these: a traced run of a stage, its weak-scaling
efficiency against the student's own stage-1 run (in credit tiers), and stage 3's comparison.
Each either returns the points it gives or raises CheckFailed saying why it gives none;
course.evidence decides which runs count (against the scheduler's records where it can reach them,
grading.toml [accounting]). Each grade is the best the traced runs support: a run more never costs
points.
"""

from __future__ import annotations

from pathlib import Path

from course import comparison, evidence, paths
from course.cluster.accounting import Accounting
from course.comparison import comparable, efficiency
from course.contracts import grading_rules, results, stages
from course.evidence import Run
from course.notebook.checks import fail, passed


def accounting(folder: Path) -> Accounting:
    """What runs are checked against: the scheduler's records, for the student whose nbgrader folder
    this is (<student>/<assignment>), with their cluster user from grading.toml [accounting]
    users."""
    rules = grading_rules.load()
    where = Path(folder).resolve()
    student = where.parent.name if where.name == paths.ASSIGNMENT else None
    return Accounting(student, rules.cluster_user(student), rules.accounting_enabled)


def _notes(*runs: Run) -> None:
    for run in runs:
        for note in run.notes:
            print(f"note: {note}")


def _latest_traced(stage: str, folder: Path) -> Run:
    __tracebackhide__ = True
    found = evidence.runs(stage, folder, accounting(folder))
    if not found:
        fail(
            f"there is no {stage} run in {Path(folder, results.RUNS_DIR)}/",
            "submit the stage's job and hand in runs/ with its log (<job script>.o<number>)",
        )
    traced = [run for run in found if run.traced]
    if not traced:
        last = found[-1]
        fail(
            f"no {stage} run can be traced to its job; the latest, {last.describe()}: "
            f"{'; '.join(last.problems)}"
        )
    return traced[-1]


def grade_run(stage: str, points: float, folder: Path = Path(".")) -> float:
    """Full points for a traced, complete run of `stage`; CheckFailed (no points) otherwise."""
    __tracebackhide__ = True
    run = _latest_traced(stage, folder)
    assert run.log is not None  # a traced run is traced to its log
    _notes(run)
    passed(
        f"{run.describe()}: {run.images_per_sec:.1f} img/s on {run.workers} worker(s), traced to "
        f"{run.log.name}"
    )
    return points


def _baselines(folder: Path, checked: Accounting) -> list[Run]:
    """The traced stage-1 runs, oldest first; CheckFailed when there is none."""
    __tracebackhide__ = True
    bases = [run for run in evidence.runs(stages.BASELINE.name, folder, checked) if run.traced]
    if not bases:
        fail(
            "no traced stage-1 run to compare with",
            "stage 1's results and job log must come with the submission",
        )
    return bases


def grade_efficiency(stage: str, points: float, folder: Path = Path(".")) -> float:
    """Points by weak-scaling efficiency: the most any traced `stage` run on 2 or more workers earns
    against a traced one-worker run it compares with (stage 1's, or this stage's own), at or below
    the sanity ceiling; the feedback names the run it was measured against."""
    __tracebackhide__ = True
    checked = accounting(folder)
    found = evidence.runs(stage, folder, checked)
    # Stage 3's own one-rank runs are baselines too: the same script, submitted with the others
    # (a stage-1 run made while the machine was busier would make every run seem too efficient).
    stage_one = _baselines(folder, checked)
    bases = stage_one + [
        run for run in found if run.traced and run.workers == 1 and not run.profiled
    ]
    if not found:
        fail(
            f"there is no {stage} run in {Path(folder, results.RUNS_DIR)}/",
            "submit the stage's job where it can run"
            + (" (a node with 2 or more GPUs)" if stage == stages.MULTI_GPU.name else "")
            + " and hand in runs/ with the job log",
        )
    pairs = [
        (run, base)
        for run in found
        if run.traced and run.workers > 1 and not run.profiled
        for base in bases
        if not comparable(run, base)
    ]
    if not pairs:
        untraced = [run for run in found if run.workers > 1]
        why = "; ".join(
            run.problems[0] if run.problems else comparable(run, stage_one[-1])[0]
            for run in untraced[-3:]
        )
        fail(
            f"no traced {stage} run on 2 or more workers compares with stage 1 "
            f"({why or 'none found'})",
            "run every stage with the same site settings (model, width, batch per worker, "
            "data set)",
        )
    graded: list[tuple[float | None, float, float | None, float, float, Run, Run]] = []
    # (share, None above the ceiling; efficiency; tier reached; ceiling; lowest tier; run; base)
    rules = grading_rules.load()
    for run, base in pairs:
        limits = rules.efficiency(stage, base.record.get("device_kind", "gpu"))
        tiers, ceiling = limits.tiers, limits.suspicious_above
        value = efficiency(run, base)
        reached: tuple[float | None, float] = next(
            ((minimum, share) for minimum, share in tiers if value >= minimum), (None, 0.0)
        )
        tier_minimum, tier_share = reached
        graded.append(
            (
                tier_share if value <= ceiling else None,
                value,
                tier_minimum,
                ceiling,
                tiers[-1][0] if tiers else 0,
                run,
                base,
            )
        )
    plausible = [entry for entry in graded if entry[0] is not None]
    share, value, minimum, ceiling, lowest, best, base = (
        max(plausible, key=lambda e: (e[0], e[1])) if plausible else min(graded, key=lambda e: e[1])
    )
    measured = (
        f"{best.describe()}: {best.images_per_sec:.1f} img/s on {best.workers} workers against "
        f"{base.images_per_sec:.1f} img/s on 1 in {base.describe()}: efficiency {value:.3f}"
    )
    if share is None:
        fail(
            f"{measured}, above {ceiling}: more than linear speedup means the runs do not compare",
            "run stage 1 and this stage again with the same settings, on the same kind of node",
        )
    if not share:
        fail(
            f"{measured}, below {lowest}",
            "look at the job log: too few steady iterations, other jobs on the node, or too small "
            "a batch per "
            "worker for the communication to hide behind",
        )
    assert share is not None  # fail() raised above
    _notes(best, base)
    print(f"{measured} >= {minimum}: {share:.0%} of the points")
    return round(points * share, 3)


def grade_comparisons(points: float, folder: Path = Path(".")) -> float:
    """Stage 3: traced runs with at least two rank counts and two communication settings."""
    __tracebackhide__ = True
    found = evidence.runs(stages.MULTI_NODE.name, folder, accounting(folder))
    coverage = comparison.comparison_coverage(found)
    if not coverage.complete:
        left_out = "".join(
            f"; {run.describe()} does not count: {run.problems[0]}"
            for run in found
            if not run.traced
        )
        fail(
            f"traced stage-3 runs cover {coverage.describe()}{left_out}",
            f"the comparison needs at least {coverage.NEEDED} of each: run the notebook's "
            "comparison cell",
        )
    _notes(*(run for run in found if run.traced))
    passed(f"stage-3 runs compare {coverage.describe()}")
    return points


def _near(a: float | None, b: float | None) -> bool:
    """Whether two learning rates are the same up to the 5% that averaging over an epoch's updates
    blurs."""
    return a is not None and b is not None and abs(a - b) <= 0.05 * abs(b)


def collapse_hint(run: Run, base: Run) -> str:
    """What most likely kept a run below the target, from the learning rates it really used (the
    log's `lr`, observed at every update) and its updates against stage 1's."""
    plan = run.record.get("lr_schedule") or {}
    drop = plan.get(
        "drop_from_iteration"
    )  # the final drop lowers every rule's rate: judge the rates before it
    rates = [
        point["lr"]
        for point in run.accuracy_curve
        if point.get("lr") is not None and (drop is None or (point["iteration"] or 0) <= drop)
    ]
    start, target = plan.get("start"), plan.get("target")
    if (
        rates
        and target
        and run.workers > 1
        and _near(rates[0], target)
        and not _near(start, target)
    ):
        return (
            f"the learning rate was already {rates[0]:.3g} (N x the single-worker rate) in the "
            "first epoch: no "
            "warm-up; check learning_rate_schedule (the check above)"
        )
    if (
        rates
        and run.workers > 1
        and _near(rates[-1], plan.get("start") or rates[-1])
        and not _near(rates[-1], target)
    ):
        return (
            f"the learning rate stayed at {rates[-1]:.3g}, the single-worker rate, with an N times "
            "larger batch: "
            "no scaling; check learning_rate_schedule"
        )
    updates = (run.accuracy_curve[-1]["iteration"] if run.accuracy_curve else 0) or 0
    base_updates = (base.accuracy_curve[-1]["iteration"] if base.accuracy_curve else 0) or 0
    return (
        f"{updates} updates against {base_updates} in stage 1: N ranks make N times fewer updates "
        "per epoch; "
        "train more epochs, or check the warm-up's length"
    )


def grade_accuracy_at_scale(points: float, folder: Path = Path(".")) -> float:
    """Stage 3 with the taught warm-up rule, on 2 or more ranks: half the points for reaching the
    target accuracy, half (in grading.toml's tiers) for the time-to-accuracy speedup over a traced
    stage-1 run; the most any such run earns."""
    __tracebackhide__ = True
    checked = accounting(folder)
    bases = _baselines(folder, checked)
    found = evidence.runs(stages.MULTI_NODE.name, folder, checked)
    rules = grading_rules.load()
    targets = {
        base.path: rules.accuracy_target((base.record.get("dataset") or {}).get("name", ""))
        for base in bases
    }
    if all(target is None for target in targets.values()):
        fail(
            f"grading.toml sets no accuracy target for the data set "
            f"{(bases[-1].record.get('dataset') or {}).get('name', '')!r}",
            "the instructor adds it under [accuracy] target",
        )
    pairs = [
        (run, base, target)
        for base in bases
        if (target := targets[base.path]) is not None
        for run in comparison.accuracy_candidates(found, base)
    ]
    if not pairs:
        fail(
            f"no traced stage-3 run on 2 or more workers with the {stages.TAUGHT_LR_RULE} rule "
            "compares with "
            "stage 1",
            "run the notebook's comparison cell and hand in runs/ with the job logs",
        )
    reached = [
        (run, base, target, point)
        for run, base, target in pairs
        if (point := run.time_to_accuracy(target))
    ]
    if not reached:
        run, base, target = max(
            pairs, key=lambda pair: (pair[0].final_accuracy or 0.0, pair[0].workers)
        )
        ended = (
            "made no evaluation"
            if run.final_accuracy is None
            else f"ended at validation accuracy {run.final_accuracy:.3f}"
        )
        fail(
            f"{run.describe()} on {run.workers} ranks {ended}, below the target {target}",
            f"most likely: {collapse_hint(run, base)}",
        )
    earned, run, base, said = max(
        (_accuracy_points(points, rules.accuracy_speedup_tiers, *entry) for entry in reached),
        key=lambda graded: (graded[0], graded[1].workers),
    )
    _notes(run, base)
    print(said)
    return earned


def _accuracy_points(
    points: float, tiers: grading_rules.Tiers, run: Run, base: Run, target: float, point: dict
) -> tuple[float, Run, Run, str]:
    """(points, run, base, what to print) for a run that reached `target` at `point`."""
    measured = (
        f"{run.describe()} reached {target} at epoch {point['epoch']} (iteration "
        f"{point['iteration']}, "
        f"{point['seconds']:.0f} s)"
    )
    base_point = base.time_to_accuracy(target)
    if base_point is None:
        return (
            round(points / 2, 3),
            run,
            base,
            f"{measured}; stage 1 ({base.describe()}) never reached it, so there is no speedup to "
            "compare",
        )
    speedup = base_point["seconds"] / point["seconds"]
    share = next((share for minimum, share in tiers if speedup >= minimum), 0.0)
    return (
        round(points / 2 + points / 2 * share, 3),
        run,
        base,
        f"{measured}; stage 1 took {base_point['seconds']:.0f} s: time-to-accuracy speedup "
        f"{speedup:.2f} on "
        f"{run.workers} ranks -> {share:.0%} of the speedup points",
    )


def grade_allreduce_prediction(
    points: float,
    predicted_seconds: float,
    measured_seconds: float,
    what: str = "the gradient allreduce",
) -> float:
    """Full points when the cost model's prediction is within grading.toml [allreduce]
    prediction_factor of the measured time, either way; CheckFailed (no points) otherwise. Both in
    seconds per step."""
    __tracebackhide__ = True
    factor = grading_rules.load().prediction_factor
    for name, value in (("predicted", predicted_seconds), ("measured", measured_seconds)):
        if not (isinstance(value, (int, float)) and value > 0):
            fail(
                f"the {name} time of {what} is {value!r}, not a positive number of seconds",
                "run the benchmark and the step profile jobs, then the cells above this one",
            )
    ratio = predicted_seconds / measured_seconds
    said = (
        f"{what}: predicted {predicted_seconds * 1e3:.3g} ms, measured "
        f"{measured_seconds * 1e3:.3g} ms "
        f"(ratio {ratio:.2f})"
    )
    if not 1 / factor <= ratio <= factor:
        fail(
            f"{said}, more than {factor:g}x apart",
            "check the model's inputs: the bytes are parameters x 4, the ranks and algorithm those "
            "of the measured "
            "run, alpha and beta from your fit of that rank count; the naive communicator sends "
            "one allreduce per "
            "parameter array, each paying alpha",
        )
    passed(f"{said}: within {factor:g}x")
    return points

"""Stage 3's accuracy points: the run on 2 or more ranks with the taught warm-up rule reaching the
target accuracy, and its time-to-accuracy speedup over stage 1 (grading.toml's tiers); for a run
that stays below the target, the likely cause, from the learning rates it really used."""

from __future__ import annotations

from pathlib import Path

from course import comparison, evidence
from course.contracts import grading_rules, stages
from course.evidence import Run
from course.i18n import _
from course.instructor.scoring_runs import accounting, baselines, notes
from course.notebook.checks import fail


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
        return _(
            "the learning rate was already {rate:.3g} (N x the single-worker rate) in the first "
            "epoch: no warm-up; check learning_rate_schedule (the check above)"
        ).format(rate=rates[0])
    if (
        rates
        and run.workers > 1
        and _near(rates[-1], plan.get("start") or rates[-1])
        and not _near(rates[-1], target)
    ):
        return _(
            "the learning rate stayed at {rate:.3g}, the single-worker rate, with an N times "
            "larger batch: no scaling; check learning_rate_schedule"
        ).format(rate=rates[-1])
    updates = (run.accuracy_curve[-1]["iteration"] if run.accuracy_curve else 0) or 0
    base_updates = (base.accuracy_curve[-1]["iteration"] if base.accuracy_curve else 0) or 0
    return _(
        "{updates} updates against {base_updates} in stage 1: N ranks make N times fewer updates "
        "per epoch; train more epochs, or check the warm-up's length"
    ).format(updates=updates, base_updates=base_updates)


def grade_accuracy_at_scale(points: float, folder: Path = Path(".")) -> float:
    """Stage 3 with the taught warm-up rule, on 2 or more ranks: half the points for reaching the
    target accuracy, half (in grading.toml's tiers) for the time-to-accuracy speedup over a traced
    stage-1 run; the most any such run earns."""
    __tracebackhide__ = True
    checked = accounting(folder)
    bases = baselines(folder, checked)
    found = evidence.runs(stages.MULTI_NODE.name, folder, checked)
    rules = grading_rules.load()
    targets = {
        base.path: rules.accuracy_target((base.record.get("dataset") or {}).get("name", ""))
        for base in bases
    }
    if all(target is None for target in targets.values()):
        fail(
            _("grading.toml sets no accuracy target for the data set {name}").format(
                name=repr((bases[-1].record.get("dataset") or {}).get("name", ""))
            ),
            _("the instructor adds it under [accuracy] target"),
        )
    pairs = [
        (run, base, target)
        for base in bases
        if (target := targets[base.path]) is not None
        for run in comparison.accuracy_candidates(found, base)
    ]
    if not pairs:
        fail(
            _(
                "no traced stage-3 run on 2 or more workers with the {rule} rule compares with "
                "stage 1"
            ).format(rule=stages.TAUGHT_LR_RULE),
            _("run the notebook's comparison cell and hand in runs/ with the job logs"),
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
        fail(
            _("{run} on {workers} ranks made no evaluation, below the target {target}").format(
                run=run.describe(), workers=run.workers, target=target
            )
            if run.final_accuracy is None
            else _(
                "{run} on {workers} ranks ended at validation accuracy {accuracy:.3f}, below the "
                "target {target}"
            ).format(
                run=run.describe(),
                workers=run.workers,
                accuracy=run.final_accuracy,
                target=target,
            ),
            _("most likely: {hint}").format(hint=collapse_hint(run, base)),
        )
    earned, run, base, said = max(
        (_accuracy_points(points, rules.accuracy_speedup_tiers, *entry) for entry in reached),
        key=lambda graded: (graded[0], graded[1].workers),
    )
    notes(run, base)
    print(said)
    return earned


def _accuracy_points(
    points: float, tiers: grading_rules.Tiers, run: Run, base: Run, target: float, point: dict
) -> tuple[float, Run, Run, str]:
    """(points, run, base, what to print) for a run that reached `target` at `point`."""
    measured = _(
        "{run} reached {target} at epoch {epoch} (iteration {iteration}, {seconds:.0f} s)"
    ).format(
        run=run.describe(),
        target=target,
        epoch=point["epoch"],
        iteration=point["iteration"],
        seconds=point["seconds"],
    )
    base_point = base.time_to_accuracy(target)
    if base_point is None:
        return (
            round(points / 2, 3),
            run,
            base,
            _(
                "{measured}; stage 1 ({base}) never reached it, so there is no speedup to compare"
            ).format(measured=measured, base=base.describe()),
        )
    speedup = base_point["seconds"] / point["seconds"]
    share = next((share for minimum, share in tiers if speedup >= minimum), 0.0)
    return (
        round(points / 2 + points / 2 * share, 3),
        run,
        base,
        _(
            "{measured}; stage 1 took {seconds:.0f} s: time-to-accuracy speedup {speedup:.2f} on "
            "{workers} ranks -> {share:.0%} of the speedup points"
        ).format(
            measured=measured,
            seconds=base_point["seconds"],
            speedup=speedup,
            workers=run.workers,
            share=share,
        ),
    )

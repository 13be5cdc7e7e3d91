"""The notebooks' visible self-checks of the runs (course.report.check_runs and the others): whether
a stage's job outputs will count, what the stage-3 comparison covers, the stage-3 runs' accuracy
against stage 1, what snapshots cost. Each prints what it found for the student."""

from __future__ import annotations

from pathlib import Path

from course import comparison, evidence, i18n
from course.contracts import results, stages
from course.i18n import _
from course.notebook.report_rules import accuracy_target

# The verdicts "OK: " and "NOT YET: " open a self-check's line as they are in every language (as
# course.notebook.checks.verdict's "OK: "): the words after them are translated.
OK, NOT_YET = "OK: ", "NOT YET: "


def snapshot_cost(folder: Path = Path(".")) -> dict | None:
    """Print what snapshots cost in the latest traced stage-1 run; return
    evidence.Run.snapshot_cost()."""
    traced = [run for run in evidence.runs(stages.BASELINE.name, folder) if run.traced]
    cost = traced[-1].snapshot_cost() if traced else None
    if cost is None:
        print(
            _(
                "No traced stage-1 run with snapshots yet: write add_snapshots, write the script, "
                "submit the job."
            )
        )
        return None
    if cost["epoch_seconds"]:
        line = _(
            "{run}: {snapshots} snapshot(s), {seconds:.3f} s each on average (serialising the "
            "trainer and writing the file); an epoch took {epoch_seconds:.1f} s, so one snapshot "
            "per epoch costs {percent:.2f}% of the training time"
        ).format(
            run=traced[-1].describe(),
            snapshots=cost["snapshots"],
            seconds=cost["seconds"],
            epoch_seconds=cost["epoch_seconds"],
            percent=100 * cost["share"],
        )
    else:
        line = _(
            "{run}: {snapshots} snapshot(s), {seconds:.3f} s each on average (serialising the "
            "trainer and writing the file)"
        ).format(run=traced[-1].describe(), snapshots=cost["snapshots"], seconds=cost["seconds"])
    print(line)
    return cost


def check_runs(stage: str, folder: Path = Path(".")) -> list[evidence.Run]:
    """Print whether the job outputs of `stage` will count (a visible self-check; never raises)."""
    found = evidence.runs(stage, folder)
    if not found:
        job = stages.STAGES[stage].job_path if stage in stages.STAGES else _("its job")
        print(
            _(
                "No {stage} run yet in {runs}/, so this check has nothing to grade and earns no "
                "points yet: submit {job} (the cell above; where it said NOT SUBMITTED for want "
                "of GPUs, on a GPU node of a cluster), then run this cell again."
            ).format(stage=stage, runs=Path(folder, results.RUNS_DIR), job=job)
        )
    for run in found:
        status = (
            _("OK, traced to {log}").format(log=run.log.name)
            if run.traced and run.log is not None  # a traced run has its log
            else _("WILL NOT COUNT: {problems}").format(problems=i18n.listed(run.problems, "; "))
        )
        print(
            _("{run}: {images_per_sec:.1f} img/s, {workers} worker(s) [{status}]").format(
                run=run.describe(),
                images_per_sec=run.images_per_sec,
                workers=run.workers,
                status=status,
            )
        )
        for note in run.notes:
            print("  " + _("note: {note}").format(note=note))
    return found


def check_comparison(folder: Path = Path(".")) -> comparison.Coverage:
    """Print what the stage-3 comparison covers so far (a visible self-check; never raises)."""
    coverage = comparison.comparison_coverage(evidence.runs(stages.MULTI_NODE.name, folder))
    if coverage.complete:
        print(OK + _("traced stage-3 runs cover {coverage}.").format(coverage=coverage.describe()))
    else:
        print(
            NOT_YET
            + _(
                "traced stage-3 runs cover {coverage}; the comparison needs at least {needed} of "
                "each: run the comparison cell above."
            ).format(coverage=coverage.describe(), needed=coverage.NEEDED)
        )
    return coverage


def check_accuracy(folder: Path = Path("."), baseline: str | None = None) -> list[evidence.Run]:
    """Print the accuracy and time to accuracy of the stage-3 runs against stage 1 (a visible
    self-check)."""
    base = comparison.baseline(folder, baseline)
    target = accuracy_target(base)
    found = [run for run in evidence.runs(stages.MULTI_NODE.name, folder) if run.traced]
    if base is None or not found:
        print(
            NOT_YET
            + _("the accuracy comparison needs a traced stage-1 run and traced stage-3 runs.")
        )
        return found
    if target is None:
        print(
            _(
                "The course's grading rules set no accuracy target for this data set, so only the "
                "final accuracies are shown; ask your instructor if you expected a target."
            )
        )
    for run in [base, *found]:
        tta = run.time_to_accuracy(target) if target is not None else None
        reached = (
            _("reached {target} at epoch {epoch} ({seconds:.0f} s)").format(
                target=target, epoch=tta["epoch"], seconds=tta["seconds"]
            )
            if tta
            else _("never reached {target}").format(target=target)
            if target is not None
            else ""
        )
        workers = (
            _("{workers} worker(s) (stage 1)")
            if run is base
            else _("{workers} worker(s), lr rule {rule}")
            if run.workers > 1
            else _("{workers} worker(s), lr of one worker")
        ).format(workers=run.workers, rule=run.lr_rule)
        final = (
            _("no evaluation")
            if run.final_accuracy is None
            else _("final accuracy {accuracy:.3f}").format(accuracy=run.final_accuracy)
        )
        print(f"{run.describe()}: {workers}: {final}; {reached}")
    graded = comparison.accuracy_candidates(found, base)
    on_target = [run for run in graded if target is not None and run.time_to_accuracy(target)]
    if on_target:
        print(
            OK
            + _("a run on {ranks} ranks with the {rule} rule reached the target.").format(
                ranks=on_target[0].workers, rule=stages.TAUGHT_LR_RULE
            )
        )
    elif target is not None:
        print(
            NOT_YET
            + (
                _(
                    "no run on {ranks} ranks with the {rule} rule reached {target}: check "
                    "learning_rate_schedule above, then run the comparison again."
                )
                if graded
                else _(
                    "no run on 2 or more ranks with the {rule} rule reached {target}: check "
                    "learning_rate_schedule above, then run the comparison again."
                )
            ).format(
                ranks=graded[0].workers if graded else 0, rule=stages.TAUGHT_LR_RULE, target=target
            )
        )
    return found

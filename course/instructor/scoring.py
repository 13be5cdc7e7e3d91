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

from course import comparison, evidence, i18n
from course.comparison import comparable, efficiency
from course.contracts import grading_rules, results, stages
from course.evidence import Run
from course.i18n import _
from course.instructor.scoring_accuracy import collapse_hint, grade_accuracy_at_scale
from course.instructor.scoring_runs import accounting, baselines, latest_traced, notes
from course.lessons.step_time import allreduce_judge
from course.notebook.checks import fail, passed

# What the notebooks' hidden tests call (scoring.<name>), those graded elsewhere included.
__all__ = [
    "accounting",
    "collapse_hint",
    "grade_accuracy_at_scale",
    "grade_allreduce_prediction",
    "grade_comparisons",
    "grade_efficiency",
    "grade_profiled_prediction",
    "grade_run",
]


def grade_run(stage: str, points: float, folder: Path = Path(".")) -> float:
    """Full points for a traced, complete run of `stage`; CheckFailed (no points) otherwise."""
    __tracebackhide__ = True
    run = latest_traced(stage, folder)
    assert run.log is not None  # a traced run is traced to its log
    notes(run)
    passed(
        _("{run}: {rate:.1f} img/s on {workers} worker(s), traced to {log}").format(
            run=run.describe(), rate=run.images_per_sec, workers=run.workers, log=run.log.name
        )
    )
    return points


def grade_efficiency(stage: str, points: float, folder: Path = Path(".")) -> float:
    """Points by weak-scaling efficiency: the most any traced `stage` run on 2 or more workers earns
    against a traced one-worker run it compares with (stage 1's, or this stage's own), at or below
    the sanity ceiling; the feedback names the run it was measured against."""
    __tracebackhide__ = True
    checked = accounting(folder)
    found = evidence.runs(stage, folder, checked)
    # Stage 3's own one-rank runs are baselines too: the same script, submitted with the others
    # (a stage-1 run made while the machine was busier would make every run seem too efficient).
    stage_one = baselines(folder, checked)
    bases = stage_one + [
        run for run in found if run.traced and run.workers == 1 and not run.profiled
    ]
    if not found:
        fail(
            _("there is no {stage} run in {folder}/").format(
                stage=stage, folder=Path(folder, results.RUNS_DIR)
            ),
            _(
                "submit the stage's job where it can run (a node with 2 or more GPUs) and hand in "
                "runs/ with the job log"
            )
            if stage == stages.MULTI_GPU.name
            else _("submit the stage's job where it can run and hand in runs/ with the job log"),
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
        why = i18n.listed(
            (
                run.problems[0] if run.problems else comparable(run, stage_one[-1])[0]
                for run in untraced[-3:]
            ),
            "; ",
        )
        fail(
            _("no traced {stage} run on 2 or more workers compares with stage 1 ({why})").format(
                stage=stage, why=why or _("none found")
            ),
            _(
                "run every stage with the same site settings (model, width, batch per worker, "
                "data set)"
            ),
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
    measured = _(
        "{run}: {rate:.1f} img/s on {workers} workers against {base_rate:.1f} img/s on 1 in "
        "{base}: efficiency {efficiency:.3f}"
    ).format(
        run=best.describe(),
        rate=best.images_per_sec,
        workers=best.workers,
        base_rate=base.images_per_sec,
        base=base.describe(),
        efficiency=value,
    )
    if share is None:
        fail(
            _(
                "{measured}, above {ceiling}: more than linear speedup means the runs do not "
                "compare"
            ).format(measured=measured, ceiling=ceiling),
            _("run stage 1 and this stage again with the same settings, on the same kind of node"),
        )
    if not share:
        fail(
            _("{measured}, below {lowest}").format(measured=measured, lowest=lowest),
            _(
                "look at the job log: too few steady iterations, other jobs on the node, or too "
                "small a batch per worker for the communication to hide behind"
            ),
        )
    assert share is not None  # fail() raised above
    notes(best, base)
    print(
        _("{measured} >= {minimum}: {share:.0%} of the points").format(
            measured=measured, minimum=minimum, share=share
        )
    )
    return round(points * share, 3)


def grade_comparisons(points: float, folder: Path = Path(".")) -> float:
    """Stage 3: traced runs with at least two rank counts and two communication settings."""
    __tracebackhide__ = True
    found = evidence.runs(stages.MULTI_NODE.name, folder, accounting(folder))
    coverage = comparison.comparison_coverage(found)
    if not coverage.complete:
        left_out = i18n.listed(
            (
                _("{run} does not count: {problem}").format(
                    run=run.describe(), problem=run.problems[0]
                )
                for run in found
                if not run.traced
            ),
            "; ",
        )
        fail(
            _("traced stage-3 runs cover {coverage}; {left_out}").format(
                coverage=coverage.describe(), left_out=left_out
            )
            if left_out
            else _("traced stage-3 runs cover {coverage}").format(coverage=coverage.describe()),
            _(
                "the comparison needs at least {count} of each: run the notebook's comparison cell"
            ).format(count=coverage.NEEDED),
        )
    notes(*(run for run in found if run.traced))
    passed(_("stage-3 runs compare {coverage}").format(coverage=coverage.describe()))
    return points


def grade_allreduce_prediction(
    points: float,
    predicted_seconds: float,
    measured_seconds: float,
    what: str | None = None,
) -> float:
    """Full points when the cost model's prediction is within grading.toml [allreduce]
    prediction_factor of the measured time, either way; CheckFailed (no points) otherwise. Both in
    seconds per step. `what` names what was predicted (default: the gradient allreduce)."""
    __tracebackhide__ = True
    what = _("the gradient allreduce") if what is None else what
    factor = grading_rules.load().prediction_factor
    for value, wrong in (
        (
            predicted_seconds,
            _("the predicted time of {what} is {value}, not a positive number of seconds"),
        ),
        (
            measured_seconds,
            _("the measured time of {what} is {value}, not a positive number of seconds"),
        ),
    ):
        if not (isinstance(value, (int, float)) and value > 0):
            fail(
                wrong.format(what=what, value=repr(value)),
                _("run the benchmark and the step profile jobs, then the cells above this one"),
            )
    ratio = predicted_seconds / measured_seconds
    said = _(
        "{what}: predicted {predicted:.3g} ms, measured {measured:.3g} ms (ratio {ratio:.2f})"
    ).format(
        what=what,
        predicted=predicted_seconds * 1e3,
        measured=measured_seconds * 1e3,
        ratio=ratio,
    )
    if not 1 / factor <= ratio <= factor:
        fail(
            _("{said}, more than {factor:g}x apart").format(said=said, factor=factor),
            _(
                "check the model's inputs: the bytes are parameters x 4, the ranks and algorithm "
                "those of the measured run, alpha and beta from your fit of that rank count; the "
                "naive communicator sends one allreduce per parameter array, each paying alpha"
            ),
        )
    passed(_("{said}: within {factor:g}x").format(said=said, factor=factor))
    return points


def grade_profiled_prediction(
    points: float, predicted_seconds: float, folder: Path = Path(".")
) -> float:
    """Notebook 04's check_prediction: the student's predicted seconds of the profiled step's
    exchange, the one number taken from the student's code, judged from the files in `folder` by
    allreduce_judge's rule. GPU runs: against the benchmark's held-out largest message (what the
    cell predicts there). Ranks that had their cores, or whose share is unknown: against the
    measured exchange (grade_allreduce_prediction). Ranks that shared their cores: against the
    kit's own model on the same inputs, the measured time not compared."""
    __tracebackhide__ = True
    step = allreduce_judge.required_step(folder)
    measured = step.measured
    if measured["device_kind"] == "gpu":
        series = allreduce_judge.held_out_series(step.table, measured["ranks"])
        if series is None:
            fail(
                _(
                    "the benchmark has no ring or recursive_doubling series of 3 or more sizes on "
                    "{ranks} ranks, the rank count of the profiled step"
                ).format(ranks=measured["ranks"]),
                f"qsub -j oe -l select=1:mpiprocs={measured['ranks']} "
                "jobs/run_allreduce_benchmark.sh",
            )
        return grade_allreduce_prediction(
            points, predicted_seconds, series.median[-1], allreduce_judge.held_out_what(series)
        )
    rules = grading_rules.load()
    share = allreduce_judge.shared(measured, rules)
    what = _("the gradient allreduce of {run}").format(run=measured["run"])
    if share is None or not (isinstance(predicted_seconds, (int, float)) and predicted_seconds > 0):
        return grade_allreduce_prediction(points, predicted_seconds, measured["seconds"], what)
    judged = allreduce_judge.by_model(predicted_seconds, step, share, rules)
    if not judged.earns:
        fail(_("{what}: {said}").format(what=what, said=judged.said), judged.hint)
    passed(_("{what}: {said}").format(what=what, said=judged.said))
    return points

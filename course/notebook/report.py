"""Tables and plots of the runs, and the notebooks' visible checks of them (the demo's summary
too)."""

from __future__ import annotations

import html
from collections.abc import Callable
from pathlib import Path
from typing import Any

from course import comparison, evidence
from course.contracts import grading_rules, results, stages
from course.errors import CourseError
from course.i18n import _, ljust, width
from course.notebook.report_plots import plot

COLUMNS = (
    "run",
    "stage",
    "workers",
    "scaling",
    "devices",
    "setting",
    "img/s",
    "spread",
    "speedup",
    "efficiency",
    "val. accuracy",
    "time to target",
    "TTA speedup",
    "counts",
)


def headings() -> dict[str, str]:
    """The columns' headings in the student's language (COLUMNS are the rows' keys, which stay)."""
    return {
        "run": _("run"),
        "stage": _("stage"),
        "workers": _("workers"),
        "scaling": _("scaling"),
        "devices": _("devices"),
        "setting": _("setting"),
        "img/s": "img/s",
        "spread": _("spread"),
        "speedup": _("speedup"),
        "efficiency": _("efficiency"),
        "val. accuracy": _("val. accuracy"),
        "time to target": _("time to target"),
        "TTA speedup": _("TTA speedup"),
        "counts": _("counts"),
    }


def _scaling(value: Any) -> Any:
    """The scaling column's word (comparison.scaling's "weak" or "strong", which the rows keep for
    the plot) in the student's language."""
    return {"weak": _("weak"), "strong": _("strong")}.get(value, value)


def target_of(folder: Path = Path("."), baseline: str | None = None) -> float | None:
    """The accuracy target of the data set a folder's baseline run trained on (None: no target
    known)."""
    return _target(comparison.baseline(folder, baseline))


def _rules() -> grading_rules.GradingRules | None:
    """grading.toml's rules where it can be read (its public part in the students' bundle); None
    where neither is there."""
    try:
        return grading_rules.for_students()
    except CourseError:
        return None


def _rate(run: evidence.Run) -> str:
    """The learning-rate rule of a stage-3 run; on one worker every rule is stage 1's rate."""
    return _("lr {rule}").format(rule=run.lr_rule) if run.workers > 1 else _("lr of one worker")


def _target(base: evidence.Run | None) -> float | None:
    """The course's accuracy target for the baseline's data set (grading.toml), where it can be
    found."""
    rules = _rules()
    if base is None or rules is None:
        return None
    return rules.accuracy_target((base.record.get("dataset") or {}).get("name", ""))


def rows(folder: Path = Path("."), baseline: str | None = None) -> list[dict]:
    """One row per run of any stage, with speedup, efficiency and time-to-accuracy speedup against
    the stage-1 baseline: the run named `baseline` (a folder name under runs/), else the latest
    traced one."""
    base = comparison.baseline(folder, baseline)
    target = _target(base)
    base_tta = base.time_to_accuracy(target) if base is not None and target is not None else None
    table = []
    for stage in stages.NAMES:
        for run in evidence.runs(stage, folder):
            record = run.record
            scaling = comparison.scaling(run, base) if base is not None and run.traced else None
            compared_with = base if scaling is not None else None
            tta = run.time_to_accuracy(target) if target is not None else None
            setting = f"{run.setting}, {_rate(run)}" if stage == stages.MULTI_NODE.name else "-"
            if run.profiled:
                setting += ", " + _("profiled")
            devices = ", ".join(sorted(set(run.devices)))
            table.append(
                {
                    "run": run.path.parent.name,
                    "stage": stage,
                    "workers": run.workers,
                    "scaling": scaling if scaling and run.workers > 1 else "-",
                    "devices": _("{devices} on {nodes} node(s)").format(
                        devices=devices, nodes=len(set(run.hosts))
                    )
                    if run.hosts
                    else devices,
                    "setting": setting,
                    "img/s": run.images_per_sec,
                    "spread": (record.get("throughput") or {}).get("std", 0.0),
                    "speedup": (
                        run.images_per_sec / compared_with.images_per_sec if compared_with else None
                    ),
                    "efficiency": (
                        comparison.efficiency(run, compared_with) if compared_with else None
                    ),
                    "val. accuracy": run.final_accuracy,
                    "time to target": (f"{tta['seconds']:.0f} s" if tta else _("never"))
                    if target is not None
                    else None,
                    "TTA speedup": base_tta["seconds"] / tta["seconds"]
                    if compared_with and tta and base_tta
                    else None,
                    "counts": _("yes")
                    if run.traced
                    else _("no: {problem}").format(problem=run.problems[0]),
                    "baseline": base is not None and run.path == base.path,
                    "_curve": run.accuracy_curve,
                }
            )
    return table


def _cell(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}" if value < 10 else f"{value:.1f}"
    return html.escape(str(value))


# An inline style, which JupyterLab's output sanitizer lets through (white-space is among the
# properties it allows). No cell wraps, so a run id stays on one line and the wide table scrolls
# sideways instead.
_NOWRAP = 'style="white-space: nowrap"'


def html_table(
    table: list[dict],
    columns: list[str],
    cell: Callable[[Any], str],
    headings: dict[str, str] | None = None,
) -> str:
    """`columns` of the rows of `table` as an HTML table whose cells never wrap; `cell` writes a
    value (HTML-escaped); a column's heading is its name in `headings`, else the column itself.
    Every table the notebooks display is one."""
    named = headings or {}
    head = "".join(f"<th {_NOWRAP}>{html.escape(named.get(c, c))}</th>" for c in columns)
    body = "".join(
        "<tr>" + "".join(f"<td {_NOWRAP}>{cell(row[c])}</td>" for c in columns) + "</tr>"
        for row in table
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _shown(table: list[dict]) -> list[dict]:
    """The rows as the tables show them: the scaling column in words."""
    return [{**row, "scaling": _scaling(row.get("scaling"))} for row in table]


def table_html(table: list[dict]) -> str:
    return html_table(_shown(table), list(COLUMNS), _cell, headings())


def table_text(table: list[dict]) -> str:
    """The table for a terminal, its columns aligned in terminal columns (a Japanese heading's
    characters take two each)."""
    named = headings()
    cells = [[named[c] for c in COLUMNS]] + [
        [_cell(row[c]) for c in COLUMNS] for row in _shown(table)
    ]
    widths = [max(width(r[i]) for r in cells) for i in range(len(COLUMNS))]
    return "\n".join("  ".join(ljust(v, w) for v, w in zip(r, widths)).rstrip() for r in cells)


def notes(table: list[dict], target: float | None = None) -> list[str]:
    """What a reader of the table must know: which run is the baseline, the target, ratios above
    1."""
    found = [row for row in table if row["baseline"]]
    if not found:
        return [_("No traced stage-1 run: speedup and efficiency need one (the baseline).")]
    said = [
        _(
            "Baseline: {run} (the latest traced stage-1 run unless you name one: "
            'course.report.show(baseline="<run>")).'
        ).format(run=found[0]["run"])
    ]
    if target is not None:
        said.append(
            _(
                "Time to target: wall time until validation accuracy first reached {target} "
                "(the course's grading rules), at the resolution of the evaluations."
            ).format(target=target)
        )
    noisy = [row["run"] for row in table if (row["efficiency"] or 0) > 1.0]
    if noisy:
        said.append(
            _(
                "Efficiency above 1 ({runs}) is measurement noise: the baseline ran slower than "
                "usual (shared cores, another job). Run stage 1 and these again, one right after "
                "the other, so that both meet the same load; stage 3's grade also measures against "
                "its own one-rank run, submitted with the others."
            ).format(runs=", ".join(noisy))
        )
    return said


def efficiency_tiers(folder: Path = Path("."), baseline: str | None = None) -> list[str]:
    """The efficiency points of stages 2 and 3 on the baseline's kind of device, as the course's
    grading rules set them (nothing where no rules can be read)."""
    rules, base = _rules(), comparison.baseline(folder, baseline)
    if rules is None:
        return []
    kind = base.record.get("device_kind", "gpu") if base is not None else "gpu"
    said = []
    for stage in (stages.MULTI_GPU.name, stages.MULTI_NODE.name):
        limits = rules.efficiency(stage, kind)
        tiers = ", ".join(
            _("{share:.0%} of them at {minimum} or more").format(share=share, minimum=minimum)
            for minimum, share in limits.tiers
        )
        said.append(
            _(
                "Efficiency points of {stage} on {kind} (the course's grading rules): {tiers}, "
                "none below; above {suspicious} a run does not compare with its baseline."
            ).format(stage=stage, kind=kind, tiers=tiers, suspicious=limits.suspicious_above)
            + (
                _(
                    " The grade takes the best against stage 1 or against stage 3's own one-rank "
                    "run."
                )
                if stage == stages.MULTI_NODE.name
                else ""
            )
        )
    return said


def references() -> dict[str, dict[str, float]]:
    """Reference images/sec per GPU model from grading.toml, where it can be found."""
    rules = _rules()
    return rules.references if rules is not None else {}


def show(folder: Path = Path("."), baseline: str | None = None) -> list[dict]:
    """Display the table (and plots) of every run in this folder; return the rows."""
    import matplotlib.pyplot as plt
    from IPython.display import HTML, display

    table = rows(folder, baseline)
    if not table:
        print(_("No runs yet: submit a job above, then run this cell again."))
        return table
    display(HTML(table_html(table)))
    for line in notes(table, target_of(folder, baseline)) + efficiency_tiers(folder, baseline):
        print(line)
    display(plot(table))
    plt.close("all")
    for model, figures in references().items():
        shown = ", ".join(f"{stage} {value} img/s" for stage, value in figures.items())
        print(_("Reference, {model}: {figures}").format(model=model, figures=shown))
    return table


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
            else _("WILL NOT COUNT: {problems}").format(problems="; ".join(run.problems))
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


# The verdicts "OK: " and "NOT YET: " open a self-check's line as they are in every language (as
# course.notebook.checks.verdict's "OK: "): the words after them are translated.
OK, NOT_YET = "OK: ", "NOT YET: "


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


def main(argv: list[str]) -> int:
    """`python -m course report [FOLDER]`: the table of the runs in a folder, in a terminal."""
    import argparse

    parser = argparse.ArgumentParser(prog="course report", description=main.__doc__)
    parser.add_argument(
        "folder",
        type=Path,
        nargs="?",
        default=Path("."),
        help=_("where you submit the jobs from (default: here)"),
    )
    parser.add_argument(
        "--baseline",
        default=None,
        help=_("the stage-1 run to compare with (default: the latest)"),
    )
    args = parser.parse_args(argv)
    table = rows(args.folder, args.baseline)
    if not table:
        raise CourseError(
            _("no runs in {runs}").format(runs=args.folder / results.RUNS_DIR),
            _("give the folder you submit the jobs from (it holds runs/ and the job logs)"),
        )
    print(table_text(table))
    for line in notes(table, target_of(args.folder, args.baseline)) + efficiency_tiers(
        args.folder, args.baseline
    ):
        print(line)
    return 0


def check_accuracy(folder: Path = Path("."), baseline: str | None = None) -> list[evidence.Run]:
    """Print the accuracy and time to accuracy of the stage-3 runs against stage 1 (a visible
    self-check)."""
    base = comparison.baseline(folder, baseline)
    target = _target(base)
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

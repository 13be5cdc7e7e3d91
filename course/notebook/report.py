"""The table and plots of the runs (course.report.show, `python -m course report`; the demo's
summary too). What the grading rules say of the runs comes from course.notebook.report_rules; the
notebooks' self-checks of the runs live in course.notebook.report_checks and are called from here.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from pathlib import Path
from typing import Any

from wcwidth import ljust, width

from course import comparison, evidence, i18n
from course.contracts import results, stages
from course.errors import CourseError
from course.i18n import _
from course.notebook.report_checks import (
    check_accuracy,
    check_comparison,
    check_runs,
    snapshot_cost,
)
from course.notebook.report_plots import plot
from course.notebook.report_rules import accuracy_target, efficiency_tiers, references, target_of

__all__ = [
    "COLUMNS",
    "check_accuracy",
    "check_comparison",
    "check_runs",
    "efficiency_tiers",
    "headings",
    "html_table",
    "main",
    "notes",
    "plot",
    "references",
    "rows",
    "show",
    "snapshot_cost",
    "table_html",
    "table_text",
    "target_of",
]

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


def _rate(run: evidence.Run) -> str:
    """The learning-rate rule of a stage-3 run; on one worker every rule is stage 1's rate."""
    return _("lr {rule}").format(rule=run.lr_rule) if run.workers > 1 else _("lr of one worker")


def rows(folder: Path = Path("."), baseline: str | None = None) -> list[dict]:
    """One row per run of any stage, with speedup, efficiency and time-to-accuracy speedup against
    the stage-1 baseline: the run named `baseline` (a folder name under runs/), else the latest
    traced one."""
    base = comparison.baseline(folder, baseline)
    target = accuracy_target(base)
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
            devices = i18n.listed(sorted(set(run.devices)))
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
                    "_cpu_share": _cpu_share(run),
                    "_profiled": run.profiled,
                }
            )
    return table


def _cpu_share(run: evidence.Run) -> float | None:
    """The mean share of a core the ranks of a profiled run got over their steady steps (None: not
    profiled, or a profile from before the share was noted)."""
    shares = [
        rank["cpu_share"]
        for rank in (run.record.get("profile") or {}).get("ranks", [])
        if rank.get("cpu_share") is not None
    ]
    return sum(shares) / len(shares) if shares else None


def _ms_per_image(row: dict) -> float:
    """A worker's steady-step time per image of the run of `row`, in ms: an efficiency is the
    baseline's over the run's (weak and strong scaling alike)."""
    return 1000.0 * row["workers"] / row["img/s"]


def _efficiency_notes(table: list[dict], base: dict) -> list[str]:
    """Efficiency above 1, said with what was measured: each such run's steady-step time per image
    on one worker against the baseline's, a one-rank run of stage 3 (submitted with the others) as
    a second reference, and the CPU shares the step profiles noted."""
    above = [row for row in table if (row["efficiency"] or 0) > 1.0]
    if not above:
        return []
    said = [
        _(
            "Efficiency above 1: a worker of these runs took less time per image in its steady "
            "steps than the baseline's one worker ({base}: {ms:.1f} ms): {runs}."
        ).format(
            base=base["run"],
            ms=_ms_per_image(base),
            runs=i18n.listed(f"{row['run']} {_ms_per_image(row):.1f} ms" for row in above),
        )
    ]
    alone = [
        row
        for row in table
        if row["stage"] == stages.MULTI_NODE.name
        and row["workers"] == 1
        and row["img/s"]
        and not row.get("_profiled")  # its cuts wait for a GPU: its speed is not the run's
    ]
    if alone:
        fastest = min(alone, key=_ms_per_image)
        if _ms_per_image(fastest) < _ms_per_image(base) / (1.0 + _SAME_SPEED):
            said.append(
                _(
                    "One rank of stage 3 ({run}) took {ms:.1f} ms per image: the baseline ran "
                    "slower than the same training did later on one rank (another load at its "
                    "time). Run stage 1 again right before these to compare them."
                ).format(run=fastest["run"], ms=_ms_per_image(fastest))
            )
        else:
            said.append(
                _(
                    "One rank of stage 3 ({run}) took {ms:.1f} ms per image, as long as the "
                    "baseline: on several ranks each rank really stepped faster than one rank "
                    "alone (compare the CPU shares of the step profiles)."
                ).format(run=fastest["run"], ms=_ms_per_image(fastest))
            )
    shares = [row for row in table if row["_cpu_share"] is not None]
    if shares:
        said.append(
            _(
                "Share of a core each rank got over its steady steps (step profiles; below 1: "
                "other work took the rest): {shares}."
            ).format(
                shares=i18n.listed(
                    _("{run} on {workers} rank(s) {share:.2f}").format(
                        run=row["run"], workers=row["workers"], share=row["_cpu_share"]
                    )
                    for row in shares
                )
            )
        )
    return said


# Steady-step times within this fraction of each other are the same speed (grading.toml's
# [prediction] throughput_noise is the course's band for two runs' images/sec).
_SAME_SPEED = 0.1


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
    return said + _efficiency_notes(table, found[0])


def reference_counts() -> str:
    """What the 2018 hands-on's figures count (its logs: 10,000 images over the whole elapsed time
    of 4 epochs), unlike the kit's images/sec, which leaves out the first steps and those after an
    evaluation (course.runtime.throughput)."""
    return _(
        "The reference figures are the 2018 hands-on's own: its images over the whole elapsed "
        "time of its run, so they count every epoch's evaluation and the slow first steps "
        "(warm-up), which your images/sec leaves out. They compare in size, not digit for digit."
    )


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
    found = references()
    for model, figures in found.items():
        shown = i18n.listed(f"{stage} {value} img/s" for stage, value in figures.items())
        print(_("Reference, {model}: {figures}").format(model=model, figures=shown))
    if found:
        print(reference_counts())
    return table


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

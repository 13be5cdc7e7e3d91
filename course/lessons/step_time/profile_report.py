"""The step profiles of a student's stage-3 runs (`PROFILE=1`), for notebook 04: a table and a
stacked bar per rank, and the allreduce time the cost model's prediction is compared with. The
profile's contract (the results file's `profile` field) is in course/runtime/profile.py."""

from __future__ import annotations

import html
from collections.abc import Callable
from pathlib import Path
from typing import Any

from course import evidence, i18n
from course.contracts import stages
from course.i18n import _
from course.notebook.report import html_table
from course.runtime.profile import PHASES

COLOURS = {
    "data": "#8c8c8c",
    "forward": "#4c72b0",
    "backward": "#55a868",
    "wait": "#c44e52",
    "allreduce": "#dd8452",
    "update": "#8172b3",
    "other": "#e5e5e5",
}


def profiled_runs(folder: Path = Path(".")) -> list[evidence.Run]:
    """The traced stage-3 runs with a step profile, fewest ranks first."""
    runs = [
        run
        for run in evidence.runs(stages.MULTI_NODE.name, folder)
        if run.traced and (run.record.get("profile") or {}).get("ranks")
    ]
    return sorted(runs, key=lambda run: (run.workers, run.path.parent.name))


def rows(folder: Path = Path(".")) -> list[dict]:
    """One row per rank of every profiled run: milliseconds per phase (medians over the steady
    steps)."""
    table = []
    for run in profiled_runs(folder):
        nodes = len(set(run.hosts))
        for rank in run.record["profile"]["ranks"]:
            table.append(
                {
                    "run": run.path.parent.name,
                    "ranks": run.workers,
                    "nodes": nodes,
                    "rank": rank["rank"],
                    "host": rank["host"],
                    **{phase: rank["median_ms"].get(phase) for phase in PHASES},
                    "step": round(sum(rank["median_ms"].get(phase) or 0 for phase in PHASES), 3),
                    "steps": rank["steps"],
                }
            )
    return table


def measured_allreduce_seconds(folder: Path = Path("."), ranks: int | None = None) -> dict | None:
    """The gradient exchange of the profiled run on the most ranks (or on `ranks`): its median over
    the ranks, in seconds; the gradient's size in bytes (float32 parameters); the network (and its
    parameter arrays' sizes), the communicator and the allreduce algorithm the run used ("ring"
    where MPI or NCCL chose: NCCL's is a ring), its devices' kind, and `cpu_share`: the lowest
    share of a core any of its ranks got over its steady steps (None where unknown: runs older
    than the share, and GPU runs, whose processes wait on the GPU). None without such a run.
    Traced runs only (profiled_runs): the share is the job's own, sealed with the results."""
    runs = [
        run
        for run in profiled_runs(folder)
        if run.workers > 1 and (ranks is None or run.workers == ranks)
    ]
    if not runs:
        return None
    run = runs[-1]
    profiles = run.record["profile"]["ranks"]
    times = sorted(rank["median_ms"]["allreduce"] for rank in profiles)
    model = run.record.get("model") or {}
    device_kind = run.record.get("device_kind", "gpu")
    shares = [rank["cpu_share"] for rank in profiles if rank.get("cpu_share") is not None]
    known = device_kind == "cpu" and bool(shares) and len(shares) == len(profiles)
    return {
        "run": run.path.parent.name,
        "ranks": run.workers,
        "seconds": times[len(times) // 2] / 1000,
        "gradient_bytes": 4 * model["parameters"] if model.get("parameters") else None,
        "model": model.get("name"),
        "width": model.get("width"),
        "arrays": model.get("arrays"),
        "communicator": run.record.get("communicator"),
        "algorithm": run.record.get("allreduce") or "ring",
        "device_kind": device_kind,
        "cpu_share": min(shares) if known else None,
    }


def plot(folder: Path = Path(".")):
    """A stacked bar per rank of every profiled run: where a step's time goes."""
    import matplotlib.pyplot as plt

    i18n.plot_font()

    table = rows(folder)
    figure, axes = plt.subplots(figsize=(max(4.0, 0.9 * len(table) + 2), 3.6))
    if not table:
        axes.text(
            0.5,
            0.5,
            _("no profiled run yet: submit with PROFILE=1"),
            ha="center",
            va="center",
        )
        axes.set_axis_off()
        return figure
    positions = list(range(len(table)))
    bottoms = [0.0] * len(table)
    for phase in PHASES:
        heights = [row[phase] or 0.0 for row in table]
        axes.bar(
            positions,
            heights,
            bottom=bottoms,
            color=COLOURS[phase],
            label=phase,
            edgecolor="white",
            linewidth=0.5,
        )
        bottoms = [b + h for b, h in zip(bottoms, heights)]
    axes.set_xticks(
        positions,
        [
            _("{ranks} rank(s)\nrank {rank}\n{host}").format(
                ranks=row["ranks"], rank=row["rank"], host=row["host"]
            )
            for row in table
        ],
        fontsize=8,
    )
    axes.set_ylabel(_("ms per step (median)"))
    axes.set_title(_("Where a training step's time goes, per rank"))
    handles, labels = axes.get_legend_handles_labels()
    axes.legend(
        handles[::-1], labels[::-1], fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0)
    )
    figure.tight_layout()
    return figure


def show(folder: Path = Path(".")) -> list[dict]:
    """The table and the plot, displayed in the notebook."""
    import matplotlib.pyplot as plt
    from IPython.display import HTML, display

    table = rows(folder)
    columns = ["run", "ranks", "nodes", "rank", "host", *PHASES, "step", "steps"]
    display(HTML(html_table(table, columns, _cell, headings())))
    figure = plot(folder)
    display(figure)
    plt.close(figure)
    return table


def headings() -> dict[str, str]:
    """The table's headings in the student's language; a phase's is its name in the profile
    (course.runtime.profile.PHASES, the keys step_shares reads), as the notebook names it."""
    return {
        "run": _("run"),
        "ranks": _("ranks"),
        "nodes": _("nodes"),
        "rank": _("rank"),
        "host": _("host"),
        "step": _("step"),
        "steps": _("steps"),
    }


def no_profile() -> str:
    """What shares_lines says without a profiled run."""
    return _("no profiled run yet: run the cells above that submit it (PROFILE=1)")


def shares_lines(step_shares: Callable[..., Any], table: list[dict]) -> list[str]:
    """A line per rank of `table` (rows()): the student's step_shares of its medians."""
    if not table:
        return [no_profile()]
    lines = []
    for row in table:
        medians = {phase: row[phase] for phase in PHASES}
        if any(ms is None for ms in medians.values()):
            lines.append(
                _("{run}, rank {rank}: no steady step was profiled").format(
                    run=row["run"], rank=row["rank"]
                )
            )
            continue
        found = step_shares(medians)
        lines.append(
            _(
                "{run}, rank {rank} of {ranks}: not computing {not_computing:.1%} of its "
                "{step:.1f} ms step ({shares})"
            ).format(
                run=row["run"],
                rank=row["rank"],
                ranks=row["ranks"],
                not_computing=found["not_computing"],
                step=row["step"],
                shares=i18n.listed(f"{phase} {found['shares'][phase]:.1%}" for phase in PHASES),
            )
        )
    return lines


def show_shares(step_shares: Callable[..., Any], folder: Path = Path(".")) -> list[str]:
    """Print shares_lines of the profiled runs in `folder`."""
    lines = shares_lines(step_shares, rows(folder))
    print("\n".join(lines))
    return lines


def _cell(value) -> str:
    return f"{value:.2f}" if isinstance(value, float) else html.escape(str(value))

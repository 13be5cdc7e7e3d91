"""The report's figures: images/sec against workers with the ideal line, and validation accuracy
against epochs, updates and time (course.notebook.report makes the rows)."""

from __future__ import annotations

from course import i18n
from course.contracts import stages
from course.i18n import _


def _label(row: dict) -> str:
    return f"{row['run']} ({row['setting']})" if row["setting"] != "-" else row["run"]


def plot(table: list[dict]):
    """Images/sec against workers with the ideal line; validation accuracy against epochs, updates
    and time."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    i18n.plot_font()
    figure, axes = plt.subplots(2, 2, figsize=(12, 8))
    speed, by_epoch, by_update, by_time = axes.flat
    markers = dict(zip(stages.NAMES, "os^"))
    for stage in stages.NAMES:
        for scaling in ("weak", "strong"):  # strong: stage 1's batch split over the workers
            points = [
                row
                for row in table
                if row["stage"] == stage
                and (row.get("scaling") == "strong") == (scaling == "strong")
            ]
            if points:
                speed.scatter(
                    [row["workers"] for row in points],
                    [row["img/s"] for row in points],
                    marker=markers[stage],
                    s=40,
                    zorder=3,
                    facecolors="none" if scaling == "strong" else None,
                    edgecolors="C3" if scaling == "strong" else None,
                    label=_("{stage} (strong scaling)").format(stage=stage)
                    if scaling == "strong"
                    else stage,
                )
    most = max(2, max(row["workers"] for row in table))
    top = max(row["img/s"] for row in table)
    bases = [row for row in table if row["baseline"]]
    if bases:
        ideal = [bases[0]["img/s"], most * bases[0]["img/s"]]
        speed.plot(
            [1, most],
            ideal,
            color="black",
            linestyle="--",
            linewidth=1.5,
            label=_("ideal (linear, from the baseline)"),
            zorder=2,
        )
        top = max(top, ideal[1])
    # From 0, so that the gap to the ideal line reads as the share of throughput lost; the whole
    # line fits (and an axis of runs that measured nothing, 0 img/s, still has a height).
    speed.set(xlim=(0.5, most + 0.5), ylim=(0, max(1.05 * top, 1.0)))
    # One colour per label on the three accuracy plots, so that a run keeps its colour from plot to
    # plot.
    colours: dict[str, str] = {}
    for row in table:
        curve = row["_curve"]
        if not curve:
            continue
        label = _label(row)
        colour = colours.setdefault(label, f"C{len(colours) % 10}")
        style = dict(marker=markers[row["stage"]], label=label, color=colour)
        by_epoch.plot([p["epoch"] for p in curve], [p["accuracy"] for p in curve], **style)
        by_update.plot([p["iteration"] for p in curve], [p["accuracy"] for p in curve], **style)
        by_time.plot([p["seconds"] for p in curve], [p["accuracy"] for p in curve], **style)
    accuracy = _("validation accuracy")
    speed.set(
        xlabel=_("workers (GPUs or CPU cores)"), ylabel=_("images/sec"), title=_("Throughput")
    )
    by_epoch.set(xlabel=_("epoch"), ylabel=accuracy, title=_("Accuracy per epoch"), ylim=(0, 1))
    by_update.set(
        xlabel=_("updates (iterations): N ranks make N times fewer per epoch"),
        ylabel=accuracy,
        title=_("Accuracy per update"),
        ylim=(0, 1),
    )
    by_time.set(
        xlabel=_("wall time (s)"),
        ylabel=accuracy,
        title=_("Accuracy over time"),
        ylim=(0, 1),
    )
    # Workers, epochs and updates are counts. min_n_ticks=1: with the default (2) the locator falls
    # back to fractional ticks when the axis holds one integer only (a one-epoch run).
    for axis in (speed.xaxis, by_epoch.xaxis, by_update.xaxis):
        axis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))
    for ax in axes.flat:
        handles = dict(zip(*reversed(ax.get_legend_handles_labels())))  # one entry per label
        if handles:
            ax.legend(handles.values(), handles.keys(), fontsize=7)
    figure.tight_layout()
    return figure

"""The allreduce micro-benchmark's figure: median time against message size with the quartiles, and
the fitted α–β model (course.lessons.step_time.allreduce_report shows it)."""

from __future__ import annotations

from typing import Any

from course import i18n
from course.i18n import _
from course.lessons.step_time import costmodel
from course.lessons.step_time.allreduce_series import Series


def plot(
    table: list[Series],
    fitted: dict[tuple[int, str], tuple[float, float]],
    marks: dict[int, int] | None = None,
) -> Any:  # a matplotlib Figure (matplotlib is imported only to draw)
    """Median time against message size (log-log), quartiles as error bars, the fitted model as
    lines."""
    import matplotlib.pyplot as plt
    import numpy as np

    i18n.plot_font()
    figure, ax = plt.subplots(figsize=(8, 5))
    for k, s in enumerate(table):
        colour = f"C{k % 10}"
        median = np.asarray(s.median)
        ax.errorbar(
            s.sizes,
            median,
            yerr=[median - np.asarray(s.q1), np.asarray(s.q3) - median],
            fmt="o",
            color=colour,
            capsize=3,
            label=_("{label} (measured)").format(label=s.label),
        )
        if (s.ranks, s.algorithm) in fitted:
            grid = np.geomspace(min(s.sizes), max(s.sizes), 50)
            model = [
                costmodel.allreduce_seconds(
                    s.algorithm, s.ranks, n, *fitted[(s.ranks, s.algorithm)]
                )
                for n in grid
            ]
            ax.plot(
                grid,
                model,
                color=colour,
                linestyle="--",
                label=_("{label} (model)").format(label=s.label),
            )
    for width, n in (marks or {}).items():
        ax.axvline(n, color="grey", linewidth=0.8, linestyle=":")
        ax.annotate(
            _("VGG width {width}").format(width=width),
            (n, 1.0),
            xycoords=("data", "axes fraction"),
            rotation=90,
            fontsize=7,
            ha="right",
            va="top",
            color="grey",
        )
    ax.set(
        xscale="log",
        yscale="log",
        xlabel=_("message size (bytes)"),
        ylabel=_("allreduce time (s)"),
        title=_("Allreduce: measured (median, quartiles) and the fitted alpha-beta model"),
    )
    ax.legend(fontsize=7)
    figure.tight_layout()
    return figure

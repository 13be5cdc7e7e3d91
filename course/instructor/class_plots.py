"""The class report's figures, as inline SVG: the class's throughput, speedup and efficiency against
workers with the references of grading.toml, and accuracy and time to accuracy per learning-rate
rule (course.instructor.class_data makes the points)."""

from __future__ import annotations

import io
from collections import Counter

from course.contracts import stages
from course.instructor.class_data import ClassData

MARKERS = dict(zip(stages.NAMES, "os^"))
RULES = ("stage 1", *stages.COMPARED_LR_RULES)
SAID = {"constant": "no scaling", "linear": "no warm-up", stages.TAUGHT_LR_RULE: "taught"}


def svg(figure) -> str:
    """A figure as an <svg> element (the XML prologue left out, so that it sits in HTML)."""
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", bbox_inches="tight")
    text = buffer.getvalue()
    return text[text.index("<svg") :]


def _jitter(index: int, count: int) -> float:
    """A small sideways offset, so that students on the same worker count do not hide each other."""
    return 0.0 if count < 2 else 0.3 * (index / (count - 1) - 0.5)


def scaling(data: ClassData):
    """Throughput and speedup against workers (every traced run), best efficiency per student."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    figure = Figure(figsize=(15, 4.5))
    speed, speedup, spread = figure.subplots(1, 3)
    points = [p for s in data.students for p in s.points]
    count = max(1, len(data.students))
    order = {s.name: i for i, s in enumerate(data.students)}
    for stage in stages.NAMES:
        mine = [p for p in points if p.stage == stage]
        if not mine:
            continue
        xs = [p.workers + _jitter(order[p.student], count) for p in mine]
        speed.scatter(xs, [p.images_per_sec for p in mine], marker=MARKERS[stage], label=stage)
        compared = [(x, p) for x, p in zip(xs, mine) if p.speedup is not None]
        speedup.scatter(
            [x for x, _ in compared],
            [p.speedup for _, p in compared],
            marker=MARKERS[stage],
            label=stage,
        )
    most = max([2, *(p.workers for p in points)])
    speedup.plot([1, most], [1, most], "k--", linewidth=1, label="ideal (linear)")
    for index, (model, figures) in enumerate(data.rules.references.items()):
        short = model.split(" (")[0]
        colour = f"C{4 + index}"
        for stage, value in figures.items():
            speed.axhline(value, color=colour, linestyle=":", linewidth=1)
            speed.annotate(f"{short}, {stage}", (0.5, value), fontsize=7, color=colour)
            base = figures.get(stages.BASELINE.name)
            if base and stage != stages.BASELINE.name:
                speedup.axhline(value / base, color=colour, linestyle=":", linewidth=1)
                speedup.annotate(
                    f"{short}, {stage}: {value / base:.2f}", (0.5, value / base), fontsize=7
                )
    for stage, colour in ((stages.MULTI_GPU.name, "C1"), (stages.MULTI_NODE.name, "C2")):
        best = [b.efficiency for s in data.students if (b := s.best(stage)) and b.efficiency]
        if best:
            spread.hist(best, bins=20, range=(0, 1.25), alpha=0.6, color=colour, label=stage)
    kind = Counter(p.device_kind for p in points).most_common(1)[0][0] if points else "gpu"
    for height, (stage, colour) in enumerate(
        ((stages.MULTI_GPU.name, "C1"), (stages.MULTI_NODE.name, "C2"))
    ):
        for minimum, share in data.rules.efficiency(stage, kind).tiers:
            spread.axvline(minimum, color=colour, linestyle="--", linewidth=1)
            spread.annotate(
                f" {share:.0%}",
                (minimum, 0.9 - 0.06 * height),
                xycoords=("data", "axes fraction"),
                color=colour,
                fontsize=7,
            )
    speed.set(xlabel="workers", ylabel="images/sec", title="Throughput of every traced run")
    speed.set_xlim(0.4, most + 0.6)
    speedup.set(xlabel="workers", ylabel="speedup over own stage 1", title="Speedup")
    spread.set(
        xlabel=f"weak-scaling efficiency (dashed: the points' tiers on {kind})",
        ylabel="students",
        title="Each student's best efficiency",
    )
    for axis in (speed.xaxis, speedup.xaxis, spread.yaxis):
        axis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))
    for ax in (speed, speedup, spread):
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    return figure


def accuracy(data: ClassData):
    """Final validation accuracy and time to the target, per rule (stage 1 and stage 3's rules)."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(12, 4.5))
    final, timed = figure.subplots(1, 2)
    entries = [a for s in data.students for a in s.accuracy]
    for index, rule in enumerate(RULES):
        mine = [a for a in entries if a.rule == rule]
        count = max(1, len(mine))
        finals = [(index + _jitter(i, count), a.final) for i, a in enumerate(mine) if a.final]
        final.scatter([x for x, _ in finals], [y for _, y in finals], color=f"C{index}")
        reached = [(index + _jitter(i, count), a.seconds) for i, a in enumerate(mine) if a.seconds]
        timed.scatter([x for x, _ in reached], [y for _, y in reached], color=f"C{index}")
        timed.annotate(
            f"{len(reached)} of {len(mine)} reached it", (index, 0), fontsize=7, ha="center"
        )
    if data.target is not None:
        final.axhline(data.target, color="black", linestyle="--", linewidth=1, label="target")
        final.legend(fontsize=7)
    labels = [f"{rule}\n({SAID[rule]})" if rule in SAID else rule for rule in RULES]
    for ax in (final, timed):
        ax.set_xticks(range(len(RULES)), labels)
        ax.set_xlim(-0.5, len(RULES) - 0.5)
    final.set(ylabel="validation accuracy", title="Final accuracy", ylim=(0, 1))
    timed.set(
        ylabel="seconds",
        title=f"Time to the target {data.target if data.target is not None else '(none set)'}",
    )
    timed.set_ylim(bottom=0)
    return figure

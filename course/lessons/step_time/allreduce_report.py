"""The allreduce micro-benchmark as the notebook shows it: the table, the fitted α and β, the plot.

    from course.lessons.step_time import allreduce_report
    table = allreduce_report.show()      # every (ranks, algorithm) measured in runs/allreduce-*/

The measurements and their fits come from course.lessons.step_time.allreduce_series, the figure from
course.lessons.step_time.allreduce_plot. Two algorithms differ beyond noise at a size only where
their
quartile ranges do not overlap.
"""

from __future__ import annotations

from pathlib import Path

from wcwidth import center, rjust, width

from course import i18n
from course.i18n import _
from course.lessons.step_time import costmodel
from course.lessons.step_time.allreduce_plot import plot
from course.lessons.step_time.allreduce_series import Series, fits, measured_table


def _bytes(n: int) -> str:
    unit, name = (2**20, "MiB") if n >= 2**20 else (1024, "KiB")
    return f"{n // unit} {name}" if n % unit == 0 else f"{n / unit:.1f} {name}"


def table_text(table: list[Series]) -> str:
    """Sizes down, (ranks, algorithm) across: median and quartiles in microseconds."""
    sizes = sorted({n for s in table for n in s.sizes})
    header = rjust(_("size"), 8) + " | " + " | ".join(center(s.label, 28) for s in table)
    lines = [header, "-" * width(header)]
    for n in sizes:
        cells = []
        for s in table:
            if n in s.sizes:
                i = s.sizes.index(n)
                cells.append(
                    f"{s.median[i] * 1e6:9.1f} us ({s.q1[i] * 1e6:.0f}-{s.q3[i] * 1e6:.0f})".center(
                        28
                    )
                )
            else:
                cells.append(" " * 28)
        lines.append(f"{_bytes(n):>8} | " + " | ".join(cells))
    return "\n".join(lines)


def compare(
    table: list[Series], first: str = "ring", second: str = "recursive_doubling"
) -> list[str]:
    """Per rank count measured with both algorithms, where they differ beyond the spread and where
    not."""
    by = {(s.ranks, s.algorithm): s for s in table}
    said = []
    for ranks in sorted({s.ranks for s in table}):
        a, b = by.get((ranks, first)), by.get((ranks, second))
        if not (a and b):
            continue
        beyond: list[str] = []
        within: list[str] = []
        for n in sorted(set(a.sizes) & set(b.sizes)):
            i, j = a.sizes.index(n), b.sizes.index(n)
            apart = a.q3[i] < b.q1[j] or b.q3[j] < a.q1[i]  # the quartile ranges do not overlap
            faster = first if a.median[i] < b.median[j] else second
            ratio = max(a.median[i], b.median[j]) / min(a.median[i], b.median[j])
            (beyond if apart else within).append(
                _("{size} ({algorithm} {ratio:.2f}x faster)").format(
                    size=_bytes(n), algorithm=faster, ratio=ratio
                )
                if apart
                else _bytes(n)
            )
        said.append(
            _(
                "{ranks} ranks, {first} vs {second}: beyond the spread at {beyond}; within it "
                "(noise) at {within}"
            ).format(
                ranks=ranks,
                first=first,
                second=second,
                beyond=i18n.listed(beyond) or _("no size"),
                within=i18n.listed(within) or _("no size"),
            )
        )
    if said:
        said.append(
            _(
                "The alpha-beta model has no term for the sums themselves (the Fujitsu study's "
                "table 1 counts them as computation): recursive doubling adds the whole vector at "
                "each of its log2(p) steps, the ring (p-1)/p of it in all. On one node, where a "
                "message is a memory copy, an addition costs about what a copy does, so on 2 "
                "ranks, where both send n bytes, the ring can still win."
            )
        )
    return said


def notes(table: list[Series], fitted: dict[tuple[int, str], tuple[float, float]]) -> list[str]:
    """Where model and measurement part, per series, and why on a shared machine."""
    said = []
    for s in table:
        if (s.ranks, s.algorithm) not in fitted:
            continue
        alpha, beta = fitted[(s.ranks, s.algorithm)]
        errors = [
            costmodel.allreduce_seconds(s.algorithm, s.ranks, n, alpha, beta) / t - 1
            for n, t in zip(s.sizes, s.median)
        ]
        worst = max(range(len(errors)), key=lambda i: abs(errors[i]))
        close = [_bytes(n) for n, e in zip(s.sizes, errors) if abs(e) <= 0.25]
        line = (
            _(
                "{label}: alpha {alpha:.2f} us, beta {beta:.3f} ns/byte ({bandwidth:.2f} GB/s); "
                "the model is within 25% of the median at {close} and misses most at {worst} "
                "({error:+.0%})"
            ).format(
                label=s.label,
                alpha=alpha * 1e6,
                beta=beta * 1e9,
                bandwidth=1 / beta / 1e9,
                close=i18n.listed(close) or _("no size"),
                worst=_bytes(s.sizes[worst]),
                error=errors[worst],
            )
            if beta > 0
            else _("{label}: the fit gives beta <= 0: no bandwidth term").format(label=s.label)
        )
        # TRANSLATORS: this and the next three are appended to the line above, each with its
        # separator ("; " or ". ") first.
        if alpha <= 0:
            line += _("; alpha <= 0: the latency is below what these sizes resolve")
        if s.nodes == 1 and errors[worst] < 0 and s.sizes[worst] >= 4 * 2**20:
            line += _(
                "; from a few MiB on the messages no longer fit in the caches and each copy runs "
                "at memory speed: one beta cannot hold both"
            )
        if s.oversubscribed:
            line += _(
                ". {ranks} ranks on {cores} cores: ranks take turns on a core, so a step waits "
                "for a rank to be scheduled as well as for its message, and the times are not the "
                "network's"
            ).format(ranks=s.ranks, cores=s.cores)
        elif s.nodes == 1:
            line += _(
                ". One node: the 'network' is shared memory, and the ranks share caches and "
                "memory bandwidth, which the model's one β per link does not know"
            )
        said.append(line)
    return said


WIDTHS = (16, 64)  # the course network's width on CPUs and on GPUs


def parameter_arrays(model: str = "vgg", width: int = 16) -> list[int]:
    """The sizes of a course network's parameter arrays (in L.Classifier, as stage 3 trains it):
    the naive communicator allreduces each on its own."""
    # Chainer only when a network is built: the table and the plot need none.
    import chainer
    import chainer.links as L
    import numpy as np

    from course.runtime import models

    classifier = L.Classifier(models.build(model, width=width))
    with chainer.using_config("train", False):
        # sizes the lazily initialised layers
        classifier.predictor(np.zeros((1, 3, 32, 32), dtype=np.float32))
    return [param.size for param in classifier.params()]


def gradient_bytes(model: str = "vgg", widths: tuple[int, ...] = WIDTHS) -> dict[int, int]:
    """The gradient of the course network at each width, in bytes (float32, all parameters in one
    buffer)."""
    return {
        width: costmodel.BYTES_PER_PARAMETER * sum(parameter_arrays(model, width))
        for width in widths
    }


def by_width(table: list[Series], sizes: dict[int, int]) -> list[str]:
    """What each series measured at the gradient size of each width (log-log between the nearest
    sizes measured): the CPU course's width against the GPU course's, in the same job."""
    import numpy as np

    said = []
    for s in table:
        at = {
            width: float(np.exp(np.interp(np.log(n), np.log(s.sizes), np.log(s.median))))
            for width, n in sizes.items()
            if min(s.sizes) <= n <= max(s.sizes)
        }
        if len(at) == len(sizes):
            (w1, t1), (w2, t2) = list(at.items())[:2]
            said.append(
                _(
                    "{label}: the width-{w1} gradient ({bytes1}) {ms1:.2f} ms, the width-{w2} one "
                    "({bytes2}, {ratio:.0f}x the bytes) {ms2:.2f} ms: {times:.1f}x the time"
                ).format(
                    label=s.label,
                    w1=w1,
                    bytes1=_bytes(sizes[w1]),
                    ms1=t1 * 1e3,
                    w2=w2,
                    bytes2=_bytes(sizes[w2]),
                    ratio=sizes[w2] / sizes[w1],
                    ms2=t2 * 1e3,
                    times=t2 / t1,
                )
            )
    return said


def show(folder: Path = Path(".")) -> list[Series]:
    """Print the table, the fits and where they part from the measurement, and display the plot."""
    import matplotlib.pyplot as plt
    from IPython.display import display

    table = measured_table(folder)
    if not table:
        print(
            _(
                "No allreduce measurements yet: submit jobs/run_allreduce_benchmark.sh, then run "
                "this cell again."
            )
        )
        return table
    fitted = fits(table)
    sizes = gradient_bytes()
    print(table_text(table))
    for line in [*notes(table, fitted), *compare(table), *by_width(table, sizes)]:
        print(line)
    display(plot(table, fitted, sizes))
    plt.close("all")
    return table


def summary(folder: Path = Path(".")) -> list[str]:
    """For a terminal (the demo): the step profiles, the fitted alpha and beta, and the kit's
    prediction of the profiled run's gradient allreduce against what its profile measured."""
    from course.lessons.step_time import profile_report
    from course.runtime.profile import PHASES

    lines = [
        _("step profile, {ranks} rank(s), rank {rank} on {host}: {phases} ms").format(
            ranks=row["ranks"],
            rank=row["rank"],
            host=row["host"],
            phases=i18n.listed(
                f"{phase} {row[phase]:.1f}" for phase in PHASES if row[phase] is not None
            ),
        )
        for row in profile_report.rows(folder)
    ]
    fitted = fits(measured_table(folder))
    lines += [
        _(
            "allreduce fit, {algorithm} on {ranks} ranks: alpha {alpha:.2f} us, beta {beta:.3f} "
            "ns/byte"
        ).format(algorithm=algorithm, ranks=ranks, alpha=alpha * 1e6, beta=beta * 1e9)
        for (ranks, algorithm), (alpha, beta) in sorted(fitted.items())
    ]
    measured = profile_report.measured_allreduce_seconds(folder)
    if measured is not None and (measured["ranks"], measured["algorithm"]) in fitted:
        arrays = measured["arrays"] or parameter_arrays(measured["model"], measured["width"])
        predicted = costmodel.predict_gradient_allreduce(
            arrays if measured["communicator"] == "naive" else sum(arrays),
            measured["algorithm"],
            measured["ranks"],
            *fitted[(measured["ranks"], measured["algorithm"])],
        )
        lines.append(
            _(
                "gradient allreduce of {run} ({parameters:,} parameters, {algorithm} on {ranks} "
                "ranks): predicted {predicted:.2f} ms, measured {measured:.2f} ms (ratio "
                "{ratio:.2f})"
            ).format(
                run=measured["run"],
                parameters=sum(arrays),
                algorithm=measured["algorithm"],
                ranks=measured["ranks"],
                predicted=predicted * 1e3,
                measured=measured["seconds"] * 1e3,
                ratio=predicted / measured["seconds"],
            )
        )
    return lines

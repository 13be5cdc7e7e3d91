"""Notebook 05's measurements beside the student's models: the parameter server against the ring
(the benchmark job with ALGORITHMS="ring parameter_server"), and the step profile's layers for
overlap and half-precision gradients.

    from course.lessons.exchange import exchange_report
    exchange_report.show_server(parameter_server_time)   # runs/exchange-*/ against the model
    exchange_report.show_overlap(overlapped_backward)    # the profiled stage-3 run's layers
    exchange_report.show_half_precision(half_precision_saving)

α and β are the kit's fit of the student's own notebook-04 benchmark (the ring series of the
rank count in question), or, without it, of the ring series measured beside the server.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from course import i18n
from course.contracts import benchmark
from course.i18n import _
from course.lessons.step_time import allreduce_report, costmodel, profile_report
from course.lessons.step_time.allreduce_report import Series

# The sizes that show both ends: latency (16 KiB, where the server's extra bytes cost little) and
# bandwidth (1 and 16 MiB, where they cost p times the ring's). Rounds and budget: the job's own.
SIZES = (16 * 1024, 2**20, 16 * 2**20)
JOB_ENV = {
    "ALGORITHMS": f"ring {benchmark.PARAMETER_SERVER}",
    "PREFIX": benchmark.EXCHANGE_PREFIX,
    "SIZES": " ".join(str(n) for n in SIZES),
}


def _bytes(n: int) -> str:
    return f"{n / 2**20:g} MiB" if n >= 2**20 else f"{n / 1024:g} KiB"


def server_table(folder: Path = Path(".")) -> list[Series]:
    """The ring and parameter-server series of the newest exchange jobs, by ranks."""
    return allreduce_report.measured_table(folder, benchmark.EXCHANGE_PREFIX)


def ring_fit(ranks: int, folder: Path = Path(".")) -> tuple[float, float, str] | None:
    """(α, β, where from) for `ranks` ranks: notebook 04's benchmark, else the exchange job's
    ring."""
    for prefix, source in (
        (benchmark.PREFIX, _("your notebook-04 benchmark")),
        (benchmark.EXCHANGE_PREFIX, _("the ring measured beside the server")),
    ):
        fitted = allreduce_report.fits(allreduce_report.measured_table(folder, prefix))
        if (ranks, "ring") in fitted:
            alpha, beta = fitted[(ranks, "ring")]
            return alpha, beta, source
    return None


def server_lines(
    table: list[Series],
    parameter_server_time: Callable[..., Any],
    folder: Path = Path("."),
    whose: str | None = None,
) -> list[str]:
    """Per rank count and size: the measured server/ring ratio and the models' ratio (`whose`:
    the model's owner in words, the student's by default)."""
    whose = _("your model") if whose is None else whose
    by = {(s.ranks, s.algorithm): s for s in table}
    said = []
    for ranks in sorted({s.ranks for s in table}):
        ring, server = by.get((ranks, "ring")), by.get((ranks, benchmark.PARAMETER_SERVER))
        fit = ring_fit(ranks, folder)
        if ring is None or server is None or fit is None:
            continue
        alpha, beta, source = fit
        said.append(
            _(
                "{ranks} ranks (alpha {alpha:.2f} us, beta {beta:.3f} ns/byte, from {source}):"
            ).format(ranks=ranks, alpha=alpha * 1e6, beta=beta * 1e9, source=source)
        )
        for n in sorted(set(ring.sizes) & set(server.sizes)):
            t_ring, t_server = (
                ring.median[ring.sizes.index(n)],
                server.median[server.sizes.index(n)],
            )
            model_ring = costmodel.allreduce_seconds("ring", ranks, n, alpha, beta)
            model_server = float(parameter_server_time(ranks, n, alpha, beta))
            said.append(
                f"  {_bytes(n):>8}: "
                + _(
                    "server {server:8.3f} ms, ring {ring:8.3f} ms, measured ratio {ratio:5.2f}; "
                    "{whose}: server {model_server:8.3f} ms, ratio {model_ratio:5.2f}"
                ).format(
                    server=t_server * 1e3,
                    ring=t_ring * 1e3,
                    ratio=t_server / t_ring,
                    whose=whose,
                    model_server=model_server * 1e3,
                    model_ratio=model_server / model_ring,
                )
            )
    return said


def plot_by_workers(
    parameter_server_time: Callable[..., Any], alpha: float, beta: float, nbytes: int
) -> Any:  # a matplotlib Figure
    """The models' time of one exchange of `nbytes` against the rank count, 2 to 256."""
    import matplotlib.pyplot as plt

    i18n.plot_font()
    workers = [2**k for k in range(1, 9)]
    figure, ax = plt.subplots(figsize=(6, 4))
    ax.plot(
        workers,
        [float(parameter_server_time(p, nbytes, alpha, beta)) for p in workers],
        "o-",
        label=_("parameter server (your model)"),
    )
    ax.plot(
        workers,
        [costmodel.allreduce_seconds("ring", p, nbytes, alpha, beta) for p in workers],
        "s--",
        label=_("ring allreduce"),
    )
    ax.set(
        xscale="log",
        yscale="log",
        xlabel=_("ranks"),
        ylabel=_("seconds per exchange"),
        title=_("One exchange of {size} with your alpha and beta").format(size=_bytes(nbytes)),
    )
    ax.legend(fontsize=8)
    figure.tight_layout()
    return figure


def show_server(parameter_server_time: Callable[..., Any], folder: Path = Path(".")) -> list:
    """The exchange job's table, the ratios measured and modelled, and the model by rank count."""
    import matplotlib.pyplot as plt
    from IPython.display import display

    table = server_table(folder)
    if not table:
        print(
            _(
                "No parameter-server measurement yet: run the benchmark cell above, then this "
                "cell again."
            )
        )
        return table
    print(allreduce_report.table_text(table))
    for line in server_lines(table, parameter_server_time, folder):
        print(line)
    fit = ring_fit(max(s.ranks for s in table), folder)
    if fit is not None:
        nbytes = allreduce_report.gradient_bytes(widths=(64,))[64]
        display(plot_by_workers(parameter_server_time, fit[0], fit[1], nbytes))
        plt.close("all")
    return table


def profiled_layers(folder: Path = Path(".")) -> dict | None:
    """The profiled stage-3 run on the most ranks whose profile has layers: rank 0's layers (in
    backward order) and its phases (ms). None without one."""
    runs = [
        run
        for run in profile_report.profiled_runs(folder)
        if run.workers > 1 and run.record["profile"]["ranks"][0].get("layers")
    ]
    if not runs:
        return None
    run = runs[-1]
    rank = run.record["profile"]["ranks"][0]
    return {
        "run": run.path.parent.name,
        "ranks": run.workers,
        "layers": rank["layers"],
        "median_ms": rank["median_ms"],
    }


def no_profile() -> str:
    """What profile_and_fit says without a profiled run that has per-layer times."""
    return _(
        "No profiled stage-3 run with per-layer times yet: run notebook 04's step-profile cell "
        "(its runs record each layer's backward time), then this cell again."
    )


def profile_and_fit(folder: Path) -> tuple[dict, float, float, str] | str:
    """The profiled run with layers and (α, β, where from) for its ranks, or what is missing."""
    profiled = profiled_layers(folder)
    if profiled is None:
        return no_profile()
    fit = ring_fit(profiled["ranks"], folder)
    if fit is None:
        return _(
            "No ring benchmark on {ranks} ranks to fit alpha and beta on: run notebook 04's "
            "benchmark cell, then this cell again."
        ).format(ranks=profiled["ranks"])
    return profiled, *fit


def overlap_lines(
    overlapped_backward: Callable[..., Any], folder: Path = Path("."), whose: str | None = None
) -> list[str]:
    """The profiled run's backward and exchange, without overlap and with the layer-wise model
    (`whose`: the model's owner in words, the student's by default)."""
    whose = _("your model") if whose is None else whose
    found = profile_and_fit(folder)
    if isinstance(found, str):
        return [found]
    profiled, alpha, beta, source = found
    ranks, layers = profiled["ranks"], profiled["layers"]
    backward = [layer["backward_ms"] / 1e3 for layer in layers]
    exchange = [
        costmodel.allreduce_seconds(
            "ring", ranks, costmodel.BYTES_PER_PARAMETER * layer["parameters"], alpha, beta
        )
        for layer in layers
    ]
    serial = sum(backward) + sum(exchange)
    overlapped = float(overlapped_backward(backward, exchange))
    hidden = serial - overlapped
    return [
        _(
            "{run} ({ranks} ranks), rank 0: {layers} layers with parameters, backward "
            "{backward:.2f} ms; one ring allreduce per layer with alpha {alpha:.2f} us, beta "
            "{beta:.3f} ns/byte (from {source}): {exchange:.3f} ms of exchange"
        ).format(
            run=profiled["run"],
            ranks=ranks,
            layers=len(layers),
            backward=sum(backward) * 1e3,
            alpha=alpha * 1e6,
            beta=beta * 1e9,
            source=source,
            exchange=sum(exchange) * 1e3,
        ),
        _(
            "without overlap {serial:.3f} ms; layer by layer ({whose}) {overlapped:.3f} ms: "
            "{hidden:.3f} ms hidden, {share:.0%} of the exchange"
        ).format(
            serial=serial * 1e3,
            whose=whose,
            overlapped=overlapped * 1e3,
            hidden=hidden * 1e3,
            share=hidden / sum(exchange),
        )
        if sum(exchange) > 0
        else _("no exchange to hide"),
    ]


def half_precision_lines(
    half_precision_saving: Callable[..., Any], folder: Path = Path("."), whose: str | None = None
) -> list[str]:
    """The saving the model predicts for the profiled run's gradient in one float16 buffer
    (`whose`: the model's owner in words, the student's by default)."""
    whose = _("your model") if whose is None else whose
    found = profile_and_fit(folder)
    if isinstance(found, str):
        return [found]
    profiled, alpha, beta, source = found
    ranks = profiled["ranks"]
    parameters = sum(layer["parameters"] for layer in profiled["layers"])
    saved = float(half_precision_saving(ranks, parameters, alpha, beta))
    whole = costmodel.allreduce_seconds(
        "ring", ranks, costmodel.BYTES_PER_PARAMETER * parameters, alpha, beta
    )
    step = sum(value or 0 for value in profiled["median_ms"].values()) / 1e3
    return [
        _(
            "{run}: {parameters:,} parameters on {ranks} ranks, one ring allreduce of one buffer "
            "(alpha, beta from {source}): float32 {whole:.3f} ms; float16 saves {saved:.3f} ms by "
            "{whose}, {share:.2%} of the measured {step:.1f} ms step"
        ).format(
            run=profiled["run"],
            parameters=parameters,
            ranks=ranks,
            source=source,
            whole=whole * 1e3,
            saved=saved * 1e3,
            whose=whose,
            share=saved / step,
            step=step * 1e3,
        )
    ]


def show_overlap(overlapped_backward: Callable[..., Any], folder: Path = Path(".")) -> list[str]:
    """Print (and return) overlap_lines for the student's function."""
    said = overlap_lines(overlapped_backward, folder)
    print("\n".join(said))
    return said


def show_half_precision(
    half_precision_saving: Callable[..., Any], folder: Path = Path(".")
) -> list[str]:
    """Print (and return) half_precision_lines for the student's function."""
    said = half_precision_lines(half_precision_saving, folder)
    print("\n".join(said))
    return said


def summary(folder: Path = Path(".")) -> list[str]:
    """For a terminal (the demo): notebook 05's measurement and figures, by the kit's models."""
    from course.lessons.exchange import exchangemodel

    whose = _("the kit's model")
    table = server_table(folder)
    lines = server_lines(table, exchangemodel.parameter_server_seconds, folder, whose) or [
        _("no parameter-server measurement (notebook 05's benchmark cell)")
    ]
    return [
        *lines,
        *overlap_lines(exchangemodel.overlapped_seconds, folder, whose),
        *half_precision_lines(exchangemodel.half_precision_saving, folder, whose),
    ]

"""Notebook 05's section 4 on the student's own numbers: their functions of the exchange's cost
applied to notebook 04's fits and step profile (the kit's reading of the files, as
course.lessons.exchange.exchange_report reads them).

    from course.lessons.exchange import scaling_report
    scaling_report.show_crossover(ring_crossover_bytes)   # both algorithms' fits, per rank count
    scaling_report.show_slowdown(weak_scaling_speedup, first_slower)
    scaling_report.show_share(exchange_share)             # and the three changes of the question

Nothing here is graded: the checks grade the functions on known cases.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from course import i18n
from course.i18n import _
from course.lessons.exchange import exchange_report
from course.lessons.step_time import allreduce_report, costmodel, profile_report

RANK_COUNTS = [1, 2, 4, 8, 16, 32, 64, 128, 256]
FASTER_GPU = 100  # the slowdown's second line: the compute of a GPU this many times faster
FACTOR = 4  # the share question's three changes: GPU, network, ranks, each this many times


def _size(nbytes: float) -> str:
    if nbytes == 0:
        return _("0 bytes (at every size)")
    if math.isinf(nbytes):
        return _("no size (never)")
    return _("{nbytes:,.0f} bytes ({mib:.3g} MiB)").format(nbytes=nbytes, mib=nbytes / 2**20)


def crossover_lines(
    ring_crossover_bytes: Callable[..., Any],
    fitted: dict[tuple[int, str], tuple[float, float]],
    gradients: dict[str, int],
) -> list[str]:
    """Per rank count with both algorithms fitted: the student's crossover size, and the algorithm
    each gradient (a name: its bytes) should use by it."""
    said = []
    for ranks in sorted({key[0] for key in fitted}):
        if (ranks, "ring") not in fitted or (ranks, "recursive_doubling") not in fitted:
            continue
        (ring_alpha, ring_beta) = fitted[(ranks, "ring")]
        (doubling_alpha, doubling_beta) = fitted[(ranks, "recursive_doubling")]
        above = float(
            ring_crossover_bytes(ranks, ring_alpha, ring_beta, doubling_alpha, doubling_beta)
        )
        said.append(
            _(
                "{ranks} ranks: ring alpha {ring_alpha:.2f} us, beta {ring_beta:.3f} ns/byte; "
                "recursive doubling alpha {doubling_alpha:.2f} us, beta {doubling_beta:.3f} "
                "ns/byte: the ring is faster above {size}"
            ).format(
                ranks=ranks,
                ring_alpha=ring_alpha * 1e6,
                ring_beta=ring_beta * 1e9,
                doubling_alpha=doubling_alpha * 1e6,
                doubling_beta=doubling_beta * 1e9,
                size=_size(above),
            )
        )
        said += [
            f"  {name}, {_size(nbytes)}: "
            + (_("the ring") if nbytes > above else _("recursive doubling"))
            for name, nbytes in gradients.items()
        ]
    return said or [
        _(
            "No fit of both the ring and recursive doubling on the same ranks: run notebook 04's "
            "benchmark cell (it measures both), then this cell again."
        )
    ]


def show_crossover(ring_crossover_bytes: Callable[..., Any], folder: Path = Path(".")) -> list:
    """Print crossover_lines for notebook 04's fits, the profiled run's gradient and the course
    network's at both widths."""
    fitted = allreduce_report.fits(allreduce_report.measured_table(folder))
    gradients = {}
    if fitted:
        profiled = profile_report.measured_allreduce_seconds(folder)
        if profiled and profiled["gradient_bytes"]:
            gradients[_("your profiled run's gradient")] = profiled["gradient_bytes"]
        for width, nbytes in allreduce_report.gradient_bytes().items():
            gradients[_("the course network's gradient at width {width}").format(width=width)] = (
                nbytes
            )
    said = crossover_lines(ring_crossover_bytes, fitted, gradients)
    print("\n".join(said))
    return said


def step_setting(folder: Path = Path(".")) -> dict | str:
    """The profiled stage-3 run on the most ranks as the section's setting: its ranks, rank 0's
    compute (forward and backward) a step, its gradient's bytes and the α, β fitted for its ranks;
    or what is missing."""
    found = exchange_report.profile_and_fit(folder)
    if isinstance(found, str):
        return found
    profiled, alpha, beta, source = found
    median = profiled["median_ms"]
    return {
        "run": profiled["run"],
        "ranks": profiled["ranks"],
        "compute": ((median.get("forward") or 0) + (median.get("backward") or 0)) / 1e3,
        "bytes": costmodel.BYTES_PER_PARAMETER
        * sum(layer["parameters"] for layer in profiled["layers"]),
        "alpha": alpha,
        "beta": beta,
        "source": source,
    }


def _setting_line(setting: dict) -> str:
    return _(
        "{run}: compute (forward and backward) {compute:.1f} ms a step per rank, a gradient of "
        "{size}, alpha {alpha:.2f} us, beta {beta:.3f} ns/byte (from {source})"
    ).format(
        run=setting["run"],
        compute=setting["compute"] * 1e3,
        size=_size(setting["bytes"]),
        alpha=setting["alpha"] * 1e6,
        beta=setting["beta"] * 1e9,
        source=setting["source"],
    )


def slowdown_lines(
    weak_scaling_speedup: Callable[..., Any], first_slower: Callable[..., Any], setting: dict
) -> list[str]:
    """The student's speedups over RANK_COUNTS and first slower count, for the setting's compute
    and for a GPU FASTER_GPU times faster."""
    said = [_setting_line(setting)]
    for label, compute in (
        (_("as profiled"), setting["compute"]),
        (_("a GPU {times} times faster").format(times=FASTER_GPU), setting["compute"] / FASTER_GPU),
    ):
        run = (compute, setting["bytes"], setting["alpha"], setting["beta"])
        speedups = [float(weak_scaling_speedup(ranks, *run)) for ranks in RANK_COUNTS]
        slower = first_slower(RANK_COUNTS, *run)
        said.append(
            f"{label}: "
            + i18n.listed(
                _("{ranks} ranks {speedup:.3g}").format(ranks=ranks, speedup=s)
                for ranks, s in zip(RANK_COUNTS, speedups)
            )
            + "; "
            + (
                _("no rank count slower than one")
                if slower is None
                else _("first slower: {ranks}").format(ranks=slower)
            )
        )
    return said


def share_lines(exchange_share: Callable[..., Any], setting: dict) -> list[str]:
    """The student's exchange share of the setting, and of the three changes FACTOR times."""
    compute, nbytes, ranks = setting["compute"], setting["bytes"], setting["ranks"]
    rates = (setting["alpha"], setting["beta"])
    changes = {
        _("as profiled"): (compute, nbytes, ranks),
        _("a GPU {times} times faster").format(times=FACTOR): (compute / FACTOR, nbytes, ranks),
        _("a network {times} times larger (parameters and compute)").format(times=FACTOR): (
            compute * FACTOR,
            nbytes * FACTOR,
            ranks,
        ),
        _("{times} times the ranks").format(times=FACTOR): (compute, nbytes, ranks * FACTOR),
    }
    shares = {name: float(exchange_share(*case, *rates)) for name, case in changes.items()}
    return [
        _setting_line(setting),
        *(
            "  "
            + _("{change}: the exchange is {share:.2%} of the step").format(
                change=name, share=share
            )
            for name, share in shares.items()
        ),
    ]


def show_slowdown(
    weak_scaling_speedup: Callable[..., Any],
    first_slower: Callable[..., Any],
    folder: Path = Path("."),
) -> list[str]:
    """Print (and return) slowdown_lines for the profiled run, or what is missing."""
    setting = step_setting(folder)
    said = (
        [setting]
        if isinstance(setting, str)
        else slowdown_lines(weak_scaling_speedup, first_slower, setting)
    )
    print("\n".join(said))
    return said


def show_share(exchange_share: Callable[..., Any], folder: Path = Path(".")) -> list[str]:
    """Print (and return) share_lines for the profiled run, or what is missing."""
    setting = step_setting(folder)
    said = [setting] if isinstance(setting, str) else share_lines(exchange_share, setting)
    print("\n".join(said))
    return said

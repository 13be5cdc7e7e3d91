"""The α–β cost model of allreduce, as the kit knows it: the reference the checks, the reader and
the scoring compare with.

An allreduce of n bytes on p ranks costs T = a·α + b·n·β, α the latency of one message (seconds) and
β the time per byte (seconds per byte, 1/bandwidth), with a and b set by the algorithm:

    recursive doubling  T = log2(p)·(α + n·β)        log2 p steps, each exchanging the whole vector
    ring                T = 2(p−1)·α + 2(p−1)/p·n·β  reduce-scatter then allgather,
                                                     2(p−1) steps of n/p bytes

Recursive doubling is the Fujitsu study's (Yamazaki et al. 2016) BRD (全量バタフライ, "butterfly
recursive doubling", its table 1: M·log2 N bytes per node in log2 N phases). Table 1 has no ring;
its VHD (recursive halving then doubling, Rabenseifner) sends at most 2M per node like the ring, in
2·log2 N phases instead of 2(N−1).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from course import i18n
from course.i18n import _

ALGORITHMS = ("ring", "recursive_doubling")
BYTES_PER_PARAMETER = 4  # float32 gradients


def coefficients(algorithm: str, ranks: int) -> tuple[float, float]:
    """(a, b) of T = a·α + b·n·β for `algorithm` on `ranks` ranks."""
    if ranks < 1:
        raise ValueError(_("ranks must be 1 or more, not {ranks}").format(ranks=ranks))
    if algorithm == "recursive_doubling":
        steps = math.log2(ranks)
        return steps, steps
    if algorithm == "ring":
        return 2 * (ranks - 1), 2 * (ranks - 1) / ranks
    raise ValueError(
        _("no cost model for {algorithm}; one of {algorithms}").format(
            algorithm=repr(algorithm), algorithms=i18n.listed(ALGORITHMS)
        )
    )


def allreduce_seconds(
    algorithm: str, ranks: int, nbytes: float, alpha: float, beta: float
) -> float:
    """The model's time of one allreduce of `nbytes` bytes on `ranks` ranks."""
    a, b = coefficients(algorithm, ranks)
    return a * alpha + b * nbytes * beta


def fit(
    sizes: Sequence[float], seconds: Sequence[float], algorithm: str, ranks: int
) -> tuple[float, float]:
    """(α, β) that fit measured times best, in relative error: least squares on (model − t)/t.

    The sizes span four orders of magnitude and so do the times: in absolute error the 64 MiB points
    alone would set the fit and α, which only shows in small messages, would be noise (even
    negative). Dividing each row by its measured time weighs every size alike, as the log-log plot
    shows them.
    """
    a, b = coefficients(algorithm, ranks)
    n, t = np.asarray(sizes, dtype=float), np.asarray(seconds, dtype=float)
    if ranks < 2 or len(n) < 2 or len(n) != len(t) or np.any(t <= 0):
        raise ValueError(
            _("the fit needs 2 or more ranks, and 2 or more sizes with one positive time each")
        )
    rows = np.column_stack([np.full_like(n, a), b * n]) / t[:, None]
    (alpha, beta), *_rest = np.linalg.lstsq(rows, np.ones_like(t), rcond=None)
    return float(alpha), float(beta)


def predict_gradient_allreduce(
    model_parameters: int | Sequence[int], algorithm: str, ranks: int, alpha: float, beta: float
) -> float:
    """Seconds to allreduce a model's gradients (4 bytes per parameter): an int is one packed buffer
    (as ChainerMN's pure_nccl and flat communicators send it); a list of the parameter arrays' sizes
    is one allreduce per array (as the naive communicator sends them), each paying the latency."""
    arrays = (
        [model_parameters]
        if isinstance(model_parameters, (int, np.integer))
        else list(model_parameters)
    )
    return sum(
        allreduce_seconds(algorithm, ranks, BYTES_PER_PARAMETER * count, alpha, beta)
        for count in arrays
    )

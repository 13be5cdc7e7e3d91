"""The kit's models of the gradient exchange beyond one allreduce (notebook 05): the references its
checks, its report and the demo compare with. The α–β terms are
course.lessons.step_time.costmodel's.

Parameter server (the Fujitsu study, Yamazaki et al. 2016, §3.1): rank 0 serves and computes like
the others; each of the p − 1 other ranks sends it its n-byte gradient and receives the n-byte
result back. A link carries one message at a time each way, in and out at once.

Bytes in and out of the busiest link: the server's 2(p − 1)·n, a ring rank's 4(p − 1)/p·n (it sends
2(p − 1) chunks of n/p to one neighbour and receives as many from the other): p/2 times more.

    T = 2(p − 1)·(α + n·β)        against the ring's 2(p − 1)·α + 2(p − 1)/p·n·β

The latency terms are the same; the bandwidth term is p times the ring's, not p/2, because a ring
rank receives while it sends, so its time is one direction's bytes, whereas the server can send
the sum only once every gradient has come in: its link's two directions take turns.

Layer-wise overlap (the same study, §4): the backward pass yields the gradients layer by layer, the
last layer's first. Each layer's exchange starts once its gradient is ready and the link has
finished the exchange before it (one link: one exchange at a time). The step's backward and
exchange then end at the last exchange's end instead of after backward + every exchange.

Half-precision gradients: float16 halves the bytes of every exchange, not its latency.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from course import i18n
from course.i18n import _
from course.lessons.step_time import costmodel

PATTERNS = ("parameter_server", "ring")
BYTES_FLOAT16 = 2


def busiest_link_bytes(pattern: str, ranks: int, nbytes: float) -> float:
    """The bytes the busiest rank's link carries, in and out together, in one exchange of an
    n-byte gradient: the server's under a parameter server, any rank's under the ring."""
    if ranks < 1:
        raise ValueError(_("ranks must be 1 or more, not {ranks}").format(ranks=ranks))
    if pattern == "parameter_server":
        return 2 * (ranks - 1) * nbytes
    if pattern == "ring":
        return 4 * (ranks - 1) / ranks * nbytes
    raise ValueError(
        _("no traffic model for {pattern}; one of {patterns}").format(
            pattern=repr(pattern), patterns=i18n.listed(PATTERNS)
        )
    )


def parameter_server_seconds(ranks: int, nbytes: float, alpha: float, beta: float) -> float:
    """The model's time of one parameter-server exchange of an n-byte gradient on `ranks` ranks."""
    if ranks < 1:
        raise ValueError(_("ranks must be 1 or more, not {ranks}").format(ranks=ranks))
    return 2 * (ranks - 1) * (alpha + nbytes * beta)


def overlapped_seconds(backward: Sequence[float], exchange: Sequence[float]) -> float:
    """Seconds from the backward pass's start until the last layer's exchange ends, each layer's
    exchange starting when its gradient is ready and the link is free. Both lists are per layer in
    the order the backward pass reaches them."""
    if len(backward) != len(exchange):
        raise ValueError(
            _(
                "one exchange time per layer: {backward} backward times, {exchange} exchanges"
            ).format(backward=len(backward), exchange=len(exchange))
        )
    ready = link_free = 0.0
    for compute, send in zip(backward, exchange):
        ready += compute
        link_free = max(ready, link_free) + send
    return max(ready, link_free)


def half_precision_saving(ranks: int, parameters: int, alpha: float, beta: float) -> float:
    """Seconds one ring allreduce of `parameters` gradients in one buffer saves in float16 against
    float32: the transfer of half the bytes (the latency stays)."""
    float32 = costmodel.allreduce_seconds(
        "ring", ranks, costmodel.BYTES_PER_PARAMETER * parameters, alpha, beta
    )
    float16 = costmodel.allreduce_seconds("ring", ranks, BYTES_FLOAT16 * parameters, alpha, beta)
    return float32 - float16


# When the exchange dominates (notebook 05's section 4). The allreduce chosen by message size (the
# Fujitsu study, §4: BRD, recursive doubling, for small messages; VHD, halving then doubling, for
# large): the ring pays more latency than recursive doubling, 2(p − 1)·α against log2(p)·α, and
# sends fewer bytes, 2(p − 1)/p·n against log2(p)·n, so it wins above the size where the two meet.
# A multi-node run slower than one node (the Nagoya study: 4 nodes 15.46 s, 1 node 13.59 s): with a
# fixed batch per rank (weak scaling), N ranks do N times one rank's work in a step that is one
# rank's compute plus the ring allreduce of the whole gradient. The exchange's share of a step (the
# Fujitsu study, §4, §7): the allreduce over the step without overlap.


def ring_crossover_bytes(
    ranks: int, ring_alpha: float, ring_beta: float, doubling_alpha: float, doubling_beta: float
) -> float:
    """The message size in bytes above which the ring allreduce is faster than recursive doubling
    on `ranks` ranks, each algorithm with its own fitted α and β: 0.0 when the ring is faster at
    every size, math.inf when no size is large enough for it."""
    ring_a, ring_b = costmodel.coefficients("ring", ranks)
    doubling_a, doubling_b = costmodel.coefficients("recursive_doubling", ranks)
    return size_above(
        ring_a * ring_alpha - doubling_a * doubling_alpha,
        doubling_b * doubling_beta - ring_b * ring_beta,
    )


def size_above(extra_latency: float, saving_per_byte: float) -> float:
    """The size above which an algorithm that costs `extra_latency` seconds more per allreduce and
    `saving_per_byte` seconds less per byte is strictly faster: 0.0 at every size, math.inf at
    none (or only below some size)."""
    if saving_per_byte > 0:
        return max(0.0, extra_latency / saving_per_byte)
    return 0.0 if saving_per_byte == 0 and extra_latency < 0 else math.inf


def weak_scaling_speedup(
    ranks: int, compute_seconds: float, nbytes: float, alpha: float, beta: float
) -> float:
    """Images per second of `ranks` ranks over one rank's, each rank computing `compute_seconds`
    a step on its own batch, then a ring allreduce of the n-byte gradient (no overlap)."""
    exchange = costmodel.allreduce_seconds("ring", ranks, nbytes, alpha, beta)
    return ranks * compute_seconds / (compute_seconds + exchange)


def first_slower(
    rank_counts: Sequence[int], compute_seconds: float, nbytes: float, alpha: float, beta: float
) -> int | None:
    """The fewest ranks of `rank_counts` slower than one rank (speedup below 1), or None."""
    slower = [
        ranks
        for ranks in rank_counts
        if weak_scaling_speedup(ranks, compute_seconds, nbytes, alpha, beta) < 1
    ]
    return min(slower, default=None)


def exchange_share(
    compute_seconds: float, nbytes: float, ranks: int, alpha: float, beta: float
) -> float:
    """The ring allreduce's share of a step of `compute_seconds` compute and the exchange, without
    overlap."""
    exchange = costmodel.allreduce_seconds("ring", ranks, nbytes, alpha, beta)
    return exchange / (compute_seconds + exchange)

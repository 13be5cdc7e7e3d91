"""The kit's models of the gradient exchange beyond one allreduce (notebook 04): the references its
checks, its report and the demo compare with. The α–β terms are course.costmodel's.

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

from collections.abc import Sequence

from course import costmodel

PATTERNS = ("parameter_server", "ring")
BYTES_FLOAT16 = 2


def busiest_link_bytes(pattern: str, ranks: int, nbytes: float) -> float:
    """The bytes the busiest rank's link carries, in and out together, in one exchange of an
    n-byte gradient: the server's under a parameter server, any rank's under the ring."""
    if ranks < 1:
        raise ValueError(f"ranks must be 1 or more, not {ranks}")
    if pattern == "parameter_server":
        return 2 * (ranks - 1) * nbytes
    if pattern == "ring":
        return 4 * (ranks - 1) / ranks * nbytes
    raise ValueError(f"no traffic model for {pattern!r}; one of {', '.join(PATTERNS)}")


def parameter_server_seconds(ranks: int, nbytes: float, alpha: float, beta: float) -> float:
    """The model's time of one parameter-server exchange of an n-byte gradient on `ranks` ranks."""
    if ranks < 1:
        raise ValueError(f"ranks must be 1 or more, not {ranks}")
    return 2 * (ranks - 1) * (alpha + nbytes * beta)


def overlapped_seconds(backward: Sequence[float], exchange: Sequence[float]) -> float:
    """Seconds from the backward pass's start until the last layer's exchange ends, each layer's
    exchange starting when its gradient is ready and the link is free. Both lists are per layer in
    the order the backward pass reaches them."""
    if len(backward) != len(exchange):
        raise ValueError(
            f"one exchange time per layer: {len(backward)} backward times, "
            f"{len(exchange)} exchanges"
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

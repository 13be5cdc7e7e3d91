"""The students' functions that tests/test_exchange_scaling_checks.py runs (notebook 04's exercise
1c and section 4): the solutions (tests.exchange_students loads them), a planted mistake per known
error, and an attack. Module-level defs, as a notebook's are: a Remote handle runs them by name."""

from __future__ import annotations

import math

from course.lessons.exchange import exchangemodel
from tests.exchange_students import SOLVED


def _ring(n_ranks, nbytes, alpha, beta):
    return 2 * (n_ranks - 1) * alpha + 2 * (n_ranks - 1) / n_ranks * nbytes * beta


def _doubling(n_ranks, nbytes, alpha, beta):
    return math.log2(n_ranks) * (alpha + nbytes * beta)


# --- exercise 1c ------------------------------------------------------------------------------


def crossover_alphas_crossed(n_ranks, ring_alpha, ring_beta, doubling_alpha, doubling_beta):
    return SOLVED.ring_crossover_bytes(
        n_ranks, doubling_alpha, ring_beta, ring_alpha, doubling_beta
    )


def crossover_swapped(n_ranks, ring_alpha, ring_beta, doubling_alpha, doubling_beta):
    return SOLVED.ring_crossover_bytes(
        n_ranks, ring_beta, ring_alpha, doubling_beta, doubling_alpha
    )


def crossover_ring_latency_once(n_ranks, ring_alpha, ring_beta, doubling_alpha, doubling_beta):
    steps = math.log2(n_ranks)
    extra = 2 * ring_alpha - steps * doubling_alpha
    saving = steps * doubling_beta - 2 * (n_ranks - 1) / n_ranks * ring_beta
    if saving > 0:
        return max(0.0, extra / saving)
    return 0.0 if saving == 0 and extra < 0 else math.inf


def crossover_doubling_one_step(n_ranks, ring_alpha, ring_beta, doubling_alpha, doubling_beta):
    extra = 2 * (n_ranks - 1) * ring_alpha - doubling_alpha
    saving = doubling_beta - 2 * (n_ranks - 1) / n_ranks * ring_beta
    if saving > 0:
        return max(0.0, extra / saving)
    return 0.0 if saving == 0 and extra < 0 else math.inf


def crossover_reversed(n_ranks, ring_alpha, ring_beta, doubling_alpha, doubling_beta):
    # the size above which recursive doubling is faster
    extra = _doubling(n_ranks, 0, doubling_alpha, 0) - _ring(n_ranks, 0, ring_alpha, 0)
    saving = _ring(n_ranks, 1, 0, ring_beta) - _doubling(n_ranks, 1, 0, doubling_beta)
    if saving > 0:
        return max(0.0, extra / saving)
    return 0.0 if saving == 0 and extra < 0 else math.inf


def crossover_raw_ratio(n_ranks, ring_alpha, ring_beta, doubling_alpha, doubling_beta):
    steps = math.log2(n_ranks)
    extra = 2 * (n_ranks - 1) * ring_alpha - steps * doubling_alpha
    saving = steps * doubling_beta - 2 * (n_ranks - 1) / n_ranks * ring_beta
    return extra / saving if saving else math.inf


def crossover_none(n_ranks, ring_alpha, ring_beta, doubling_alpha, doubling_beta):
    found = SOLVED.ring_crossover_bytes(
        n_ranks, ring_alpha, ring_beta, doubling_alpha, doubling_beta
    )
    return None if found in (0.0, math.inf) else found


# --- exercise 4a ------------------------------------------------------------------------------


def speedup_strong(n_ranks, compute_seconds, gradient_bytes, alpha, beta):
    return compute_seconds / (
        compute_seconds / n_ranks + _ring(n_ranks, gradient_bytes, alpha, beta)
    )


def speedup_bytes_per_rank(n_ranks, compute_seconds, gradient_bytes, alpha, beta):
    exchange = _ring(n_ranks, gradient_bytes / n_ranks, alpha, beta)
    return n_ranks * compute_seconds / (compute_seconds + exchange)


def speedup_whole_bytes(n_ranks, compute_seconds, gradient_bytes, alpha, beta):
    exchange = 2 * (n_ranks - 1) * alpha + 2 * gradient_bytes * beta
    return n_ranks * compute_seconds / (compute_seconds + exchange)


def speedup_is_efficiency(n_ranks, compute_seconds, gradient_bytes, alpha, beta):
    return compute_seconds / (compute_seconds + _ring(n_ranks, gradient_bytes, alpha, beta))


def speedup_doubling(n_ranks, compute_seconds, gradient_bytes, alpha, beta):
    exchange = _doubling(n_ranks, gradient_bytes, alpha, beta)
    return n_ranks * compute_seconds / (compute_seconds + exchange)


def speedup_swapped(n_ranks, compute_seconds, gradient_bytes, alpha, beta):
    return SOLVED.weak_scaling_speedup(n_ranks, compute_seconds, gradient_bytes, beta, alpha)


def speedup_from_the_kit(n_ranks, compute_seconds, gradient_bytes, alpha, beta):
    return exchangemodel.weak_scaling_speedup(n_ranks, compute_seconds, gradient_bytes, alpha, beta)


def _speedups(rank_counts, *run):
    return [(n, SOLVED.weak_scaling_speedup(n, *run)) for n in rank_counts]


def first_at_or_below_one(rank_counts, compute_seconds, gradient_bytes, alpha, beta):
    run = (compute_seconds, gradient_bytes, alpha, beta)
    return next((n for n, s in _speedups(rank_counts, *run) if s <= 1), None)


def first_most_ranks(rank_counts, compute_seconds, gradient_bytes, alpha, beta):
    run = (compute_seconds, gradient_bytes, alpha, beta)
    return max((n for n, s in _speedups(rank_counts, *run) if s < 1), default=None)


def first_faster(rank_counts, compute_seconds, gradient_bytes, alpha, beta):
    run = (compute_seconds, gradient_bytes, alpha, beta)
    return next((n for n, s in _speedups(rank_counts, *run) if s > 1), None)


def first_position(rank_counts, compute_seconds, gradient_bytes, alpha, beta):
    run = (compute_seconds, gradient_bytes, alpha, beta)
    return next((i for i, (_, s) in enumerate(_speedups(rank_counts, *run)) if s < 1), None)


def first_zero_for_none(rank_counts, compute_seconds, gradient_bytes, alpha, beta):
    found = SOLVED.first_slower(rank_counts, compute_seconds, gradient_bytes, alpha, beta)
    return 0 if found is None else found


def first_as_text(rank_counts, compute_seconds, gradient_bytes, alpha, beta):
    return "none"


# --- exercise 4b ------------------------------------------------------------------------------


def share_over_compute(compute_seconds, gradient_bytes, n_ranks, alpha, beta):
    return _ring(n_ranks, gradient_bytes, alpha, beta) / compute_seconds


def share_of_compute(compute_seconds, gradient_bytes, n_ranks, alpha, beta):
    return 1 - SOLVED.exchange_share(compute_seconds, gradient_bytes, n_ranks, alpha, beta)


def share_bytes_per_rank(compute_seconds, gradient_bytes, n_ranks, alpha, beta):
    return SOLVED.exchange_share(compute_seconds, gradient_bytes / n_ranks, n_ranks, alpha, beta)


def share_doubling(compute_seconds, gradient_bytes, n_ranks, alpha, beta):
    exchange = _doubling(n_ranks, gradient_bytes, alpha, beta)
    return exchange / (compute_seconds + exchange)


def share_swapped(compute_seconds, gradient_bytes, n_ranks, alpha, beta):
    return SOLVED.exchange_share(compute_seconds, gradient_bytes, n_ranks, beta, alpha)

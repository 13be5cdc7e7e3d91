"""Checks of notebook 05's section 4, when the exchange dominates:

    ring_crossover_bytes(n_ranks, ring_alpha, ring_beta, doubling_alpha, doubling_beta) -> bytes
    weak_scaling_speedup(n_ranks, compute_seconds, gradient_bytes, alpha, beta) -> speedup
    first_slower(rank_counts, compute_seconds, gradient_bytes, alpha, beta) -> ranks or None
    exchange_share(compute_seconds, gradient_bytes, n_ranks, alpha, beta) -> share of the step

As the exchange checks (course.lessons.exchange.exchange) do: the observer runs the student's
function with the kit's models closed and returns its numbers; the judge compares them with the
kit's models (course.lessons.exchange.exchangemodel) on the lesson's cases, the hidden test's and
cases drawn at
random, and names a known mistake (course.lessons.exchange.exchange_scaling_mistakes).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import course.lessons.exchange.exchange_observers as observers
import course.lessons.exchange.exchange_scaling_mistakes as mistakes
from course.i18n import _
from course.lessons.exchange import exchangemodel
from course.lessons.exchange.exchange import drawn_rates, judge, observed_count, shown_value
from course.notebook.checks.observe import number, observe
from course.notebook.checks.verdict import expect, fail, passed

_DRAW = random.SystemRandom()

# (ranks, ring α, ring β, recursive doubling's α, β): the same α on 8 ranks; 2 ranks, where
# both send the whole vector once and the ring never wins; a ring of far lower latency, faster at
# every size; a ring whose bytes cost 4 times more, never faster for large messages; 64 ranks.
CROSSOVER_CASES = (
    (8, 5e-6, 1e-9, 5e-6, 2e-9),
    (2, 5e-6, 1e-9, 5e-6, 1e-9),
    (16, 1e-7, 1e-9, 2e-5, 1e-9),
    (4, 2e-6, 4e-9, 2e-6, 1e-9),
    (64, 3e-6, 2e-10, 1e-6, 5e-10),
)
# (ranks, compute seconds a step, gradient bytes, α, β)
SPEEDUP_CASES = (
    (4, 0.05, 4e7, 5e-6, 1e-9),
    (16, 0.2, 1e8, 2e-6, 1e-10),
    (2, 0.004, 1e7, 1e-5, 1e-9),
    (1, 0.1, 1e6, 5e-6, 1e-9),
)
# (rank counts, compute seconds, gradient bytes, α, β): slower on 2 and 4 ranks, faster on 8 and
# 16; the same with one rank in the list; never slower; slower on 4 ranks only.
FIRST_SLOWER_CASES = (
    ([2, 4, 8, 16], 0.004, 1e7, 1e-5, 1e-9),
    ([1, 2, 4, 8, 16, 32], 0.004, 1e7, 1e-5, 1e-9),
    ([2, 4, 8], 0.5, 1e6, 5e-6, 1e-9),
    ([1, 4, 16, 64], 0.01, 4e7, 2e-6, 1e-9),
)
# (compute seconds, gradient bytes, ranks, α, β)
SHARE_CASES = (
    (0.1, 1e6, 4, 5e-6, 1e-9),
    (0.02, 1e8, 16, 2e-6, 1e-10),
    (1.0, 4e6, 2, 1e-5, 4e-10),
    (0.05, 1e7, 1, 5e-6, 1e-9),
)


def crossover(
    ring_crossover_bytes: Callable[..., Any],
    cases: Iterable[tuple[int, float, float, float, float]] = CROSSOVER_CASES,
) -> None:
    """ring_crossover_bytes gives the size above which the ring beats recursive doubling."""
    __tracebackhide__ = True
    drawn = [(2 ** _DRAW.randint(2, 8), *drawn_rates(), *drawn_rates()) for _ in range(2)]
    count = judge(
        ring_crossover_bytes,
        [*cases, *drawn],
        exchangemodel.ring_crossover_bytes,
        mistakes.crossover(),
        _("bytes"),
        _(
            "write each algorithm's time with its own alpha and beta, and ask for which sizes the "
            "ring's is the smaller: what happens when the ring's latency is lower, or its bytes "
            "cost more?"
        ),
    )
    passed(
        _(
            "ring_crossover_bytes: matches the kit's model in {count} cases, 2 drawn at random"
        ).format(count=count)
    )


def _drawn_run() -> tuple[float, float, float, float]:
    return (_DRAW.uniform(0.001, 1.0), float(_DRAW.randint(10**5, 10**9)), *drawn_rates())


def slowdown(
    weak_scaling_speedup: Callable[..., Any],
    first_slower: Callable[..., Any],
    cases: Iterable[tuple[int, float, float, float, float]] = SPEEDUP_CASES,
    counts: Iterable[tuple[Sequence[int], float, float, float, float]] = FIRST_SLOWER_CASES,
) -> None:
    """weak_scaling_speedup gives the model's speedup of p ranks over one, and first_slower the
    fewest ranks of a list that are slower than one."""
    __tracebackhide__ = True
    count = judge(
        weak_scaling_speedup,
        [*cases, (_DRAW.randint(2, 256), *_drawn_run())],
        exchangemodel.weak_scaling_speedup,
        mistakes.speedup(),
        # TRANSLATORS: the unit of a speedup, after a number ("1.5 times").
        _("times"),
        _("compare the images a step of p ranks trains, and its time, with one rank's"),
    )
    every: list[tuple[Any, ...]] = [
        (list(r), *run) for r, *run in [*counts, ([1, 2, 4, 8, 16, 32, 64], *_drawn_run())]
    ]
    facts = observe(observers.values, first_slower, cases=[list(case) for case in every])
    if len(facts) != len(every):
        fail(observed_count(first_slower.__name__, len(facts), len(every)))
    for case, fact in zip(every, facts):
        expected = exchangemodel.first_slower(*case)
        shown = "{name}({args})".format(
            name=first_slower.__name__, args=", ".join(shown_value(arg) for arg in case)
        )
        none = fact["type"] == "NoneType"
        value = None if none else number(fact["value"])
        if value is None and not none:
            fail(
                _("{shown} returned {kind}, not a number of ranks or None").format(
                    shown=shown, kind=fact["type"]
                )
            )
        expect(
            mistakes.same_count(value, expected),
            # TRANSLATORS: {value} and {expected} are rank counts or None.
            _("{shown} returned {value}, which is not the model's answer").format(
                shown=shown, value="None" if value is None else f"{value:g}"
            ),
            mistakes.count_diagnosis(value, expected, mistakes.first_slower(), case)
            or _(
                "compute the speedup of each rank count of the list and keep the fewest ranks "
                "below 1; None when there is none"
            ),
        )
    passed(
        _(
            "weak_scaling_speedup and first_slower: match the kit's model in {count} and "
            "{counted} cases, 2 drawn at random"
        ).format(count=count, counted=len(every))
    )


def share(
    exchange_share: Callable[..., Any],
    cases: Iterable[tuple[float, float, int, float, float]] = SHARE_CASES,
) -> None:
    """exchange_share gives the ring allreduce's share of a step without overlap."""
    __tracebackhide__ = True
    compute, nbytes, *rates = _drawn_run()
    count = judge(
        exchange_share,
        [*cases, (compute, nbytes, _DRAW.randint(2, 256), *rates)],
        exchangemodel.exchange_share,
        mistakes.share(),
        # TRANSLATORS: the unit of a share, after a number ("0.25 parts of a step").
        _("parts of a step"),
        _(
            "a step without overlap is the compute, then the ring allreduce of the whole "
            "gradient: what part of it is the exchange?"
        ),
    )
    passed(
        _("exchange_share: matches the kit's model in {count} cases, 1 drawn at random").format(
            count=count
        )
    )

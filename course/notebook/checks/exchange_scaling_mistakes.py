"""The mistakes the checks of notebook 04's section 4 (course.notebook.checks.exchange_scaling)
recognise, per exercise: computed by the judge with the kit's models (course.exchangemodel,
course.costmodel), never with the student's functions. Each is (what it is, a model that makes it,
on the case), as course.notebook.checks.exchange_mistakes has them, each table built in the
student's language when a check asks."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from course import costmodel, exchangemodel
from course.i18n import _
from course.notebook.checks.exchange_mistakes import Mistake, looks_like


def _ring(p: int, n: float, al: float, be: float) -> float:
    return costmodel.allreduce_seconds("ring", p, n, al, be)


def _doubling(p: int, n: float, al: float, be: float) -> float:
    return costmodel.allreduce_seconds("recursive_doubling", p, n, al, be)


def _terms(p: int, ra: float, rb: float, da: float, db: float) -> tuple[float, float]:
    """(the ring's extra latency, its saving per byte) against recursive doubling."""
    return _ring(p, 0, ra, rb) - _doubling(p, 0, da, db), _doubling(p, 1, 0, db) - _ring(
        p, 1, 0, rb
    )


def _raw_ratio(p: int, ra: float, rb: float, da: float, db: float) -> float:
    extra, saving = _terms(p, ra, rb, da, db)
    return extra / saving if saving else math.nan


def crossover() -> tuple[Mistake, ...]:
    """ring_crossover_bytes's known mistakes, named in the student's language."""
    return (
        (
            _(
                "each algorithm's alpha went to the other: the ring's latency is ring_alpha, "
                "recursive doubling's doubling_alpha"
            ),
            lambda p, ra, rb, da, db: exchangemodel.ring_crossover_bytes(p, da, rb, ra, db),
        ),
        (
            _("alpha and beta are swapped"),
            lambda p, ra, rb, da, db: exchangemodel.ring_crossover_bytes(p, rb, ra, db, da),
        ),
        (
            _("the ring's latency is counted once: it pays alpha at each of its 2(p - 1) steps"),
            lambda p, ra, rb, da, db: exchangemodel.size_above(
                2 * ra - math.log2(p) * da, math.log2(p) * db - _ring(p, 1, 0, rb)
            ),
        ),
        (
            _(
                "recursive doubling is counted as one step: it takes log2(p) steps, each paying "
                "alpha and sending the whole vector"
            ),
            lambda p, ra, rb, da, db: exchangemodel.size_above(
                _ring(p, 0, ra, rb) - da, db - _ring(p, 1, 0, rb)
            ),
        ),
        (
            _(
                "the comparison is turned round: that is the size above which recursive doubling "
                "is the faster one"
            ),
            lambda p, ra, rb, da, db: exchangemodel.size_above(
                *(-term for term in _terms(p, ra, rb, da, db))
            ),
        ),
        (
            _(
                "the size where the two times meet is the answer only when the ring wins above it: "
                "look at the signs of the latency the ring pays more and of what it saves per byte"
            ),
            _raw_ratio,
        ),
    )


def speedup() -> tuple[Mistake, ...]:
    """weak_scaling_speedup's known mistakes, named in the student's language."""
    return (
        (
            _(
                "this is strong scaling, one batch split over the ranks: here every rank keeps its "
                "own batch, so p ranks do p times one rank's work in a step"
            ),
            lambda p, c, n, al, be: c / (c / p + _ring(p, n, al, be)),
        ),
        (
            _(
                "each rank's share of the gradient is allreduced: every rank holds the whole "
                "gradient, and the ring's own formula already splits it into p chunks"
            ),
            lambda p, c, n, al, be: p * c / (c + _ring(p, n / p, al, be)),
        ),
        (
            _("the ring sends 2(p-1)/p of the gradient's bytes, not twice all of them"),
            lambda p, c, n, al, be: p * c / (c + _ring(p, 0, al, be) + 2 * n * be),
        ),
        (
            _(
                "this is the efficiency, the speedup divided by p: p ranks do p times one rank's "
                "work"
            ),
            lambda p, c, n, al, be: c / (c + _ring(p, n, al, be)),
        ),
        (
            _("this is recursive doubling's time: the exercise's exchange is the ring allreduce"),
            lambda p, c, n, al, be: p * c / (c + _doubling(p, n, al, be)),
        ),
        (
            _("alpha and beta are swapped"),
            lambda p, c, n, al, be: exchangemodel.weak_scaling_speedup(p, c, n, be, al),
        ),
    )


def _speedups(ranks: Sequence[int], c: float, n: float, al: float, be: float) -> list[float]:
    return [exchangemodel.weak_scaling_speedup(p, c, n, al, be) for p in ranks]


Count = tuple[str, Callable[..., int | None]]  # a mistake of first_slower: a rank count, or None


def first_slower() -> tuple[Count, ...]:
    """first_slower's known mistakes, named in the student's language."""
    return (
        (
            _("a speedup of exactly 1 counts as slower: one rank's own speedup is 1, not below it"),
            lambda ranks, *run: min(
                (p for p, s in zip(ranks, _speedups(ranks, *run)) if s <= 1), default=None
            ),
        ),
        (
            _("that is the most ranks still slower than one, not the fewest"),
            lambda ranks, *run: max(
                (p for p, s in zip(ranks, _speedups(ranks, *run)) if s < 1), default=None
            ),
        ),
        (
            _("that is the fewest ranks faster than one: the question is the first slower"),
            lambda ranks, *run: min(
                (p for p, s in zip(ranks, _speedups(ranks, *run)) if s > 1), default=None
            ),
        ),
        (
            _("that is a position in the list: return the rank count itself"),
            lambda ranks, *run: next(
                (i for i, s in enumerate(_speedups(ranks, *run)) if s < 1), None
            ),
        ),
    )


def share() -> tuple[Mistake, ...]:
    """exchange_share's known mistakes, named in the student's language."""
    return (
        (
            _(
                "that is the exchange over the compute: its share is over the whole step, compute "
                "and exchange together"
            ),
            lambda c, n, p, al, be: _ring(p, n, al, be) / c,
        ),
        (
            _("that is the compute's share of the step, not the exchange's"),
            lambda c, n, p, al, be: c / (c + _ring(p, n, al, be)),
        ),
        (
            _(
                "each rank's share of the gradient is allreduced: every rank holds the whole "
                "gradient, and the ring's own formula already splits it into p chunks"
            ),
            lambda c, n, p, al, be: exchangemodel.exchange_share(c, n / p, p, al, be),
        ),
        (
            _("this is recursive doubling's time: the exercise's exchange is the ring allreduce"),
            lambda c, n, p, al, be: _doubling(p, n, al, be) / (c + _doubling(p, n, al, be)),
        ),
        (
            _("alpha and beta are swapped"),
            lambda c, n, p, al, be: exchangemodel.exchange_share(c, n, p, be, al),
        ),
    )


def same_count(value: float | None, right: float | None) -> bool:
    """Whether a student's rank count (a float from the facts, or None) is the expected one."""
    return value == right if value is None or right is None else math.isclose(value, right)


def count_diagnosis(
    value: float | None, right: int | None, mistakes: tuple[Count, ...], case: Sequence
) -> str:
    """The known mistake a rank count (or None) matches on `case`, or '' when it matches none."""
    for what, model in mistakes:
        wrong = model(*case)
        if same_count(value, wrong) and not same_count(wrong, right):
            return looks_like(what)
    return ""

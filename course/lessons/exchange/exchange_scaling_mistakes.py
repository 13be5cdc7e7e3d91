"""The mistakes the checks of notebook 05's section 4 (course.lessons.exchange.exchange_scaling)
recognise, per exercise: computed by the judge with the kit's models
(course.lessons.exchange.exchangemodel,
course.lessons.step_time.costmodel), never with the student's functions. Each is (what it is, a
model that makes it,
on the case), as course.lessons.exchange.exchange_mistakes has them, each table built in the
student's language when a check asks."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from course.i18n import _
from course.lessons.exchange import exchangemodel
from course.lessons.exchange.exchange_mistakes import Mistake, looks_like
from course.lessons.step_time import costmodel


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
            _("your size grows when the ring's own latency falls"),
            lambda p, ra, rb, da, db: exchangemodel.ring_crossover_bytes(p, da, rb, ra, db),
        ),
        (
            _(
                "the units of your answer are off: alpha is seconds per message and beta seconds "
                "per byte; check which one your bytes are multiplied by"
            ),
            lambda p, ra, rb, da, db: exchangemodel.ring_crossover_bytes(p, rb, ra, db, da),
        ),
        (
            _(
                "your ring's latency does not grow with the ranks: how many steps does a ring "
                "allreduce take on 4 ranks, on 8?"
            ),
            lambda p, ra, rb, da, db: exchangemodel.size_above(
                2 * ra - math.log2(p) * da, math.log2(p) * db - _ring(p, 1, 0, rb)
            ),
        ),
        (
            _(
                "your recursive doubling costs the same on 4 ranks as on 64: how many steps does "
                "it take?"
            ),
            lambda p, ra, rb, da, db: exchangemodel.size_above(
                _ring(p, 0, ra, rb) - da, db - _ring(p, 1, 0, rb)
            ),
        ),
        (
            _(
                "above your size, recursive doubling is the faster: work out both times by hand at "
                "a size twice yours"
            ),
            lambda p, ra, rb, da, db: exchangemodel.size_above(
                *(-term for term in _terms(p, ra, rb, da, db))
            ),
        ),
        (
            _(
                "that is where the two times meet, but here the ring does not win above it: "
                "compare both times by hand far above that size"
            ),
            _raw_ratio,
        ),
    )


def speedup() -> tuple[Mistake, ...]:
    """weak_scaling_speedup's known mistakes, named in the student's language."""
    return (
        (
            _(
                "your ranks share one batch (strong scaling); here every rank keeps a batch of its "
                "own"
            ),
            lambda p, c, n, al, be: c / (c / p + _ring(p, n, al, be)),
        ),
        (
            _(
                "your exchange's bytes shrink as ranks are added: does each rank hold less of the "
                "gradient on more ranks?"
            ),
            lambda p, c, n, al, be: p * c / (c + _ring(p, n / p, al, be)),
        ),
        (
            _("work out a ring of 2 ranks by hand: how many bytes does a rank send?"),
            lambda p, c, n, al, be: p * c / (c + _ring(p, 0, al, be) + 2 * n * be),
        ),
        (
            _("your speedup never exceeds 1, even when the exchange costs nothing"),
            lambda p, c, n, al, be: c / (c + _ring(p, n, al, be)),
        ),
        (
            _("this is recursive doubling's time: the exercise's exchange is the ring allreduce"),
            lambda p, c, n, al, be: p * c / (c + _doubling(p, n, al, be)),
        ),
        (
            _(
                "the units of your answer are off: alpha is seconds per message and beta seconds "
                "per byte; check which one your bytes are multiplied by"
            ),
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
            _("check a rank count whose speedup is exactly 1: is it slower than one rank?"),
            lambda ranks, *run: min(
                (p for p, s in zip(ranks, _speedups(ranks, *run)) if s <= 1), default=None
            ),
        ),
        (
            _("that is the most ranks still slower than one"),
            lambda ranks, *run: max(
                (p for p, s in zip(ranks, _speedups(ranks, *run)) if s < 1), default=None
            ),
        ),
        (
            _("that rank count is faster than one rank"),
            lambda ranks, *run: min(
                (p for p, s in zip(ranks, _speedups(ranks, *run)) if s > 1), default=None
            ),
        ),
        (
            _("that is a position in the list: what does the question ask for?"),
            lambda ranks, *run: next(
                (i for i, s in enumerate(_speedups(ranks, *run)) if s < 1), None
            ),
        ),
    )


def share() -> tuple[Mistake, ...]:
    """exchange_share's known mistakes, named in the student's language."""
    return (
        (
            _("your share is not of the whole step: it can exceed 1"),
            lambda c, n, p, al, be: _ring(p, n, al, be) / c,
        ),
        (
            _("your share falls as the exchange grows"),
            lambda c, n, p, al, be: c / (c + _ring(p, n, al, be)),
        ),
        (
            _(
                "your exchange's bytes shrink as ranks are added: does each rank hold less of the "
                "gradient on more ranks?"
            ),
            lambda c, n, p, al, be: exchangemodel.exchange_share(c, n / p, p, al, be),
        ),
        (
            _("this is recursive doubling's time: the exercise's exchange is the ring allreduce"),
            lambda c, n, p, al, be: _doubling(p, n, al, be) / (c + _doubling(p, n, al, be)),
        ),
        (
            _(
                "the units of your answer are off: alpha is seconds per message and beta seconds "
                "per byte; check which one your bytes are multiplied by"
            ),
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

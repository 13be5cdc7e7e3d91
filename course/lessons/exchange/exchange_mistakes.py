"""The mistakes the exchange checks (course.lessons.exchange.exchange) recognise, per exercise, and
the hint that names the one a wrong number matches, in the student's language (each table is
built when a check asks, so COURSE_LANG is read then): computed by the judge with the kit's models
(course.lessons.exchange.exchangemodel, course.lessons.step_time.costmodel), never with the
student's functions."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from course.i18n import _
from course.lessons.exchange import exchangemodel
from course.lessons.step_time import costmodel
from course.lessons.step_time.allreduce_mistakes import close

Mistake = tuple[str, Callable[..., float]]  # (what it is, a model that makes it, on the case)


def looks_like(what: str) -> str:
    """The hint that names a known mistake (`what`, already in the student's language)."""
    # TRANSLATORS: {mistakes} is one known mistake, or several joined ("A; or B").
    return _("it looks like {mistakes}").format(mistakes=what)


def _ring(p: int, n: float, al: float, be: float) -> float:
    return costmodel.allreduce_seconds("ring", p, n, al, be)


def _only(pattern: str, wrong: Callable[[int, float], float]) -> Callable[..., float]:
    """A traffic mistake made on one pattern's count: wrong(p, n) on its cases, the kit's count on
    the other pattern's."""

    def model(case: str, p: int, n: float) -> float:
        return wrong(p, n) if case == pattern else exchangemodel.busiest_link_bytes(case, p, n)

    return model


def traffic() -> tuple[Mistake, ...]:
    """exchange_traffic's known mistakes, named in the student's language."""
    return (
        (
            _("your count for the server covers one direction of its link only"),
            _only("parameter_server", lambda p, n: (p - 1) * n),
        ),
        (
            _("your count for a ring rank covers one direction of its link only"),
            _only("ring", lambda p, n: 2 * (p - 1) / p * n),
        ),
        (
            _(
                "your count is not 0 on 1 rank, where nothing is exchanged: who sends to the "
                "server?"
            ),
            _only("parameter_server", lambda p, n: 2 * p * n),
        ),
        (
            _(
                "your ring count keeps growing with the ranks: does a ring rank send more on 64 "
                "ranks than on 8?"
            ),
            _only("ring", lambda p, n: 4 * (p - 1) * n),
        ),
        (
            _("that is more than one link carries: the question is the busiest one link"),
            lambda pattern, p, n: p * exchangemodel.busiest_link_bytes(pattern, p, n),
        ),
    )


def parameter_server() -> tuple[Mistake, ...]:
    """parameter_server_time's known mistakes, named in the student's language."""
    return (
        (
            _("your time covers one direction of the server's link only"),
            lambda p, n, al, be: (p - 1) * (al + n * be),
        ),
        (
            _("your time is not 0 on 1 rank, where a server alone exchanges nothing"),
            lambda p, n, al, be: 2 * p * (al + n * be),
        ),
        (
            _(
                "your time is the same on 2 ranks as on 64: does the server's link carry more "
                "messages when there are more ranks?"
            ),
            lambda p, n, al, be: 2 * (al + n * be),
        ),
        (
            _(
                "the units of your answer are off: alpha is seconds per message and beta seconds "
                "per byte; check which one your bytes are multiplied by"
            ),
            lambda p, n, al, be: exchangemodel.parameter_server_seconds(p, n, be, al),
        ),
        (
            _(
                "your time grows with the ranks far more slowly than the server's traffic: what "
                "crosses the server's link on 64 ranks?"
            ),
            _ring,
        ),
    )


def _link_per_layer(backward: Sequence[float], exchange: Sequence[float]) -> float:
    ready, ends = 0.0, []
    for compute, send in zip(backward, exchange):
        ready += compute
        ends.append(ready + send)
    return max([ready, *ends])


def overlap() -> tuple[Mistake, ...]:
    """overlapped_backward's known mistakes, named in the student's language."""
    return (
        (
            _(
                "your time is as long as with no overlap at all: can no exchange run during the "
                "backward?"
            ),
            lambda b, c: sum(b) + sum(c),
        ),
        (
            _(
                "your time is shorter than the timeline allows: can a layer's exchange start "
                "before its gradient is ready?"
            ),
            lambda b, c: max(sum(b), sum(c)),
        ),
        (
            _(
                "your layers wait for each other's exchanges: does the next layer's backward wait "
                "for this layer's exchange?"
            ),
            lambda b, c: sum(max(x, y) for x, y in zip(b, c)),
        ),
        (
            _("your exchanges overlap each other: how many can one link carry at once?"),
            _link_per_layer,
        ),
        (
            _("check the order: which layer does the backward pass reach first?"),
            lambda b, c: exchangemodel.overlapped_seconds(b[::-1], c[::-1]),
        ),
    )


def half_precision() -> tuple[Mistake, ...]:
    """half_precision_saving's known mistakes, named in the student's language."""
    return (
        (
            _("your saving grows with alpha: does float16 change how many messages are sent?"),
            lambda p, k, al, be: _ring(p, costmodel.BYTES_PER_PARAMETER * k, al, be) / 2,
        ),
        (
            _("your saving is too small for the parameters given: how many bytes is a parameter?"),
            lambda p, k, al, be: _ring(p, k, al, be) - _ring(p, k / 2, al, be),
        ),
        (
            _("your saving is as large as sending no bytes at all: does float16 send nothing?"),
            lambda p, k, al, be: (
                _ring(p, costmodel.BYTES_PER_PARAMETER * k, al, be) - _ring(p, 0, al, be)
            ),
        ),
        (
            _("your saving is larger than the bytes allow: what unit is beta per?"),
            lambda p, k, al, be: 8 * exchangemodel.half_precision_saving(p, k, al, be),
        ),
        (
            _(
                "the units of your answer are off: alpha is seconds per message and beta seconds "
                "per byte; check which one your bytes are multiplied by"
            ),
            lambda p, k, al, be: exchangemodel.half_precision_saving(p, k, be, al),
        ),
    )


def diagnosis(
    value: float, right: float, mistakes: tuple[Mistake, ...], case: Sequence[Any]
) -> str:
    """The known mistake `value` matches on `case`, or '' when it matches none."""
    for what, model in mistakes:
        wrong = model(*case)
        if close(value, wrong) and not close(wrong, right):
            return looks_like(what)
    return ""

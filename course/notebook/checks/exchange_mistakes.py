"""The mistakes the exchange checks (course.notebook.checks.exchange) recognise, per exercise, and
the hint that names the one a wrong number matches, in the student's language (each table is
built when a check asks, so COURSE_LANG is read then): computed by the judge with the kit's models
(course.exchangemodel, course.costmodel), never with the student's functions."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from course import costmodel, exchangemodel
from course.i18n import _
from course.notebook.checks.allreduce_mistakes import close

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
            _(
                "the server's link carries only the gradients coming in: the results go back out "
                "through it too"
            ),
            _only("parameter_server", lambda p, n: (p - 1) * n),
        ),
        (
            _(
                "a ring rank's link carries only what it sends: the chunks it receives from its "
                "other neighbour come in through it too"
            ),
            _only("ring", lambda p, n: 2 * (p - 1) / p * n),
        ),
        (
            _(
                "rank 0 counts itself: the server computes a gradient too and sends nothing to "
                "itself, so only the other ranks' messages cross its link"
            ),
            _only("parameter_server", lambda p, n: 2 * p * n),
        ),
        (
            _("each ring step moves one p-th of the gradient, not all of it"),
            _only("ring", lambda p, n: 4 * (p - 1) * n),
        ),
        (
            _("that is the bytes of all links together: the question is the busiest one link"),
            lambda pattern, p, n: p * exchangemodel.busiest_link_bytes(pattern, p, n),
        ),
    )


def parameter_server() -> tuple[Mistake, ...]:
    """parameter_server_time's known mistakes, named in the student's language."""
    return (
        (
            _(
                "only the gradients' way in is counted: every rank also receives the result back "
                "through the server's link"
            ),
            lambda p, n, al, be: (p - 1) * (al + n * be),
        ),
        (
            _(
                "rank 0 counts itself: it is the server, so only the other ranks exchange messages "
                "with it"
            ),
            lambda p, n, al, be: 2 * p * (al + n * be),
        ),
        (
            _(
                "the messages do not cross the server's link at once: it has one link, so they "
                "take turns and their times add up"
            ),
            lambda p, n, al, be: 2 * (al + n * be),
        ),
        (
            _("alpha and beta are swapped"),
            lambda p, n, al, be: exchangemodel.parameter_server_seconds(p, n, be, al),
        ),
        (
            _(
                "this is the ring allreduce's time: the server's link carries every rank's bytes, "
                "a ring link only about 2n each way"
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
                "nothing overlaps: backward then every exchange, one after the other, is the step "
                "without overlap"
            ),
            lambda b, c: sum(b) + sum(c),
        ),
        (
            _(
                "that is the ideal bound, as if every exchange could run at any time: a layer's "
                "exchange cannot start before its gradient is ready"
            ),
            lambda b, c: max(sum(b), sum(c)),
        ),
        (
            _(
                "layers are taken one at a time, the next waiting for the slower of this layer's "
                "backward and exchange: the next layer's backward does not wait for an exchange"
            ),
            lambda b, c: sum(max(x, y) for x, y in zip(b, c)),
        ),
        (
            _(
                "the exchanges run side by side: there is one link, so an exchange also waits for "
                "the one before it to finish"
            ),
            _link_per_layer,
        ),
        (
            _(
                "the layers are taken in the opposite order: the lists are in the order the "
                "backward pass reaches them"
            ),
            lambda b, c: exchangemodel.overlapped_seconds(b[::-1], c[::-1]),
        ),
    )


def half_precision() -> tuple[Mistake, ...]:
    """half_precision_saving's known mistakes, named in the student's language."""
    return (
        (
            _("the whole allreduce halves: its latency (alpha per step) stays the same in float16"),
            lambda p, k, al, be: _ring(p, costmodel.BYTES_PER_PARAMETER * k, al, be) / 2,
        ),
        (
            _(
                "the parameters are counted as bytes: a float32 gradient has 4 bytes per "
                "parameter, a float16 one 2"
            ),
            lambda p, k, al, be: _ring(p, k, al, be) - _ring(p, k / 2, al, be),
        ),
        (
            _("that is the whole transfer of the float32 gradient: float16 still sends half of it"),
            lambda p, k, al, be: (
                _ring(p, costmodel.BYTES_PER_PARAMETER * k, al, be) - _ring(p, 0, al, be)
            ),
        ),
        (
            _("the bytes are multiplied by 8 (bits): the model's beta is per byte"),
            lambda p, k, al, be: 8 * exchangemodel.half_precision_saving(p, k, al, be),
        ),
        (
            _("alpha and beta are swapped"),
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

"""Checks of notebook 05's exercises, the gradient exchange up close:

    exchange_traffic(pattern, n_ranks, message_bytes) -> bytes on the busiest link
    parameter_server_time(n_ranks, message_bytes, alpha, beta) -> seconds
    overlapped_backward(backward_seconds, exchange_seconds) -> seconds
    half_precision_saving(n_ranks, n_parameters, alpha, beta) -> seconds

The observer (course.lessons.exchange.exchange_observers) runs the student's function with the kit's
models closed and returns its numbers; the judge here compares them with the kit's models
(course.lessons.exchange.exchangemodel), on the lesson's cases, the hidden test's and cases drawn
at random, and
names a known mistake (course.lessons.exchange.exchange_mistakes) that a wrong number matches.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import course.lessons.exchange.exchange_mistakes as mistakes
import course.lessons.exchange.exchange_observers as observers
from course.i18n import _
from course.lessons.exchange import exchangemodel
from course.lessons.step_time.allreduce_mistakes import close
from course.notebook.checks.observe import number, observe
from course.notebook.checks.verdict import expect, fail, passed

_DRAW = random.SystemRandom()

TRAFFIC_CASES = (
    ("parameter_server", 4, 2**20),
    ("ring", 4, 2**20),
    ("parameter_server", 16, 1000),
    ("ring", 16, 1000),
    ("parameter_server", 1, 2**20),
)
PARAMETER_SERVER_CASES = (
    (4, 2**20, 5e-6, 1e-9),
    (16, 64 * 2**20, 2e-6, 1e-10),
    (2, 4096, 1e-5, 3e-10),
    (1, 2**20, 5e-6, 1e-9),
)
# (backward per layer, exchange per layer), in the order the backward pass reaches the layers: one
# where every known mistake gives its own number, the exchange shorter than the backward, longer,
# one layer's exchange much longer, one layer.
OVERLAP_CASES = (
    ([2.0, 0.5, 1.0, 1.5], [0.25, 1.0, 2.5, 1.5]),
    ([1.0, 1.0, 1.0, 1.0], [0.5, 0.5, 0.5, 0.5]),
    ([1.0, 1.0, 1.0], [2.0, 2.0, 2.0]),
    ([0.2, 3.0, 0.5, 1.0], [4.0, 0.1, 0.1, 0.3]),
    ([2.0], [1.5]),
)
HALF_PRECISION_CASES = (
    (4, 1_000_000, 5e-6, 1e-9),
    (16, 25_000_000, 2e-6, 1e-10),
    (2, 300_000, 1e-5, 4e-10),
    (1, 1_000_000, 5e-6, 1e-9),
)


def observed_count(name: str, observed: int, cases: int) -> str:
    """The failure of an observation that came back with another number of cases than asked."""
    return _("{name} was observed on {found} cases, not {cases}").format(
        name=name, found=observed, cases=cases
    )


def judge(
    function: Callable[..., Any],
    cases: list[tuple[Any, ...]],
    reference: Callable[..., float],
    known: tuple[mistakes.Mistake, ...],
    unit: str,
    hint: str,
) -> int:
    """Judge function(*case) against reference(*case) on every case; the number of cases.
    `unit` and `hint` are in the student's language already."""
    __tracebackhide__ = True
    facts = observe(observers.values, function, cases=[list(case) for case in cases])
    if len(facts) != len(cases):
        fail(observed_count(function.__name__, len(facts), len(cases)))
    for case, fact in zip(cases, facts):
        expected = reference(*case)
        shown = "{name}({args})".format(
            name=function.__name__, args=", ".join(shown_value(value) for value in case)
        )
        value = number(fact["value"])
        if value is None:
            fail(
                # TRANSLATORS: {call} is the call, e.g. exchange_traffic('ring', 4, 1048576);
                # {type} a Python type's name; {unit} a unit (bytes, s, times, parts of a step, a
                # share of the step).
                _("{call} returned {type}, not a number of {unit}").format(
                    call=shown, type=fact["type"], unit=unit
                )
            )
        expect(
            close(value, expected),
            # TRANSLATORS: never the model's number: a student would copy it.
            _("{shown} returned {value:.6g} {unit}, which is not the model's").format(
                shown=shown, value=value, unit=unit
            ),
            mistakes.diagnosis(value, expected, known, case) or hint,
        )
    return len(cases)


def shown_value(value: Any) -> str:
    """A case's argument as a message shows it."""
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, list):
        return "[" + ", ".join(shown_value(item) for item in value) + "]"
    return repr(value)


def drawn_rates() -> tuple[float, float]:
    """An (α, β) drawn at random, from a fast network's to a slow one's."""
    return 10 ** _DRAW.uniform(-7, -4), 10 ** _DRAW.uniform(-11, -8)


def traffic(
    exchange_traffic: Callable[..., Any],
    cases: Iterable[tuple[str, int, int]] = TRAFFIC_CASES,
) -> None:
    """exchange_traffic gives the bytes of the busiest link, for both patterns."""
    __tracebackhide__ = True
    drawn = [
        (pattern, _DRAW.randint(2, 64), _DRAW.randint(1, 2**27))
        for pattern in ("parameter_server", "ring")
    ]
    count = judge(
        exchange_traffic,
        [*cases, *drawn],
        exchangemodel.busiest_link_bytes,
        mistakes.traffic(),
        _("bytes"),
        _(
            "count the messages that cross the busiest rank's link, in and out, and the bytes of "
            "each"
        ),
    )
    passed(
        _(
            "exchange_traffic: both patterns match the kit's model in {count} cases, 2 drawn at "
            "random"
        ).format(count=count)
    )


def parameter_server(
    parameter_server_time: Callable[..., Any],
    cases: Iterable[tuple[int, int, float, float]] = PARAMETER_SERVER_CASES,
) -> None:
    """parameter_server_time gives the model's seconds."""
    __tracebackhide__ = True
    drawn = [(_DRAW.randint(2, 64), _DRAW.randint(1, 2**27), *drawn_rates())]
    count = judge(
        parameter_server_time,
        [*cases, *drawn],
        exchangemodel.parameter_server_seconds,
        mistakes.parameter_server(),
        # TRANSLATORS: the unit of seconds, after a number.
        _("s"),
        _(
            "each message pays alpha once and beta per byte, and the server's link sends or "
            "receives one message at a time: count its messages"
        ),
    )
    passed(
        _(
            "parameter_server_time: matches the kit's model in {count} cases, 1 drawn at random"
        ).format(count=count)
    )


def _drawn_layers() -> tuple[list[float], list[float]]:
    layers = _DRAW.randint(3, 12)
    backward = [round(_DRAW.uniform(0.1, 3.0), 3) for _ in range(layers)]
    exchange = [round(_DRAW.uniform(0.0, 3.0), 3) for _ in range(layers)]
    return backward, exchange


def overlap(
    overlapped_backward: Callable[..., Any],
    cases: Iterable[tuple[Sequence[float], Sequence[float]]] = OVERLAP_CASES,
) -> None:
    """overlapped_backward gives when the last exchange ends, each layer's starting as soon as its
    gradient is ready and the link is free."""
    __tracebackhide__ = True
    every = [(list(b), list(c)) for b, c in [*cases, _drawn_layers(), _drawn_layers()]]
    count = judge(
        overlapped_backward,
        every,
        exchangemodel.overlapped_seconds,
        mistakes.overlap(),
        _("s"),
        _(
            "follow the layers one by one: when is each gradient ready, when is the link free, "
            "and when does each exchange end?"
        ),
    )
    passed(
        _(
            "overlapped_backward: matches the kit's timeline in {count} cases, 2 drawn at random"
        ).format(count=count)
    )


def half_precision(
    half_precision_saving: Callable[..., Any],
    cases: Iterable[tuple[int, int, float, float]] = HALF_PRECISION_CASES,
) -> None:
    """half_precision_saving gives the seconds float16 saves on one ring allreduce."""
    __tracebackhide__ = True
    drawn = [(_DRAW.randint(2, 64), _DRAW.randint(1, 10**8), *drawn_rates())]
    count = judge(
        half_precision_saving,
        [*cases, *drawn],
        exchangemodel.half_precision_saving,
        mistakes.half_precision(),
        _("s"),
        _(
            "compare the ring allreduce of the float32 gradient with that of the float16 one: "
            "which terms change?"
        ),
    )
    passed(
        _(
            "half_precision_saving: matches the kit's model in {count} cases, 1 drawn at random"
        ).format(count=count)
    )

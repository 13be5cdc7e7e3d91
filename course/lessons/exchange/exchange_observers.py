"""What the exchange checks observe of the student's functions of notebook 05: the numbers they
return, as plain facts (course.notebook.checks.observe).

Each call runs with the kit's own models closed (course.lessons.exchange.exchangemodel's, and
course.lessons.step_time.costmodel's as
notebook 04's checks close them), so that a function that hands the work to the kit fails in its
check, by whatever name it reaches it; restored when the call returns.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import course.lessons.step_time.allreduce_observers as allreduce_observers
from course.lessons.exchange import exchangemodel
from course.notebook.checks.verdict import call, closed, real

REFERENCE: tuple[Callable[..., Any], ...] = (
    exchangemodel.busiest_link_bytes,
    exchangemodel.parameter_server_seconds,
    exchangemodel.overlapped_seconds,
    exchangemodel.half_precision_saving,
    exchangemodel.ring_crossover_bytes,
    exchangemodel.size_above,
    exchangemodel.weak_scaling_speedup,
    exchangemodel.first_slower,
    exchangemodel.exchange_share,
)


def _closed(*args: Any, **kwargs: Any) -> Any:
    # The body a reference function has while it is closed; it runs with that function's globals,
    # so it imports what it names (the message in the student's language).
    from course.i18n import _

    raise RuntimeError(
        _(
            "the kit's own exchange model (course.lessons.exchange.exchangemodel) is closed "
            "while your function is "
            "checked: write the model in your function yourself"
        )
    )


@contextlib.contextmanager
def reference_closed() -> Iterator[None]:
    """Within: the kit's exchange and allreduce models raise instead of answering."""
    with closed(REFERENCE, _closed), allreduce_observers.reference_closed():
        yield


def values(function: Callable[..., Any], cases: list[list[Any]]) -> list[dict[str, Any]]:
    """function(*case) on each case: its number as a float (None when it is no number: None
    itself, where an exercise allows it, shows as the type NoneType) and its type's name."""
    facts = []
    for case in cases:
        with reference_closed():
            returned = call(function, *case)
        facts.append({"value": real(returned), "type": type(returned).__name__})
    return facts

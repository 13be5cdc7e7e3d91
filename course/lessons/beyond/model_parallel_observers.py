"""What the model-parallel checks observe of the student's `activation_bytes`, `gradient_bytes` and
`idle_fraction` (course.notebook.checks.observe): the numbers they return, as plain facts.

Each call runs with the kit's own reference (course.lessons.beyond.parallelism) closed, as the
allreduce checks
close the cost model (course.lessons.step_time.allreduce_observers): a function that hands the work
to the kit fails in its check, by whatever name it reaches it; the kernel is left as it was.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from course.lessons.beyond import parallelism
from course.notebook.checks.verdict import call, closed, real

REFERENCE: tuple[Callable[..., Any], ...] = (
    parallelism.activation_bytes,
    parallelism.gradient_bytes,
    parallelism.idle_fraction,
)


def _closed(*args: Any, **kwargs: Any) -> Any:
    # The body a reference function has while it is closed: builtins only (its globals are the
    # reference module's), so it imports what it names (the message in the student's language).
    from course.i18n import _

    raise RuntimeError(
        _(
            "the kit's own model of the two parallelisms (course.lessons.beyond.parallelism) "
            "is closed while "
            "your function is checked: count the bytes and the idle time in your function "
            "yourself"
        )
    )


def reference_closed() -> contextlib.AbstractContextManager[None]:
    """Within: every function of REFERENCE raises `_closed`'s RuntimeError under its own name."""
    return closed(REFERENCE, _closed)


def _number(function: Callable[..., Any], case: list[Any]) -> dict[str, Any]:
    """function(*case) with the reference closed: its value as a float (None when no number)."""
    __tracebackhide__ = True
    arguments = [tuple(a) if isinstance(a, list) else a for a in case]  # a cut shape: a tuple
    with reference_closed():
        returned = call(function, *arguments)
    return {"value": real(returned), "type": type(returned).__name__}


def values(function: Callable[..., Any], cases: list[list[Any]]) -> list[dict[str, Any]]:
    """The function on each case (its arguments, JSON data: a cut shape is a list)."""
    return [_number(function, case) for case in cases]


def traffic(
    activation_bytes: Callable[..., Any],
    gradient_bytes: Callable[..., Any],
    batch: int,
    cut_shape: list[int],
    parameters: int,
    ranks: int,
) -> dict[str, Any]:
    """Both byte counts of one run's setting: the split's and the data-parallel ring's."""
    return {
        "activation": _number(activation_bytes, [batch, cut_shape]),
        "gradient": _number(gradient_bytes, [parameters, ranks]),
    }

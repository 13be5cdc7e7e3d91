"""What the large-batch checks observe of the student's `large_batch_rates` and `lars_local_rate`
(course.notebook.checks.observe): the numbers they return, as plain facts.

Each call runs with the kit's own reference (course.runtime.largebatch) closed, as the
model-parallel
checks close theirs (course.lessons.beyond.model_parallel_observers): a function that hands the
work to the kit fails in its check, by whatever name it reaches it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from course.notebook.checks.verdict import call, closed, real
from course.runtime import largebatch

REFERENCE: tuple[Callable[..., Any], ...] = (
    largebatch.large_batch_rates,
    largebatch.rate_factor,
    largebatch.lars_local_rate,
)


def _closed(*args: Any, **kwargs: Any) -> Any:
    # The body a reference function has while it is closed: builtins only (its globals are the
    # reference module's), so it imports what it names (the message in the student's language).
    from course.i18n import _

    raise RuntimeError(
        _(
            "the kit's own large-batch rules (course.runtime.largebatch) are closed "
            "while your function is "
            "checked: work the rates out in your function yourself"
        )
    )


def reference_closed() -> contextlib.AbstractContextManager[None]:
    """Within: every function of REFERENCE raises `_closed`'s RuntimeError under its own name."""
    return closed(REFERENCE, _closed)


def _described(value: Any) -> dict[str, Any]:
    return {"value": real(value), "type": type(value).__name__}


def rates(function: Callable[..., Any], cases: list[list[Any]]) -> list[dict[str, Any]]:
    """large_batch_rates on each (base_lr, base_batch, batch): the pair it returns, each part a
    number or None (`pair` None when it is not a pair)."""
    found = []
    for case in cases:
        with reference_closed():
            returned = call(function, *case)
        pair = None
        if isinstance(returned, (tuple, list)) and len(returned) == 2:
            pair = [_described(part) for part in returned]
        found.append({"pair": pair, "type": type(returned).__name__})
    return found


def local_rates(function: Callable[..., Any], cases: list[list[Any]]) -> list[dict[str, Any]]:
    """lars_local_rate on each (weight_norm, grad_norm, weight_decay, threshold, eps)."""
    found = []
    for case in cases:
        with reference_closed():
            returned = call(function, *case)
        found.append(_described(returned))
    return found

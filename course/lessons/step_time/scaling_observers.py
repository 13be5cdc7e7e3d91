"""What the scaling checks (course.lessons.step_time.scaling) observe of the student's
`step_shares`,
`run_plan` and `implied_exchange` (notebooks 04 and 06): the numbers in the dict each returns, as
plain facts (course.notebook.checks.observe).

Each call runs with the kit's own reference (course.lessons.step_time.scalingmodel) closed, as the
exchange checks
close theirs: a function that hands the work to the kit fails in its check, by whatever name it
reaches it.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable, Mapping
from typing import Any

from course.lessons.step_time import scalingmodel
from course.notebook.checks.verdict import call, closed, real

REFERENCE: tuple[Callable[..., Any], ...] = (
    scalingmodel.step_shares,
    scalingmodel.run_plan,
    scalingmodel.implied_exchange,
)


def _closed(*args: Any, **kwargs: Any) -> Any:
    # The body a reference function has while it is closed: builtins only (its globals are the
    # reference module's), so it imports the translation itself.
    from course.i18n import _

    raise RuntimeError(
        _(
            "the kit's own scaling arithmetic (course.lessons.step_time.scalingmodel) is closed "
            "while your function "
            "is checked: work the numbers out in your function yourself"
        )
    )


def reference_closed() -> contextlib.AbstractContextManager[None]:
    """Within: every function of REFERENCE raises `_closed`'s RuntimeError under its own name."""
    return closed(REFERENCE, _closed)


def _number(value: Any) -> dict[str, Any]:
    return {"value": real(value), "type": type(value).__name__}


def _fields(returned: Any) -> dict[str, Any] | None:
    """A returned dict's numbers by key, a dict within it by "key/inner key"; None when `returned`
    is no dict."""
    if not isinstance(returned, Mapping):
        return None
    found: dict[str, Any] = {}
    for key, value in returned.items():
        if isinstance(value, Mapping):
            for inner, number in value.items():
                found[f"{key}/{inner}"] = _number(number)
        else:
            found[str(key)] = _number(value)
    return found


def fields(function: Callable[..., Any], cases: list[list[Any]]) -> list[dict[str, Any]]:
    """function(*case) on each case (a copy: the function may change its inputs): the numbers of
    the dict it returns (`fields` None when it returns no dict) and its type's name."""
    facts = []
    for case in cases:
        with reference_closed():
            returned = call(function, *copy.deepcopy(case))
        facts.append({"fields": _fields(returned), "type": type(returned).__name__})
    return facts

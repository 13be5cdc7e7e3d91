"""What the allreduce checks observe of the student's `allreduce_time` and `fit_alpha_beta`
(course.notebook.checks.observe): the numbers they return, as plain facts.

Each call runs with the kit's own cost model closed: the functions that compute the exercise's
answer raise instead, so that a function that hands the work to the kit, by whatever name it reaches
it, fails in its check. It is the function objects' code that is swapped, so every way to them (the
module's attribute, a name imported from it, getattr) reaches the closed one; the code is restored
when the call returns, and the notebook's kernel is left as it was.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from course.lessons.step_time import allreduce_report, costmodel
from course.notebook.checks.verdict import call, closed, real

# The kit's functions that give the exercise's answers: its model and fit, and the report's parts
# that hand them out.
REFERENCE: tuple[Callable[..., Any], ...] = (
    costmodel.coefficients,
    costmodel.allreduce_seconds,
    costmodel.fit,
    costmodel.predict_gradient_allreduce,
    allreduce_report.fits,
    allreduce_report.summary,
)


def _closed(*args: Any, **kwargs: Any) -> Any:
    # The body a reference function has while it is closed. It runs with that function's globals,
    # so it names builtins only, and imports the translation itself.
    from course.i18n import _

    raise RuntimeError(
        _(
            "the kit's own cost model (course.lessons.step_time.costmodel) is closed while "
            "your function is "
            "checked: write the formula (or the least-squares fit) in your function yourself"
        )
    )


def reference_closed() -> contextlib.AbstractContextManager[None]:
    """Within: every function of REFERENCE raises the RuntimeError of `_closed`, under its own
    name; restored on exit, whatever happened within."""
    return closed(REFERENCE, _closed)


def _called(function: Callable[..., Any], *args: Any) -> Any:
    __tracebackhide__ = True
    with reference_closed():
        return call(function, *args)


def _seconds(returned: Any) -> dict[str, Any]:
    """A cost model's answer: its value as a float (None when it is no number) and its type."""
    return {"seconds": real(returned), "type": type(returned).__name__}


def _pair(returned: Any) -> dict[str, Any]:
    """A fit's answer: [alpha, beta] as floats or None each ("pair" None when it is no pair), and
    the types of it and of its two parts."""
    facts: dict[str, Any] = {"type": type(returned).__name__, "pair": None, "types": None}
    if isinstance(returned, str) or not hasattr(returned, "__len__"):
        return facts
    try:
        size = len(returned)
    except TypeError:  # a NumPy scalar array has __len__ and no length
        return facts
    if size == 2:  # a tuple, a list, an array
        first, second = returned[0], returned[1]
        facts["pair"] = [real(first), real(second)]
        facts["types"] = [type(first).__name__, type(second).__name__]
    return facts


def times(allreduce_time: Callable[..., Any], cases: list[list[Any]]) -> list[dict[str, Any]]:
    """allreduce_time on each [algorithm, ranks, bytes, alpha, beta]."""
    return [_seconds(_called(allreduce_time, *case)) for case in cases]


def fits(fit_alpha_beta: Callable[..., Any], series: list[list[Any]]) -> list[dict[str, Any]]:
    """fit_alpha_beta on each [sizes, seconds, algorithm, ranks]."""
    return [
        _pair(_called(fit_alpha_beta, list(sizes), list(seconds), algorithm, ranks))
        for sizes, seconds, algorithm, ranks in series
    ]


def prediction(
    allreduce_time: Callable[..., Any],
    fit_alpha_beta: Callable[..., Any],
    sizes: list[int],
    seconds: list[float],
    algorithm: str,
    ranks: int,
    messages: list[int],
) -> dict[str, Any]:
    """The student's fit of one measured series, then their model of each of `messages` (bytes)
    with that alpha and beta ("times" None when the fit gave no two numbers)."""
    fitted = _pair(_called(fit_alpha_beta, list(sizes), list(seconds), algorithm, ranks))
    pair = fitted["pair"]
    if pair is None or None in pair:
        return {"fit": fitted, "times": None}
    alpha, beta = pair
    return {
        "fit": fitted,
        "times": [
            _seconds(_called(allreduce_time, algorithm, ranks, n, alpha, beta)) for n in messages
        ],
    }


def tried(allreduce_time: Callable[..., Any], fit_alpha_beta: Callable[..., Any]) -> None:
    """Each function once on a small case: a stub says so before anything about the runs."""
    _called(allreduce_time, "ring", 2, 1024, 1e-6, 1e-9)
    _called(fit_alpha_beta, [1024, 4096], [3e-6, 9e-6], "ring", 2)

"""How a check gives its verdict: one "OK:" line when it passes, CheckFailed (what was expected,
what was found, where to look) when it does not; and how it calls a student's function so that
their own exceptions pass through naming it."""

from __future__ import annotations

import contextlib
import io
import sys
from collections.abc import Callable, Iterator
from typing import Any, NoReturn

from course.contracts.message import joined
from course.i18n import _


class CheckFailed(AssertionError):
    """The student's function ran but did not do what the exercise asks."""


# Graded feedback shows the exception as traceback.format_exception_only words it, module included:
# the name students have always seen, from before the class moved out of the package's __init__.
CheckFailed.__module__ = "course.notebook.checks"


def fail(message: str, hint: str = "") -> NoReturn:
    __tracebackhide__ = True
    raise CheckFailed(joined("\n  -> ", (message, hint)) if hint else message)


def expect(condition: bool, message: str, hint: str = "") -> None:
    __tracebackhide__ = True
    if not condition:
        fail(message, hint)


def passed(message: str) -> None:
    """Print the passing line: "OK: " (a fixed token that graders and tests find) and `message`,
    already translated."""
    print(f"OK: {message}")


@contextlib.contextmanager
def closed(references: tuple[Callable[..., Any], ...], body: Callable[..., Any]) -> Iterator[None]:
    """Within: every function of `references` runs `body`'s code (which raises, naming builtins
    only, since it runs with that function's globals) under its own name, so that a student's
    function cannot hand back the kit's answer by any route to it; restored on exit, whatever
    happened within. The function objects change, since no import hook closes a name bound
    elsewhere. A copy of a reference made from its module's source (its code run again through
    the module's loader) is not these objects: a profile hook sees any code of the references'
    names and files run within, and `body`'s error is raised on exit."""
    saved = [(function, function.__code__) for function in references]
    kit_code = {(code.co_filename, code.co_name) for _function, code in saved}
    kit_code |= {(filename, "<module>") for filename, _name in kit_code}
    reran: list[str] = []
    # an enclosing closed()'s hook, which watches on within this one
    outer: Callable[..., Any] | None = sys.getprofile()

    def watch(frame: Any, event: str, arg: Any) -> None:
        code = frame.f_code
        if event == "call" and (code.co_filename, code.co_name) in kit_code:
            reran.append(code.co_name)
        if outer is not None and getattr(outer, "__qualname__", None) == watch.__qualname__:
            outer(frame, event, arg)  # (never another profiler's function)

    try:
        for function, code in saved:
            function.__code__ = body.__code__.replace(
                co_name=code.co_name, co_qualname=code.co_qualname
            )
        sys.setprofile(watch)
        yield
    finally:
        sys.setprofile(outer)
        for function, code in reversed(saved):
            function.__code__ = code
    if reran:
        body()


def call(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call a student's function; its exceptions pass through with a note that names it."""
    __tracebackhide__ = True
    try:
        # nbgrader zeroes test cells that write to stderr
        with contextlib.redirect_stderr(io.StringIO()):
            return function(*args, **kwargs)
    except NotImplementedError as e:
        e.add_note(
            _(
                "{function} still has its PUT YOUR CODE HERE stub: write it, "
                "then run this check again."
            ).format(function=function.__name__)
        )
        raise
    except Exception as e:
        e.add_note(
            _("(raised inside your {function}; the traceback above ends at your line)").format(
                function=function.__name__
            )
        )
        raise


def real(value: Any) -> float | None:
    """A student's number as a plain float, read by the built-in types themselves, so that a
    subclass's own `__eq__`, `__sub__` or `__float__` cannot speak for it; None when `value` is no
    number (bool included)."""
    import numbers

    import numpy

    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None
    if isinstance(value, float):  # NumPy's float64 too
        return float.__float__(value)
    if isinstance(value, int):
        return float(int.__index__(value))
    if isinstance(value, numpy.generic):
        return float(numpy.asarray(value, dtype=numpy.float64))
    return None

"""Where a check meets a student's function: an observer runs the function and describes what it
did as plain facts (JSON data); the check then judges those facts.

In a notebook both happen in the kernel, one after the other. Under the grader
(course.instructor.verify_test) a check gets the student's functions as `Remote` handles: `observe`
sends the observer's name and its inputs to the test's child process, which runs the observer on
the student's real functions and sends the facts back. The judgement, and every reference it is
compared with, stays in the grader's process, which never calls the student's code: what the child
does reaches the grade only through facts the judge checks against what it computes itself.

The facts cross as JSON in the notebook too (`plain`), so that a check judges the same data
wherever it runs.
"""

from __future__ import annotations

import json
import math
import sys
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from course.i18n import _

Facts = Any  # JSON data: None, bool, int, float, str, lists, and objects with string keys
# (observer's "module:name", the student's function names, the observer's inputs) -> the facts
Ask = Callable[[str, list[str], dict[str, Any]], Facts]


@dataclass(frozen=True)
class Remote:
    """A student's function that runs in another process (the grader's test child): its name, the
    sources of every function of its notebook (the stage-3 checks run them on MPI ranks), and how
    to ask that process for an observation."""

    name: str
    sources: Mapping[str, str] = field(repr=False)
    ask: Ask = field(repr=False, compare=False)

    @property
    def __name__(self) -> str:  # messages name the function as they would name a real one
        return self.name


def observer_name(observer: Callable[..., Facts]) -> str:
    """How the child finds an observer: "module:name" (observers are module-level functions)."""
    return f"{observer.__module__}:{observer.__qualname__}"


def observe(observer: Callable[..., Facts], *functions: Any, **inputs: Any) -> Facts:
    """observer(*functions, **inputs), as plain facts: here, or in the grader's test child where
    the functions are Remote handles (all of them are, or none). The inputs must be JSON data."""
    __tracebackhide__ = True
    remote = [function for function in functions if isinstance(function, Remote)]
    if remote:
        if len(remote) != len(functions):
            raise TypeError("a check observes the student's functions, all of them remote or none")
        inputs = plain(inputs)
        return plain(remote[0].ask(observer_name(observer), [f.name for f in remote], inputs))
    return plain(observer(*functions, **inputs))


def plain(facts: Facts) -> Facts:
    """`facts` as they are after crossing as JSON (tuples become lists); TypeError naming what is
    not JSON data. NaN and the infinities cross as they are."""
    return json.loads(json.dumps(facts, allow_nan=True))


def number(value: Any) -> float | None:
    """A fact that should be a number: the float, or None when it is none (bool included)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def finite(value: Any) -> bool:
    """Whether a fact is a finite number."""
    found = number(value)
    return found is not None and math.isfinite(found)


def returned(function: Any, args: list[Any]) -> Facts:
    """An observer: what function(*args) returns, as JSON data."""
    from course.notebook.checks.verdict import call

    return plain(call(function, *args))


class _Frozen(types.ModuleType):
    """A kit module whose names cannot be rebound (new ones, such as a submodule imported later,
    can be added)."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in self.__dict__:
            raise AttributeError(
                _(
                    "{name} is the kit's and cannot be changed while your functions are checked"
                ).format(name=f"{self.__name__}.{name}")
            )
        super().__setattr__(name, value)

    def __delattr__(self, name: str) -> None:
        raise AttributeError(
            _("{name} is the kit's and cannot be removed while your functions are checked").format(
                name=f"{self.__name__}.{name}"
            )
        )


def freeze_kit() -> None:
    """Make the kit's loaded modules refuse to have their names rebound, in a process about to run
    a student's functions for the grader (the test's child, the stage-3 probe's ranks): patching a
    helper an observer calls would otherwise change the facts it sends. Every lesson's module is
    loaded first, so that none is left for the student's code to load and patch."""
    from course import lessons

    lessons.load_all()
    for name, module in list(sys.modules.items()):
        if (name == "course" or name.startswith("course.")) and type(module) is types.ModuleType:
            module.__class__ = _Frozen

"""Checks of the students' functions, run on small CPU inputs.

The notebooks' visible self-checks and nbgrader's hidden tests call the same functions (the
hidden tests with other inputs), so a student sees before submitting what the grader will see.
A check either prints one line saying what it verified, or raises CheckFailed saying what was
expected, what it found and where to look. Exceptions from the student's own code pass through
with a note that names the function, so the traceback still points at their line.

The notebooks call `checks.<lesson module>.<check>(...)`: the package loads the lesson's module
(course/lessons/<lesson>/) when a notebook first names it.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from course.notebook.checks import predictions
from course.notebook.checks.inputs import SMALL, example_ids, labelled_dataset, small_args
from course.notebook.checks.verdict import CheckFailed, call, expect, fail, passed

# The lessons' check modules the notebooks call as checks.<name>, loaded on first use: the lessons
# import this engine, so loading them here would make importing any engine module load them all.
LESSON_CHECKS = {
    "single": "course.lessons.core.single",
    "multi_gpu": "course.lessons.core.multi_gpu",
    "multi_node": "course.lessons.core.multi_node",
    "scaling": "course.lessons.step_time.scaling",
    "allreduce": "course.lessons.step_time.allreduce",
    "exchange": "course.lessons.exchange.exchange",
    "exchange_scaling": "course.lessons.exchange.exchange_scaling",
    "run_part": "course.lessons.run_part.checks",
    "large_batch": "course.lessons.accuracy.large_batch",
    "model_parallel": "course.lessons.beyond.model_parallel",
}

__all__ = [
    "SMALL",
    "CheckFailed",
    "call",
    "example_ids",
    "expect",
    "fail",
    "labelled_dataset",
    "passed",
    "predictions",
    "small_args",
]


def __getattr__(name: str) -> ModuleType:
    if name not in LESSON_CHECKS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return importlib.import_module(LESSON_CHECKS[name])

"""Checks of the students' functions, run on small CPU inputs.

The notebooks' visible self-checks and nbgrader's hidden tests call the same functions (the
hidden tests with other inputs), so a student sees before submitting what the grader will see.
A check either prints one line saying what it verified, or raises CheckFailed saying what was
expected, what it found and where to look. Exceptions from the student's own code pass through
with a note that names the function, so the traceback still points at their line.

The notebooks call `checks.<stage module>.<check>(...)`: the package loads every stage module.
"""

from __future__ import annotations

from course.lessons.accuracy import large_batch
from course.lessons.beyond import model_parallel
from course.lessons.core import multi_gpu, multi_node, single
from course.lessons.exchange import exchange, exchange_scaling
from course.lessons.step_time import allreduce, scaling
from course.notebook.checks import predictions
from course.notebook.checks.inputs import SMALL, example_ids, labelled_dataset, small_args
from course.notebook.checks.verdict import CheckFailed, call, expect, fail, passed

__all__ = [
    "SMALL",
    "CheckFailed",
    "allreduce",
    "call",
    "example_ids",
    "exchange",
    "exchange_scaling",
    "expect",
    "fail",
    "labelled_dataset",
    "large_batch",
    "model_parallel",
    "multi_gpu",
    "multi_node",
    "passed",
    "predictions",
    "scaling",
    "single",
    "small_args",
]

"""Checks of the students' functions, run on small CPU inputs.

The notebooks' visible self-checks and nbgrader's hidden tests call the same functions (the
hidden tests with other inputs), so a student sees before submitting what the grader will see.
A check either prints one line saying what it verified, or raises CheckFailed saying what was
expected, what it found and where to look. Exceptions from the student's own code pass through
with a note that names the function, so the traceback still points at their line.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import tempfile

import numpy as np


class CheckFailed(AssertionError):
    """The student's function ran but did not do what the exercise asks."""


def fail(message: str, hint: str = "") -> None:
    __tracebackhide__ = True
    raise CheckFailed(f"{message}\n  -> {hint}" if hint else message)


def expect(condition: bool, message: str, hint: str = "") -> None:
    __tracebackhide__ = True
    if not condition:
        fail(message, hint)


def passed(message: str) -> None:
    print(f"OK: {message}")


def call(function, *args, **kwargs):
    """Call a student's function; its exceptions pass through with a note that names it."""
    __tracebackhide__ = True
    try:
        with contextlib.redirect_stderr(
            io.StringIO()
        ):  # nbgrader zeroes test cells that write to stderr
            return function(*args, **kwargs)
    except NotImplementedError as e:
        e.add_note(
            f"{function.__name__} still has its PUT YOUR CODE HERE stub: write it, then run this check again."
        )
        raise
    except Exception as e:
        e.add_note(
            f"(raised inside your {function.__name__}; the traceback above ends at your line)"
        )
        raise


def labelled_dataset(n: int, size: int = 32, seed: int = 0):
    """n images whose label is their index modulo 10, and whose pixel [0, 0, 0] is their index.

    The index lets a check tell which examples ended up where (split, scatter, shuffle).
    """
    from chainer.datasets import TupleDataset

    from course.runtime import synthetic

    images, _ = synthetic.generate(n, size=size, seed=seed)
    images = images.astype(np.float32) / 255.0
    images[:, 0, 0, 0] = np.arange(n)
    return TupleDataset(images, (np.arange(n) % 10).astype(np.int32))


def example_ids(dataset) -> list[int]:
    return [int(dataset[i][0][0, 0, 0]) for i in range(len(dataset))]


# What a check changes in a stage script's flags, so that it runs in seconds on a CPU.
SMALL = dict(
    dataset="synthetic",
    width=4,
    batchsize=8,
    epoch=1,
    warmup=1,
    device="@numpy",
    communicator="naive",
    gpu=False,
)


def small_args(stage: str = "single_gpu", **overrides) -> argparse.Namespace:
    """The flags a stage script has (its parser's defaults), scaled down for a check."""
    from course.runtime import harness

    args = harness.parser(stage).parse_args([])
    values = {key: value for key, value in SMALL.items() if hasattr(args, key)}
    values.update(stage=stage, out=tempfile.mkdtemp(prefix="course-check-"))
    values.update(overrides)
    return argparse.Namespace(**{**vars(args), **values})


# The stage modules use the helpers above, so they come last.
from course.notebook.checks import allreduce, multi_gpu, multi_node, single  # noqa: E402, F401 (checks.single, ...)

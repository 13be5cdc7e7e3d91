"""Issue 29's attacks on the checks of stages 1 and 2 from inside the student's function: under the
grader (Remote handles, the function in a child process) the check judges facts in a process the
function never ran in, so what the function does to the check's modules does not reach the verdict.
In a notebook the same function runs beside the check: there it can fool it, and nothing is graded.
"""

from __future__ import annotations

import sys

import chainer
import pytest

from course.notebook.checks import CheckFailed, multi_gpu, single, verdict
from tests.remote import remote


def silencing_make_iterators(train, test, batchsize):
    """Unshuffled (a mistake), and the check's verdicts silenced while it runs: `expect` does
    nothing until the check's `passed`, which puts everything back first."""
    real_expect, real_passed = single.expect, single.passed

    def restore(message):
        single.expect, single.passed = real_expect, real_passed
        real_passed(message)

    single.expect, single.passed = (lambda *args, **kwargs: None), restore
    return (
        chainer.iterators.SerialIterator(train, batchsize, shuffle=False),
        chainer.iterators.SerialIterator(test, batchsize, repeat=False, shuffle=False),
    )


def test_a_function_that_silences_the_check_while_it_runs_loses_its_points(capsys):
    """Issue 29, case 3: patch and restore."""
    single.iterators(silencing_make_iterators)  # beside the check, in a notebook, it fools it
    assert capsys.readouterr().out.startswith("OK: make_iterators")
    assert (single.expect, single.passed) == (verdict.expect, verdict.passed)
    with pytest.raises(CheckFailed, match="the training iterator returns the examples in their"):
        single.iterators(remote(silencing_make_iterators))
    assert capsys.readouterr().out == ""


def caller_patching_rate(lr, base, total):
    """Not scaled (a mistake), and the verdicts of whoever called it two frames up turned off."""
    sys._getframe(2).f_globals.update(
        expect=lambda *args, **kwargs: None, fail=lambda *args, **kwargs: None
    )
    return lr


def test_a_function_that_rewrites_its_callers_globals_does_not_reach_the_judge():
    """Issue 29, case 3 (sys._getframe(2).f_globals in scaled_learning_rate)."""
    with pytest.raises(
        CheckFailed, match=r"scaled_learning_rate\(0.05, 64, 128\) = 0.05, expected"
    ):
        multi_gpu.learning_rate(remote(caller_patching_rate))
    assert multi_gpu.expect is verdict.expect

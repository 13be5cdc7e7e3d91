"""Issue 29's attacks on the checks of stages 1 and 2 from inside the student's function: under the
grader (Remote handles, the function in a child process) the check judges facts in a process the
function never ran in, so what the function does to the check's modules does not reach the verdict.
In a notebook the same function runs beside the check: there it can fool it, and nothing is graded.
"""

from __future__ import annotations

import functools
import importlib
import sys

import chainer
import pytest

from course.lessons.core import multi_gpu, single
from course.notebook.checks import CheckFailed, verdict
from course.notebook.checks.observe import Remote, plain
from tests.helpers import notebook_module
from tests.remote import remote


@functools.cache
def _solution_module(folder: str, stage: str):
    from pathlib import Path

    return notebook_module(Path(folder), stage)


def _solutions(tmp_path, stage: str):
    """The stage's solution functions (one module per stage for the whole test run)."""
    return _solution_module(str(tmp_path.parent), stage)


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
        CheckFailed, match=r"scaled_learning_rate\(0.05, 64, 128\) returned 0.05\n  -> doubling"
    ):
        multi_gpu.learning_rate(remote(caller_patching_rate))
    assert multi_gpu.expect is verdict.expect


# Facts a verdict rests on, per check: the observer's dict keys, or ("*", key) for a key of every
# element of the observer's list. A fact only a message words (a class name) is not among them.
VERDICT_FACTS = {
    "iterators": ["pair", "iterators", "batch_size", "epoch", "stops", "test"],
    "model_and_optimizer": [
        "pair", "link", "is_optimizer", "set_up", "lr", "classifier", "network", "device", "shapes",
    ],
    "train_iterators": ["list", "iterators", "sizes", "parts"],
    "devices": [("*", "items")],
    "learning_rate": [("*", "value")],
}  # fmt: skip
CHECKS = {
    "iterators": (single.iterators, "single_gpu", "make_iterators"),
    "model_and_optimizer": (single.model_and_optimizer, "single_gpu", "make_model_and_optimizer"),
    "train_iterators": (multi_gpu.train_iterators, "multi_gpu", "make_train_iterators"),
    "devices": (multi_gpu.devices, "multi_gpu", "make_devices"),
    "learning_rate": (multi_gpu.learning_rate, "multi_gpu", "scaled_learning_rate"),
}
JUNK = ["forged", 0.5, None, {}, [True]]  # a true fact is replaced by "forged"


def forging(function, key, junk) -> Remote:
    """A handle whose facts are the function's own (observed here), with `key` replaced by `junk`
    (by "forged" where `junk` is the true fact): what a child that forges its report could send."""

    def ask(observer, names, inputs):
        module, name = observer.split(":")
        facts = plain(getattr(importlib.import_module(module), name)(function, **inputs))
        every, name = key if isinstance(key, tuple) else (None, key)
        for found in facts if every else [facts]:
            if isinstance(found, dict) and name in found:
                found[name] = junk if plain([junk]) != plain([found[name]]) else "forged"
        return facts

    return Remote(function.__name__, {}, ask)


@pytest.mark.parametrize(
    "check,key", [(check, key) for check, keys in VERDICT_FACTS.items() for key in [None, *keys]]
)
def test_a_fact_of_another_type_fails_the_check(tmp_path, check, key, capsys):
    """What the child sends may be forged: a fact the verdict rests on, of the wrong type or
    value, fails the check (CheckFailed, or another exception: a failed test), never passes it.
    (key None: the facts as observed, which pass.)"""
    run, stage, name = CHECKS[check]
    function = getattr(_solutions(tmp_path, stage), name)
    if key is None:
        run(forging(function, "none of them", None))
        assert capsys.readouterr().out.startswith("OK: ")
        return
    for junk in JUNK:
        with pytest.raises(Exception):  # noqa: B017, PT011  # any exception fails the test cell
            run(forging(function, key, junk))
    assert "OK: " not in capsys.readouterr().out

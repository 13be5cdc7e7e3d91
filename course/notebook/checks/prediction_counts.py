"""The counts a prediction derives (updates per epoch, iterations, snapshots written and kept),
asked of the student's function and judged exactly against the kit's counts and a run's own log;
and the observer that asks (course.notebook.checks.predictions grades with them)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from typing import Any

import course.notebook.checks.prediction_words as words
from course import evidence, i18n
from course.contracts import stages
from course.notebook.checks.observe import Facts, finite, observe
from course.notebook.checks.verdict import call, fail, real

# The first case of the counts' questions, checked before any run is read (so a stub says so first):
EXAMPLE = (1000, 32, 2, 3)  # train_size, batch, workers, epochs
SNAPSHOTS_RETAINED = 2  # add_snapshots keeps the newest two (n_retains=2), as notebook 01 asks
# Bound before any student's code runs (the kit's modules are frozen in the grader's child).
_chdir, _getcwd = os.chdir, os.getcwd


def predicted(function: Any, args: list) -> Facts:
    """An observer: {"returned": {key: number, string or None}} of what function(*args) returns
    (a dict's own items: numbers as the built-in types read them, strings as str), or {"type": the
    name of what it returned instead}. The function runs in a fresh empty folder: a prediction
    needs only its arguments, never the runs it predicts."""
    here = _getcwd()
    with tempfile.TemporaryDirectory(prefix="prediction-", ignore_cleanup_errors=True) as empty:
        _chdir(empty)
        try:
            value = call(function, *args)
        finally:
            _chdir(here)
    if not isinstance(value, dict):
        return {"type": type(value).__name__}
    facts: dict[str, Any] = {}
    for key, item in dict.items(value):
        if isinstance(key, str):
            facts[str.__str__(key)] = str.__str__(item) if isinstance(item, str) else real(item)
    return {"returned": facts}


def asked(function: Any, args: list, keys: Sequence[str]) -> dict[str, Any]:
    """The facts of one call, every key of `keys` there; CheckFailed saying what is missing."""
    __tracebackhide__ = True
    facts = observe(predicted, function, args=list(args))
    name, todo = function.__name__, words.RETURN_KEYS.format(keys=i18n.listed(keys))
    if "returned" not in facts:
        fail(words.NOT_A_DICT.format(name=name, kind=facts["type"]), todo)
    missing = i18n.listed(key for key in keys if key not in facts["returned"])
    if missing:
        fail(words.MISSING_KEYS.format(name=name, args=tuple(args), keys=missing), todo)
    return facts["returned"]


def iterations(train_per_worker: int, batch: int, epochs: int) -> int:
    """The updates a run makes: it stops at the first update that has shown each worker its part
    `epochs` times (a batch that crosses an epoch's end takes the rest from the next epoch)."""
    return -(-epochs * train_per_worker // batch)


def _derivation_misses(
    returned: dict, train_per_worker: int, batch: int, count: int, expected: bool = False
) -> list[str]:
    """What of a predicted derivation is wrong against `count` updates (what the run made, or,
    `expected`, what the kit expects)."""
    misses = []
    updates: Any = returned.get("updates_per_epoch")
    if not finite(updates) or abs(updates - train_per_worker / batch) >= 1:
        misses.append(
            words.UPDATES_MISS.format(predicted=updates, images=train_per_worker, batch=batch)
        )
    if (said := returned.get("iterations")) != count:
        said_of = words.ITERATIONS_EXPECTED if expected else words.ITERATIONS_MISS
        misses.append(said_of.format(predicted=said, count=count))
    return misses


def snapshots_wrong(returned: dict, written: int, kept: int, expected: bool = False) -> list[str]:
    """What of the predicted snapshots is wrong against `written` and `kept` (what the run wrote,
    or, `expected`, what the kit expects)."""
    said = (returned.get("snapshots_written"), returned.get("snapshots_kept"))
    if said == (written, kept):
        return []
    said_of = words.SNAPSHOTS_EXPECTED if expected else words.SNAPSHOTS_MISS
    return [said_of.format(predicted=said[0], predicted_kept=said[1], written=written, kept=kept)]


def _args(stage: str, train_size: int, batch: int, workers: int, epochs: int) -> list[int]:
    """The prediction's arguments: stage 1's has no workers."""
    if stage == stages.SINGLE_GPU.name:
        return [train_size, batch, epochs]
    return [train_size, batch, workers, epochs]


def _settings(run: evidence.Run) -> tuple[int, int, int, int]:
    """(train images per worker, batch per worker, workers, epochs) of a run's record."""
    record = run.record
    per_worker = (record.get("dataset") or {}).get("train_per_worker")
    batch = (record.get("batch_size") or {}).get("per_worker")
    if not per_worker or not batch or not record.get("epochs_planned") or not record.get("log"):
        fail(words.NOT_RECORDED.format(run=run.describe()), words.RUN_AGAIN)
    return per_worker, batch, run.workers, record["epochs_planned"]


def cases_wrong(
    function: Any, stage: str, cases: Sequence[Sequence[int]], keys: list[str]
) -> tuple[list[str], list[str]]:
    """(what of the updates and iterations, what of the snapshots (stage 1) is wrong) against the
    kit's counts for each of `cases` (train_size, batch, workers, epochs), the first of them the
    check's own example: the student's function runs before any run is read, so that a stub says
    so first. A snapshot at every epoch end, the newest SNAPSHOTS_RETAINED kept."""
    __tracebackhide__ = True
    derived: list[str] = []
    snapshots: list[str] = []
    for train_size, batch, workers, epochs in [EXAMPLE, *cases]:
        single = stage == stages.SINGLE_GPU.name
        workers = 1 if single else workers
        args = _args(stage, train_size, batch, workers, epochs)
        part = train_size // workers
        returned = asked(function, args, keys)
        count = iterations(part, batch, epochs)
        wrong = _derivation_misses(returned, part, batch, count, expected=True)
        derived += [words.CASE_MISS.format(args=tuple(args), miss=miss) for miss in wrong]
        if single:
            wrong = snapshots_wrong(
                returned, epochs, min(epochs, SNAPSHOTS_RETAINED), expected=True
            )
            snapshots += [words.CASE_MISS.format(args=tuple(args), miss=miss) for miss in wrong]
    return derived, snapshots


def run_wrong(
    function: Any, stage: str, run: evidence.Run, keys: list[str]
) -> tuple[list[str], dict]:
    """(what of the derivation is wrong against `run`'s own log, the facts for `run`)."""
    __tracebackhide__ = True
    per_worker, batch, workers, epochs = _settings(run)
    returned = asked(function, _args(stage, per_worker * workers, batch, workers, epochs), keys)
    return (
        _derivation_misses(returned, per_worker, batch, run.record["log"][-1]["iteration"]),
        returned,
    )

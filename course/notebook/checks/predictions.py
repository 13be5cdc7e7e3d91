"""Predict, then run: a student's predictions of their own jobs, graded against the traced runs.

A prediction is a function of the job's settings that returns a dict of plain numbers and choices.
The observer `predicted` calls it and keeps only JSON facts (numbers read by the built-in types,
strings as str); the judges compare those facts with what the student's traced runs measured
(course.evidence decides which count) and with references they compute themselves. A derivation
(updates per epoch, iterations, snapshots, a ratio) is graded exactly; a predicted choice (which
communication setting is faster, which learning-rate rule ends more accurate) only where the
measured gap exceeds grading.toml's [prediction] band: within it either answer counts, and the
notebook's written answer says why. No traced run, no points: a prediction is of a run.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from course import evidence
from course.cluster.accounting import Accounting
from course.contracts import grading_rules, stages
from course.notebook.checks.observe import Facts, finite, observe
from course.notebook.checks.verdict import call, fail, passed, real

RATIO_TOLERANCE = 0.02  # a computed ratio counts within 2% (rounding), either way
# The first case of each question, checked before any run is read (so a stub says so first):
EXAMPLE = (1000, 32, 2, 3)  # train_size, batch, workers, epochs
RATIO_EXAMPLE = (120.0, 30.0, 32)  # compute ms, exchange ms, batch per rank
RULES_COMPARED = ("warmup", "linear")  # the accuracy question: with and without the warm-up


def predicted(function: Any, args: list) -> Facts:
    """An observer: {"returned": {key: number, string or None}} of what function(*args) returns
    (a dict's own items: numbers as the built-in types read them, strings as str), or {"type": the
    name of what it returned instead}."""
    value = call(function, *args)
    if not isinstance(value, dict):
        return {"type": type(value).__name__}
    facts: dict[str, Any] = {}
    for key, item in dict.items(value):
        if isinstance(key, str):
            facts[str.__str__(key)] = str.__str__(item) if isinstance(item, str) else real(item)
    return {"returned": facts}


def _returned(function: Any, args: list, keys: Sequence[str]) -> dict[str, Any]:
    """The facts of one call, every key of `keys` there; CheckFailed saying what is missing."""
    __tracebackhide__ = True
    facts = observe(predicted, function, args=list(args))
    if "returned" not in facts:
        fail(
            "{name} returned a {kind}, not a dict".format(
                name=function.__name__, kind=facts["type"]
            ),
            "return a dict with the keys {keys}".format(keys=", ".join(keys)),
        )
    missing = [key for key in keys if key not in facts["returned"]]
    if missing:
        fail(
            "{name}{args} has no {keys}".format(
                name=function.__name__, args=tuple(args), keys=", ".join(missing)
            ),
            "return a dict with the keys {keys}".format(keys=", ".join(keys)),
        )
    return facts["returned"]


def iterations(train_per_worker: int, batch: int, epochs: int) -> int:
    """The updates a run makes: it stops at the first update that has shown each worker its part
    `epochs` times (a batch that crosses an epoch's end takes the rest from the next epoch)."""
    return -(-epochs * train_per_worker // batch)


def _derivation_misses(
    returned: dict, train_per_worker: int, batch: int, count: int, made: str = "the run made"
) -> list[str]:
    """What of a predicted derivation is wrong against `count` updates (what the run `made`, or
    what the kit expects)."""
    misses = []
    updates: Any = returned.get("updates_per_epoch")
    if not finite(updates) or abs(updates - train_per_worker / batch) >= 1:
        misses.append(
            f"updates per epoch: predicted {updates}, but each worker's {train_per_worker} "
            f"images in batches of {batch} make {train_per_worker / batch:.2f}"
        )
    if returned.get("iterations") != count:
        misses.append(
            "iterations: predicted {predicted}, {made} {count}".format(
                predicted=returned.get("iterations"), made=made, count=count
            )
        )
    return misses


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
        fail(
            f"{run.describe()} does not record its data set, batch or epochs",
            "run the job again with this kit's script",
        )
    return per_worker, batch, run.workers, record["epochs_planned"]


def _case_misses(
    function: Any, stage: str, cases: Sequence[Sequence[int]], keys: list[str]
) -> list[str]:
    """What of the derivation is wrong against the kit's count for each of `cases` (train_size,
    batch, workers, epochs), the first of them the check's own example: the student's function runs
    before any run is read, so that a stub says so first."""
    __tracebackhide__ = True
    misses = []
    for train_size, batch, workers, epochs in [EXAMPLE, *cases]:
        workers = 1 if stage == stages.SINGLE_GPU.name else workers
        args = _args(stage, train_size, batch, workers, epochs)
        part = train_size // workers
        wrong = _derivation_misses(
            _returned(function, args, keys),
            part,
            batch,
            iterations(part, batch, epochs),
            "expected",
        )
        misses += [f"for {tuple(args)}: {miss}" for miss in wrong]
    return misses


def _run_misses(
    function: Any, stage: str, run: evidence.Run, keys: list[str]
) -> tuple[list[str], dict]:
    """(what of the derivation is wrong against `run`'s own log, the facts for `run`)."""
    __tracebackhide__ = True
    per_worker, batch, workers, epochs = _settings(run)
    returned = _returned(function, _args(stage, per_worker * workers, batch, workers, epochs), keys)
    return (
        _derivation_misses(returned, per_worker, batch, run.record["log"][-1]["iteration"]),
        returned,
    )


def _no_run(what: str, misses: list[str]) -> tuple[str, str]:
    """(what is missing, what to do) where there is no run to compare a prediction with, saying
    too what the check's own cases found of the function (`misses`)."""
    cases = "; ".join(misses) if misses else "right for the check's own settings"
    return (
        f"there is no {what} to compare your prediction with (your function: {cases})",
        "a prediction earns its points once the job it predicts has run: submit it, and hand in "
        "runs/ with the job log",
    )


def _latest(found: list[evidence.Run], what: str, misses: list[str]) -> evidence.Run:
    """The latest of `found`; CheckFailed when there is none."""
    __tracebackhide__ = True
    if not found:
        fail(*_no_run(what, misses))
    return found[-1]


def _verdict(points: float, parts: list[tuple[str, list[str]]]) -> float:
    """Points by the share of parts without a miss; CheckFailed naming every miss when none is."""
    __tracebackhide__ = True
    right = [name for name, misses in parts if not misses]
    missed = [
        "{part}: {misses}".format(part=name, misses="; ".join(misses))
        for name, misses in parts
        if misses
    ]
    if not right:
        fail(
            "; ".join(missed),
            "set each number beside what the run shows, and find the fact of the lesson it leaves "
            "out",
        )
    for line in missed:
        print(f"MISSED {line}")
    passed(
        "{right} of {all} parts of your prediction hold: {names}".format(
            right=len(right), all=len(parts), names=", ".join(right)
        )
    )
    return round(points * len(right) / len(parts), 3)


def run_prediction(
    predict_run: Any,
    stage: str,
    points: float,
    folder: Path = Path("."),
    cases: Sequence[Sequence[int]] = (),
    checked: Accounting | None = None,
    required: bool = True,
) -> float:
    """Stages 1 and 2: the predicted updates per epoch and iterations (and, in stage 1, snapshots
    written and kept) against the latest traced run of `stage`, and against the kit's counts for
    `cases`. Stage 1: half the points each for the updates and the snapshots. Without a run: no
    points, CheckFailed, or where not `required` (stage 2's visible check on a site that cannot
    run it, as its efficiency check does) a NOT YET line."""
    __tracebackhide__ = True
    single = stage == stages.SINGLE_GPU.name
    keys = ["updates_per_epoch", "iterations"]
    keys += ["snapshots_written", "snapshots_kept"] if single else []
    misses = _case_misses(predict_run, stage, cases, keys)
    traced = [run for run in evidence.runs(stage, folder, checked) if run.traced]
    if not traced and not required:
        missing, todo = _no_run(f"traced {stage} run", misses)
        print(f"NOT YET: {missing}\n  -> {todo}")
        return 0.0
    run = _latest(traced, f"traced {stage} run", misses)
    more, returned = _run_misses(predict_run, stage, run, keys)
    misses += more
    parts = [("updates and iterations", misses)]
    if single:
        snapshots = run.record.get("snapshots") or {}
        measured = (len(snapshots.get("seconds") or []), len(snapshots.get("files") or []))
        said = (returned.get("snapshots_written"), returned.get("snapshots_kept"))
        parts.append(
            (
                "snapshots",
                []
                if said == measured
                else [
                    f"predicted {said[0]} written and {said[1]} kept, the run wrote {measured[0]} "
                    f"and kept {measured[1]}"
                ],
            )
        )
    print(f"{run.describe()}: your prediction {returned}")
    return _verdict(points, parts)


def _comparison_runs(found: list[evidence.Run]) -> list[evidence.Run]:
    """The traced, unprofiled stage-3 runs on the most ranks, with the batch per worker of the
    latest warm-up run there (the weak-scaling comparison)."""
    runs = [run for run in found if run.traced and not run.profiled and run.workers > 1]
    if not runs:
        return []
    most = max(run.workers for run in runs)
    taught = [run for run in runs if run.workers == most and run.lr_rule == stages.TAUGHT_LR_RULE]
    batch = (taught[-1] if taught else runs[-1]).record.get("batch_size")
    return [run for run in runs if run.workers == most and run.record.get("batch_size") == batch]


def _order(
    values: dict[str, list[float]], choice: Any, noise: float, relative: bool, what: str
) -> list[str]:
    """The miss, if any, of choosing `choice` as the highest of `values` (each option's measured
    values): graded only where one option's worst beats every other's best by more than `noise`."""
    if choice not in values:
        return [
            "{choice!r} is not one of {options}".format(
                choice=choice, options=", ".join(sorted(values))
            )
        ]
    shown = "; ".join(
        "{option} {values}".format(option=option, values=", ".join(f"{v:.3g}" for v in found))
        for option, found in sorted(values.items())
    )
    for option, found in values.items():
        others = [v for other, vs in values.items() if other != option for v in vs]
        margin = max(others) * (1 + noise) if relative else max(others) + noise
        if min(found) > margin:
            if option == choice:
                print(f"{what}: {shown}: {option} wins beyond the noise, as predicted")
                return []
            return [f"{shown}: {option} wins beyond the noise ({noise:g}), not {choice}"]
    print(f"{what}: {shown}: within the noise ({noise:g}), so either answer counts")
    return []


def comparison_prediction(
    predict_comparison: Any,
    points: float,
    folder: Path = Path("."),
    cases: Sequence[Sequence[int]] = (),
    checked: Accounting | None = None,
) -> float:
    """Stage 3, a third of the points each: the updates per epoch and iterations of the latest
    warm-up run on the most ranks; the faster communication setting there; the rule (warmup or
    linear) that ends more accurate there."""
    __tracebackhide__ = True
    keys = ["updates_per_epoch", "iterations", "faster_setting", "more_accurate_rule"]
    misses = _case_misses(predict_comparison, stages.MULTI_NODE.name, cases, keys)
    compared = _comparison_runs(evidence.runs(stages.MULTI_NODE.name, folder, checked))
    taught = [run for run in compared if run.lr_rule == stages.TAUGHT_LR_RULE]
    run = _latest(taught, "traced stage-3 run on 2 or more ranks with the warm-up rule", misses)
    more, returned = _run_misses(predict_comparison, stages.MULTI_NODE.name, run, keys)
    misses += more
    # the grader reads grading.toml; a student's notebook, what the bundle ships of it
    rules = grading_rules.load() if checked is not None else grading_rules.for_students()
    kind = run.record.get("device_kind", "gpu")
    throughput_noise = (
        rules.throughput_noise(kind) if rules else grading_rules.THROUGHPUT_NOISE[kind]
    )
    accuracy_noise = rules.accuracy_noise if rules else grading_rules.ACCURACY_NOISE
    speeds: dict[str, list[float]] = {}
    for each in taught:
        speeds.setdefault(each.setting, []).append(each.images_per_sec)
    accuracies: dict[str, list[float]] = {}
    for each in compared:
        if each.lr_rule in RULES_COMPARED and each.final_accuracy is not None:
            accuracies.setdefault(each.lr_rule, []).append(each.final_accuracy)
    parts = [("updates and iterations", misses)]
    for name, values, noise, relative, key in (
        ("faster setting", speeds, throughput_noise, True, "faster_setting"),
        ("more accurate rule", accuracies, accuracy_noise, False, "more_accurate_rule"),
    ):
        if len(values) < 2:
            found = ", ".join(values) or "none"
            parts.append(
                (
                    name,
                    [
                        f"your traced runs on {run.workers} ranks have {found}: it needs two to "
                        "compare (run the comparison cell above, then this one again)"
                    ],
                )
            )
            continue
        parts.append((name, _order(values, returned.get(key), noise, relative, name)))
    return _verdict(points, parts)


def _ratio_misses(function: Any, cases: Sequence[Sequence[float]], keys: list[str]) -> list[str]:
    """What of the ratio and the break-even batch is wrong for each of `cases` (compute ms,
    exchange ms, batch per rank)."""
    __tracebackhide__ = True
    misses = []
    for ms, xs, b in cases:
        returned = _returned(function, [ms, xs, b], keys)
        for key, want in (("ratio", ms / xs), ("break_even_batch", b * xs / ms)):
            got: Any = returned.get(key)
            if not finite(got) or abs(got - want) > RATIO_TOLERANCE * abs(want):
                misses.append(
                    f"{key} for compute {ms:.4g} ms, exchange {xs:.4g} ms, batch {b}: {got}, "
                    f"expected {want:.4g}"
                )
    return misses


def exchange_ratio(
    compute_to_exchange: Any,
    points: float,
    folder: Path = Path("."),
    cases: Sequence[Sequence[float]] = (),
    checked: Accounting | None = None,
) -> float:
    """The ratio of a step's compute (forward + backward) to its gradient exchange, and the batch
    per rank at which they are equal, from the profiled run on the most ranks (medians over its
    ranks), and for `cases` (compute ms, exchange ms, batch)."""
    __tracebackhide__ = True
    keys = ["ratio", "break_even_batch"]
    misses = _ratio_misses(compute_to_exchange, [RATIO_EXAMPLE, *cases], keys)
    runs = [
        run
        for run in evidence.runs(stages.MULTI_NODE.name, folder, checked)
        if run.traced and run.workers > 1 and (run.record.get("profile") or {}).get("ranks")
    ]
    run = _latest(runs, "traced stage-3 run with a step profile on 2 or more ranks", misses)
    medians = run.record["profile"]["ranks"]

    def median(values: list[float]) -> float:
        return sorted(values)[len(values) // 2]

    compute = median([r["median_ms"]["forward"] + r["median_ms"]["backward"] for r in medians])
    exchange = median([r["median_ms"]["allreduce"] for r in medians])
    batch: Any = (run.record.get("batch_size") or {}).get("per_worker")
    misses += _ratio_misses(compute_to_exchange, [(compute, exchange, batch)], keys)
    print(
        f"{run.describe()}: compute {compute:.1f} ms, exchange {exchange:.2f} ms per step at "
        f"{batch} images per rank"
    )
    return _verdict(points, [("ratio and break-even batch", misses)])

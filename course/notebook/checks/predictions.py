"""Predict, then run: a student's predictions of their own jobs, graded against the traced runs.

A prediction is a function of the job's settings that returns a dict of plain numbers and choices.
The observer `predicted` calls it and keeps only JSON facts (numbers read by the built-in types,
strings as str); the judges compare those facts with what the student's traced runs measured
(course.evidence decides which count) and with references they compute themselves. A derivation
(updates per epoch, iterations, snapshots, a ratio) is graded exactly, from the function; a choice
(which communication setting is faster, which learning-rate rule ends more accurate) as recorded
with the first compared run when it was submitted (course.notebook.checks.recorded), and only where
the measured gap exceeds grading.toml's [prediction] band: within it either answer counts. No
traced run, no points: a prediction is of a run. The observer and the derived counts live in
course.notebook.checks.prediction_counts.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import course.notebook.checks.prediction_words as words
import course.notebook.checks.recorded as recorded
from course import evidence, i18n
from course.cluster.accounting import Accounting
from course.contracts import grading_rules, stages
from course.notebook.checks.observe import finite
from course.notebook.checks.prediction_counts import (
    asked,
    cases_wrong,
    predicted,
    run_wrong,
    snapshots_wrong,
)
from course.notebook.checks.verdict import CheckFailed, fail, passed

__all__ = ["comparison_prediction", "exchange_ratio", "predicted", "run_prediction"]

RATIO_TOLERANCE = 0.02  # a computed ratio counts within 2% (rounding), either way
# The first case of the ratio question, checked before any run is read (so a stub says so first):
RATIO_EXAMPLE = (120.0, 30.0, 32)  # compute ms, exchange ms, batch per rank
RULES_COMPARED = ("warmup", "linear")
COMPARISON_KEYS = [
    "updates_per_epoch",
    "iterations",
    "faster_setting",
    "more_accurate_rule",
]  # the accuracy question: with and without the warm-up


def _no_run(what: str, misses: list[str]) -> tuple[str, str]:
    """(what is missing, what to do) where there is no run to compare a prediction with, saying
    too what the check's own cases found of the function (`misses`)."""
    cases = i18n.listed(misses, "; ") if misses else words.CASES_RIGHT
    return words.NO_RUN.format(what=what, cases=cases), words.RUN_FIRST


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
    missed = [words.PART_MISSED.format(part=n, misses=i18n.listed(m, "; ")) for n, m in parts if m]
    if not right:
        fail(i18n.listed(missed, "; "), words.NONE_HELD)
    for line in missed:
        print(line)
    passed(words.HELD.format(right=len(right), all=len(parts), names=i18n.listed(right)))
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
    misses, snapshot_misses = cases_wrong(predict_run, stage, cases, keys)
    traced = [run for run in evidence.runs(stage, folder, checked) if run.traced]
    what = words.TRACED_RUN.format(stage=stage)
    if not traced and not required:
        missing, todo = _no_run(what, misses + snapshot_misses)
        print(words.NOT_YET.format(missing=missing, todo=todo))
        return 0.0
    run = _latest(traced, what, misses + snapshot_misses)
    more, returned = run_wrong(predict_run, stage, run, keys)
    parts = [(words.PART_DERIVATION, misses + more)]
    if single:
        snapshots = run.record.get("snapshots") or {}
        written, kept = len(snapshots.get("seconds") or []), len(snapshots.get("files") or [])
        parts.append(
            (words.PART_SNAPSHOTS, snapshot_misses + snapshots_wrong(returned, written, kept))
        )
    said = i18n.listed(words.PREDICTED_ITEM.format(key=k, value=v) for k, v in returned.items())
    print(words.YOU_PREDICTED.format(run=run.describe(), said=said))
    recorded.show(traced, returned)
    return _verdict(points, parts)


def _comparison_groups(found: list[evidence.Run]) -> list[list[evidence.Run]]:
    """The traced, unprofiled stage-3 runs on 2 or more ranks, by number of ranks (the most first),
    each with the batch per worker of the latest warm-up run on that many ranks (the weak-scaling
    comparison)."""
    runs = [run for run in found if run.traced and not run.profiled and run.workers > 1]
    groups = []
    for workers in sorted({run.workers for run in runs}, reverse=True):
        same = [run for run in runs if run.workers == workers]
        taught = [run for run in same if run.lr_rule == stages.TAUGHT_LR_RULE]
        batch = (taught[-1] if taught else same[-1]).record.get("batch_size")
        groups.append([run for run in same if run.record.get("batch_size") == batch])
    return groups


def _order(
    values: dict[str, list[float]], choice: Any, noise: float, relative: bool, what: str
) -> list[str]:
    """The miss, if any, of choosing `choice` as the highest of `values` (each option's measured
    values): graded only where one option's worst beats every other's best by more than `noise`."""
    if choice not in values:
        return [words.NOT_AN_OPTION.format(choice=choice, options=i18n.listed(sorted(values)))]
    shown = i18n.listed(
        (
            words.MEASURED.format(option=option, values=i18n.listed(f"{v:.3g}" for v in found))
            for option, found in sorted(values.items())
        ),
        "; ",
    )
    for option, found in values.items():
        others = [v for other, vs in values.items() if other != option for v in vs]
        margin = max(others) * (1 + noise) if relative else max(others) + noise
        if min(found) > margin:
            if option == choice:
                print(words.AS_PREDICTED.format(what=what, shown=shown, option=option))
                return []
            return [words.WINS.format(shown=shown, option=option, noise=noise, choice=choice)]
    print(words.WITHIN_NOISE.format(what=what, shown=shown, noise=noise))
    return []


def comparison_prediction(
    predict_comparison: Any,
    points: float,
    folder: Path = Path("."),
    cases: Sequence[Sequence[int]] = (),
    checked: Accounting | None = None,
) -> float:
    """Stage 3, a third of the points each: the updates per epoch and iterations of the latest
    warm-up run; the faster communication setting; the rule (warmup or linear) that ends more
    accurate. Judged on the runs of one number of ranks: the one that gives the most points, the
    most ranks among equals, so that an honest run more (a 4-rank run after a 2-rank comparison)
    never lowers the score. The choices: as recorded with the first compared run's job when it was
    submitted (before any of them ran), whatever the function answers now."""
    __tracebackhide__ = True
    misses, _ = cases_wrong(predict_comparison, stages.MULTI_NODE.name, cases, COMPARISON_KEYS)
    groups = _comparison_groups(evidence.runs(stages.MULTI_NODE.name, folder, checked))
    best: tuple[float, str, CheckFailed | None] | None = None
    for compared in groups or [[]]:  # no run: the judgement says so
        said = io.StringIO()
        failed = None
        try:
            with contextlib.redirect_stdout(said):
                got = _judged_comparison(
                    predict_comparison, points, compared, list(misses), checked
                )
        except CheckFailed as e:
            got, failed = 0.0, e
        if best is None or got > best[0]:
            best = (got, said.getvalue(), failed)
    assert best is not None  # one group at least was judged
    got, told, failed = best
    print(told, end="")
    if failed is not None:
        raise failed
    return got


def _judged_comparison(
    predict_comparison: Any,
    points: float,
    compared: list[evidence.Run],
    misses: list[str],
    checked: Accounting | None,
) -> float:
    """comparison_prediction on the runs of one number of ranks (`compared`); `misses`: what the
    check's own cases found wrong."""
    __tracebackhide__ = True
    taught = [run for run in compared if run.lr_rule == stages.TAUGHT_LR_RULE]
    run = _latest(taught, words.WARMUP_RUN, misses)
    more, returned = run_wrong(predict_comparison, stages.MULTI_NODE.name, run, COMPARISON_KEYS)
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
    parts = [(words.PART_DERIVATION, misses)]
    first = recorded.earliest(compared)
    choices, (unrecorded, todo) = recorded.answers(first)
    for name, (one, none), values, noise, relative, key in (
        (
            words.PART_FASTER,
            (words.ONE_SETTING, words.NO_SETTING),
            speeds,
            throughput_noise,
            True,
            "faster_setting",
        ),
        (
            words.PART_MORE_ACCURATE,
            (words.ONE_RULE, words.NO_RULE),
            accuracies,
            accuracy_noise,
            False,
            "more_accurate_rule",
        ),
    ):
        if choices is None:
            parts.append((name, [words.NOT_GRADED.format(why=unrecorded, todo=todo)]))
        elif len(values) < 2:
            said = one if values else none
            parts.append((name, [said.format(found=i18n.listed(values), ranks=run.workers)]))
        else:
            recorded.changed(first, key, returned.get(key), choices.get(key))
            parts.append((name, _order(values, choices.get(key), noise, relative, name)))
    return _verdict(points, parts)


def _ratio_misses(function: Any, cases: Sequence[Sequence[float]], keys: list[str]) -> list[str]:
    """What of the ratio and the break-even batch is wrong for each of `cases` (compute ms,
    exchange ms, batch per rank)."""
    __tracebackhide__ = True
    misses = []
    for ms, xs, b in cases:
        returned = asked(function, [ms, xs, b], keys)
        for key, want in (("ratio", ms / xs), ("break_even_batch", b * xs / ms)):
            got: Any = returned.get(key)
            if not finite(got) or abs(got - want) > RATIO_TOLERANCE * abs(want):
                misses.append(
                    words.RATIO_MISS.format(key=key, compute=ms, exchange=xs, batch=b, got=got)
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
    run = _latest(runs, words.PROFILED_RUN, misses)
    compute, exchange = _profile_medians(run)
    batch: Any = (run.record.get("batch_size") or {}).get("per_worker")
    misses += _ratio_misses(compute_to_exchange, [(compute, exchange, batch)], keys)
    print(
        words.PROFILED.format(run=run.describe(), compute=compute, exchange=exchange, batch=batch)
    )
    return _verdict(points, [(words.PART_RATIO, misses)])


def _profile_medians(run: evidence.Run) -> tuple[float, float]:
    """(compute, exchange): the medians over `run`'s ranks of their median ms per step;
    CheckFailed where a rank has no median (no steady step) or the exchange takes no time."""
    __tracebackhide__ = True
    ranks = run.record["profile"]["ranks"]
    phases = ("forward", "backward", "allreduce")
    missing = {
        phase: [
            str(r.get("rank")) for r in ranks if not finite((r.get("median_ms") or {}).get(phase))
        ]
        for phase in phases
    }
    if any(missing.values()):
        fail(
            words.NO_MEDIAN.format(
                run=run.describe(),
                phases=i18n.listed(phase for phase in phases if missing[phase]),
                ranks=i18n.listed(sorted({rank for found in missing.values() for rank in found})),
            ),
            words.PROFILE_AGAIN,
        )

    def median(values: list[float]) -> float:
        return sorted(values)[len(values) // 2]

    times = [r["median_ms"] for r in ranks]
    compute = median([t["forward"] + t["backward"] for t in times])
    exchange = median([t["allreduce"] for t in times])
    if exchange <= 0:
        fail(words.NO_EXCHANGE.format(run=run.describe(), exchange=exchange), words.PROFILE_AGAIN)
    return compute, exchange

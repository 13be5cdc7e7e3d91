"""Checks of the three derivations (notebooks 04 and 06) from the sources' figures:

    step_shares(profile_ms) -> {"shares": {phase: fraction of the step}, "not_computing": fraction}
    run_plan(gpus, images_per_gpu, train_images, base_lr, base_batch)
        -> {"total_batch", "updates_per_epoch", "lr"}
    implied_exchange(speedup, n_gpus, compute_seconds) -> {"efficiency", "exchange_seconds"}

The observer (course.lessons.step_time.scaling_observers) runs the student's function with the kit's
reference closed and returns the numbers of the dict it gives; the judge here compares them with
the kit's (course.lessons.step_time.scalingmodel) on the lesson's cases, the hidden test's and cases
drawn at random,
and names a known mistake (course.lessons.step_time.scaling_mistakes) that the numbers match.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import course.lessons.step_time.scaling_mistakes as mistakes
import course.lessons.step_time.scaling_observers as observers
from course.i18n import _
from course.lessons.step_time import scalingmodel
from course.notebook.checks.observe import number, observe
from course.notebook.checks.verdict import expect, fail, passed
from course.runtime.profile import PHASES

_DRAW = random.SystemRandom()


def _profile(*ms: float) -> dict[str, float]:
    return dict(zip(PHASES, ms, strict=True))


# A step of 100 ms (data, forward, backward, wait, allreduce, update, other); one whose exchange
# and waiting are most of it; one rank alone (no one to wait for); a 2-rank CPU step as the kit's
# profile records it.
SHARES_CASES = (
    _profile(1.0, 30.0, 55.0, 4.0, 6.0, 3.0, 1.0),
    _profile(2.0, 5.0, 10.0, 20.0, 60.0, 2.0, 1.0),
    _profile(0.5, 12.0, 24.0, 0.0, 0.25, 1.5, 0.75),
    _profile(3.2, 140.5, 287.9, 6.1, 1.6, 9.4, 2.3),
)
# (gpus, images per GPU, training images, reference rate, reference batch): Hanawa's 240, 128 and
# 64 GPUs at 32 images per GPU on ImageNet-1k's training set with Goyal et al.'s 0.1 per 256; a
# batch that divides the data set; one GPU at the reference batch.
IMAGENET_TRAIN = 1_281_167
PLAN_CASES = (
    (240, 32, IMAGENET_TRAIN, 0.1, 256),
    (128, 32, IMAGENET_TRAIN, 0.1, 256),
    (64, 32, IMAGENET_TRAIN, 0.1, 256),
    (8, 25, 50_000, 0.1, 100),
    (1, 256, IMAGENET_TRAIN, 0.1, 256),
)
# (speedup, GPUs, one GPU's compute per step in seconds): the announcement's 100 times on 128 GPUs;
# the Fujitsu study's 217 times on 256; near the ideal on 8; one GPU alone.
EXCHANGE_CASES = (
    (100.0, 128, 1.0),
    (217.0, 256, 0.5),
    (7.6, 8, 0.05),
    (1.0, 1, 0.3),
)


def _shown_key(key: str) -> str:
    return "".join(f"[{part!r}]" for part in key.split("/"))


def _shown_call(name: str, case: tuple) -> str:
    return "{}({})".format(name, ", ".join(repr(part) for part in case))


def _diagnosis(
    found: list[dict[str, float]],
    reference: Callable[..., Mapping[str, Any]],
    known: tuple[mistakes.Mistake, ...],
    cases: list[tuple],
    wrong_at: int,
    hint: str,
) -> str:
    """The known mistakes that give every one of the student's results `found` on `cases`, else
    those that give the first wrong case's (`wrong_at`) and are wrong there; or `hint`."""
    everywhere = [
        what
        for what, model in known
        if all(mistakes.matches(f, mistakes.flat(model(*c))) for f, c in zip(found, cases))
    ]
    case = cases[wrong_at]
    right = mistakes.flat(reference(*case))
    there = [
        what
        for what, model in known
        if mistakes.matches(found[wrong_at], slip := mistakes.flat(model(*case)))
        and not mistakes.matches(slip, right)
    ]
    matched = everywhere or there
    if not matched:
        return hint
    # TRANSLATORS: the words between two known mistakes that a wrong answer matches alike.
    alternatives = _("; or ").join(matched)
    return _("it looks like {mistake}").format(mistake=alternatives)


def _check(
    function: Callable[..., Any],
    cases: list[tuple],
    reference: Callable[..., Mapping[str, Any]],
    known: tuple[mistakes.Mistake, ...],
    hint: str,
) -> None:
    """Judge function(*case) against reference(*case), key by key, on every case."""
    __tracebackhide__ = True
    name = function.__name__
    facts = observe(observers.fields, function, cases=[list(case) for case in cases])
    if not isinstance(facts, list) or len(facts) != len(cases):
        found = len(facts) if isinstance(facts, list) else 0
        fail(
            _("{name} was observed on {found} cases, not {cases}").format(
                name=name, found=found, cases=len(cases)
            )
        )
    results: list[dict[str, float]] = []
    for case, fact in zip(cases, facts):
        call = _shown_call(name, case)
        expected = mistakes.flat(reference(*case))
        if fact["fields"] is None:
            keys = ", ".join(sorted({repr(key.split("/")[0]) for key in expected}))
            fail(
                _("{call} returned {type}, not a dict with {keys}").format(
                    call=call, type=fact["type"], keys=keys
                )
            )
        numbers: dict[str, float] = {}
        for key in expected:
            if key not in fact["fields"]:
                fail(_("{call} returned no {key}").format(call=call, key=_shown_key(key)))
            value = number(fact["fields"][key]["value"])
            if value is None:
                kind = fact["fields"][key]["type"]
                fail(
                    _("{call}: {key} is {type}, not a number").format(
                        call=call, key=_shown_key(key), type=kind
                    )
                )
            numbers[key] = value
        results.append(numbers)
    for at, (case, numbers) in enumerate(zip(cases, results)):
        for key, right in mistakes.flat(reference(*case)).items():
            expect(
                mistakes.agrees(key, numbers[key], right),
                _("{call}: {key} is {value:.6g}, which is not the kit's").format(
                    call=_shown_call(name, case), key=_shown_key(key), value=numbers[key]
                ),
                _diagnosis(results, reference, known, cases, at, hint),
            )


def _drawn_profile() -> dict[str, float]:
    return {phase: round(_DRAW.uniform(0.0, 300.0), 3) for phase in PHASES}


def shares(
    step_shares: Callable[..., Any], cases: Iterable[Mapping[str, float]] = SHARES_CASES
) -> None:
    """step_shares gives each phase's fraction of the step and the fraction not computing."""
    __tracebackhide__ = True
    every = [(dict(case),) for case in cases] + [(_drawn_profile(),), (_drawn_profile(),)]
    _check(
        step_shares,
        every,
        scalingmodel.step_shares,
        mistakes.SHARES,
        _("what is a whole step made of, and in which phases does a rank do none of its own work?"),
    )
    passed(
        _("{name}: the kit's shares in {count} cases, {drawn} drawn at random").format(
            name=step_shares.__name__, count=len(every), drawn=2
        )
    )


def plan(
    run_plan: Callable[..., Any],
    cases: Iterable[tuple[int, int, int, float, int]] = PLAN_CASES,
) -> None:
    """run_plan gives the total batch, the updates per epoch and the linear rule's rate."""
    __tracebackhide__ = True
    drawn = (
        _DRAW.randint(2, 512),
        _DRAW.choice((8, 16, 32, 64, 128)),
        _DRAW.randint(10_000, 2_000_000),
        round(10 ** _DRAW.uniform(-3, 0), 6),
        _DRAW.choice((64, 128, 256, 512)),
    )
    every = [*cases, drawn]
    _check(
        run_plan,
        every,
        scalingmodel.run_plan,
        mistakes.PLAN,
        _(
            "how many images does one update take, how many updates does it take to see every "
            "image once, and how many times the reference batch is the total batch?"
        ),
    )
    passed(
        _("{name}: the kit's plan in {count} cases, {drawn} drawn at random").format(
            name=run_plan.__name__, count=len(every), drawn=1
        )
    )


def exchange(
    implied_exchange: Callable[..., Any],
    cases: Iterable[tuple[float, int, float]] = EXCHANGE_CASES,
) -> None:
    """implied_exchange gives the efficiency and the exchange per step a weak-scaling speedup
    implies."""
    __tracebackhide__ = True
    gpus = _DRAW.randint(2, 1024)
    drawn = (round(gpus * _DRAW.uniform(0.3, 1.0), 3), gpus, round(_DRAW.uniform(0.01, 2.0), 4))
    every = [*cases, drawn]
    _check(
        implied_exchange,
        every,
        scalingmodel.implied_exchange,
        mistakes.EXCHANGE,
        _(
            "how many images do N GPUs train in one step, how long does that step take at the "
            "measured speedup, and how much of it is compute?"
        ),
    )
    passed(
        _("{name}: the kit's numbers in {count} cases, {drawn} drawn at random").format(
            name=implied_exchange.__name__, count=len(every), drawn=1
        )
    )

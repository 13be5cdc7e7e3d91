"""Checks of the large-batch exercise (notebook 06): the student's rates for a larger batch, and
the local rate of Chainer's GradientLARS.

    large_batch_rates(base_lr, base_batch, batch) -> (linear rule's rate, square-root rule's rate)
    lars_local_rate(weight_norm, grad_norm, weight_decay, threshold, eps) -> the layer's factor

The checks observe what the functions return (course.lessons.accuracy.large_batch_observers, with
the kit's reference closed) and judge those numbers against course.runtime.largebatch. A
wrong number
that matches a known mistake gets a hint that names it; every check adds a case drawn at random,
and the hidden tests pass other cases, so that no case can simply be copied.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterable
from typing import Any

import course.lessons.accuracy.large_batch_observers as observers
from course.i18n import _
from course.notebook.checks.observe import number, observe
from course.notebook.checks.verdict import expect, fail, passed
from course.runtime import largebatch

# (base_lr, base_batch, batch): Goyal et al.'s ImageNet (0.1 for 256, 8192 in all), the course's 4
# ranks of 64, the Fujitsu study's 1024 (base_lr 0.01 for 256), the batch unchanged, a batch that
# is no whole multiple of the base.
RATE_CASES = (
    (0.1, 256, 8192),
    (0.05, 64, 256),
    (0.01, 256, 1024),
    (0.1, 256, 256),
    (0.02, 128, 1000),
)
# (weight_norm, grad_norm, weight_decay, threshold, eps): a layer of the course's VGG, a bias near
# zero (below the threshold), a tiny gradient, no gradient at all, a norm exactly at the threshold,
# other threshold and eps.
LARS_CASES = (
    (2.0, 0.5, 5e-4, 1e-2, 1e-9),
    (0.005, 0.3, 5e-4, 1e-2, 1e-9),
    (10.0, 0.01, 0.0, 1e-2, 1e-9),
    (3.0, 0.0, 1e-3, 1e-2, 1e-9),
    (0.01, 1.0, 0.0, 1e-2, 1e-9),
    (1.0, 2.0, 1e-4, 0.5, 1e-6),
)

RELATIVE = 1e-6  # float32 arithmetic agrees this far; every known mistake is off by far more

Mistake = tuple[str, Callable[..., Any]]


def _rates(base_lr: float, base_batch: int, batch: int) -> tuple[float, float]:
    return largebatch.large_batch_rates(base_lr, base_batch, batch)


def _rate_mistakes() -> tuple[Mistake, ...]:
    """large_batch_rates's known mistakes, named in the student's language."""
    return (
        (
            _("your rates fall as the batch grows"),
            lambda lr, b0, b: _rates(lr, b, b0),
        ),
        (
            _("your square-root rule's rate does not double when the base rate doubles"),
            lambda lr, b0, b: (_rates(lr, b0, b)[0], math.sqrt(lr * b / b0)),
        ),
        (
            _("your square-root rule's rate is not the base rate when the batch is unchanged"),
            lambda lr, b0, b: (_rates(lr, b0, b)[0], lr * math.sqrt(b)),
        ),
        (
            _("check the order of the pair the exercise asks for"),
            lambda lr, b0, b: _rates(lr, b0, b)[::-1],
        ),
        (
            _("your rates jump by whole steps as the batch grows"),
            lambda lr, b0, b: _rates(lr, 1, b // b0),
        ),
    )


def _local(w: float, g: float, wd: float, threshold: float, eps: float) -> float:
    return largebatch.lars_local_rate(w, g, wd, threshold, eps)


def _lars_mistakes() -> tuple[Mistake, ...]:
    """lars_local_rate's known mistakes, named in the student's language."""
    return (
        (
            _("your factor grows with the gradient's norm"),
            lambda w, g, wd, t, e: 1 / _local(w, g, wd, t, e) if w > t else 1.0,
        ),
        (
            _("your factor does not depend on the threshold"),
            lambda w, g, wd, t, e: _local(w, g, wd, 0.0, e) if w > 0 else 1.0,
        ),
        (
            _("check a layer on each side of the threshold: which one does the hook scale?"),
            lambda w, g, wd, t, e: 1.0 if w > t else _local(w, g, wd, 0.0, e),
        ),
        (
            _("check a weight norm exactly at the threshold against the hook's source"),
            lambda w, g, wd, t, e: _local(w, g, wd, t * (1 - 1e-12), e),
        ),
        (
            _("your factor does not change with weight_decay"),
            lambda w, g, wd, t, e: _local(w, g, 0.0, t, e),
        ),
        (
            _(
                "your decay term changes with the gradient's norm: what does the hook's source add "
                "the decay to?"
            ),
            lambda w, g, wd, t, e: w / (e + g + wd * g) if w > t else 1.0,
        ),
    )


def close(value: float, expected: float) -> bool:
    return math.isclose(value, expected, rel_tol=RELATIVE, abs_tol=1e-15)


def _parts(value: Any) -> tuple[float, ...]:
    return tuple(value) if isinstance(value, tuple) else (value,)


def _matches(found: tuple[float, ...], other: Any) -> bool:
    return all(close(a, b) for a, b in zip(found, _parts(other), strict=True))


def _diagnosis(
    found: list[tuple[float, ...]],
    reference: Callable[..., Any],
    mistakes: Iterable[Mistake],
    cases: list[tuple],
    wrong_at: int,
) -> str:
    """The known mistakes (slips of `reference`) that give every one of the student's values
    `found` on `cases`, else those that give the value of the first wrong case, `wrong_at`, and
    are wrong there; or a plain pointer back to the lesson."""
    right = _parts(reference(*cases[wrong_at]))
    everywhere = [
        what
        for what, model in mistakes
        if all(_matches(value, model(*case)) for value, case in zip(found, cases, strict=True))
    ]
    there = [
        what
        for what, model in mistakes
        if _matches(found[wrong_at], slip := model(*cases[wrong_at]))
        and not _matches(_parts(slip), right)
    ]
    matched = everywhere or there
    if not matched:
        return _("no known slip gives that: work the case through again as the lesson describes")
    return _("it looks like {mistakes}").format(mistakes=_either(matched))


def _either(mistakes: list[str]) -> str:
    """Known mistakes that all give the student's number, named one after the other."""
    named = mistakes[0]
    for other in mistakes[1:]:
        # TRANSLATORS: two known mistakes that both give the student's number ({first} may be
        # two already joined).
        named = _("{first}; or {second}").format(first=named, second=other)
    return named


def _shown(name: str, case: tuple) -> str:
    return "{}({})".format(name, ", ".join(repr(part) for part in case))


def _observed(name: str, facts: Any, cases: list[tuple]) -> None:
    __tracebackhide__ = True
    if not isinstance(facts, list) or len(facts) != len(cases):
        found = len(facts) if isinstance(facts, list) else 0
        fail(
            _("{name} was observed on {found} cases, not {cases}").format(
                name=name, found=found, cases=len(cases)
            )
        )


def _draw() -> random.SystemRandom:
    return random.SystemRandom()


def rates(large_batch_rates: Callable[..., Any], cases: Iterable[tuple] = RATE_CASES) -> None:
    """large_batch_rates(base_lr, base_batch, batch) gives the kit's pair on `cases` and one drawn
    case."""
    __tracebackhide__ = True
    draw = _draw()
    base = draw.randint(16, 512)
    every = [
        *cases,
        (
            round(10 ** draw.uniform(-3, 0), 6),
            base,
            base * draw.randint(2, 64) + draw.randint(1, base - 1),
        ),
    ]
    name = large_batch_rates.__name__
    facts = observe(observers.rates, large_batch_rates, cases=[list(case) for case in every])
    _observed(name, facts, every)
    found: list[tuple[float, ...]] = []
    for case, fact in zip(every, facts, strict=True):
        shown = _shown(name, case)
        if fact["pair"] is None:
            fail(
                _(
                    "{call} returned {type}, not the pair (linear rule's rate, square-root rule's "
                    "rate)"
                ).format(call=shown, type=fact["type"])
            )
        first, second = (number(part["value"]) for part in fact["pair"])
        if first is None or second is None:
            types = [part["type"] for part in fact["pair"]]
            fail(
                _("{call} returned ({first}, {second}), not two numbers").format(
                    call=shown, first=types[0], second=types[1]
                )
            )
        assert first is not None and second is not None
        found.append((first, second))
    for at, (case, (first, second)) in enumerate(zip(every, found, strict=True)):
        right = largebatch.large_batch_rates(*case)
        expect(
            _matches((first, second), right),
            # TRANSLATORS: never the kit's numbers: a student would copy them.
            _("{call} returned ({linear:.6g}, {root:.6g}), which is not the kit's pair").format(
                call=_shown(name, case), linear=first, root=second
            ),
            _diagnosis(found, largebatch.large_batch_rates, _rate_mistakes(), every, at),
        )
    passed(
        _("{name}: the kit's two rates in {count} cases, one of them drawn at random").format(
            name=name, count=len(every)
        )
    )


def lars(lars_local_rate: Callable[..., Any], cases: Iterable[tuple] = LARS_CASES) -> None:
    """lars_local_rate(weight_norm, grad_norm, weight_decay, threshold, eps) gives GradientLARS's
    factor on `cases` and one drawn case."""
    __tracebackhide__ = True
    draw = _draw()
    drawn = (
        10 ** draw.uniform(-1, 2),
        10 ** draw.uniform(-3, 1),
        10 ** draw.uniform(-5, -2),
        10 ** draw.uniform(-3, -1.5),
        1e-9,
    )
    every = [*cases, drawn]
    name = lars_local_rate.__name__
    facts = observe(observers.local_rates, lars_local_rate, cases=[list(case) for case in every])
    _observed(name, facts, every)
    found: list[tuple[float, ...]] = []
    for case, fact in zip(every, facts, strict=True):
        value = number(fact["value"])
        if value is None:
            fail(
                _("{call} returned {type}, not a number").format(
                    call=_shown(name, case), type=fact["type"]
                )
            )
        assert value is not None
        found.append((value,))
    for at, (case, (value,)) in enumerate(zip(every, found, strict=True)):
        expected = largebatch.lars_local_rate(*case)
        expect(
            close(value, expected),
            _(
                "{call} returned {value:.6g}, which is not the factor Chainer's GradientLARS "
                "multiplies the gradient by"
            ).format(call=_shown(name, case), value=value),
            _diagnosis(found, largebatch.lars_local_rate, _lars_mistakes(), every, at),
        )
    passed(
        _("{name}: the kit's local rate in {count} cases, one of them drawn at random").format(
            name=name, count=len(every)
        )
    )

"""Checks of the model-parallel exercise (notebook 08): the student's byte counts and pipeline idle.

    activation_bytes(batch, cut_shape) -> bytes across the cut of a 2-stage split, per step
    gradient_bytes(parameters, ranks) -> bytes all ranks send in one ring allreduce of the gradient
    idle_fraction(stages, micro_batches) -> the share of a step a pipeline stage waits

The checks observe what the functions return (course.lessons.beyond.model_parallel_observers, with
the kit's reference closed) and judge those numbers against course.lessons.beyond.parallelism. A
wrong number that
matches a known mistake gets a hint that names it; every check adds a case drawn at random, and the
hidden tests pass other cases, so that no case can simply be copied. `measured_run` compares the
student's counts with what the model-parallel job counted on this machine; its hidden test passes
the grader's accounting too, so that the run must be a job the scheduler ran for the student.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import course.lessons.beyond.model_parallel_observers as observers
from course import i18n
from course.cluster.accounting import Accounting
from course.contracts import model_parallel
from course.i18n import _
from course.lessons.beyond import model_parallel_report, parallelism
from course.notebook.checks.observe import number, observe
from course.notebook.checks.verdict import expect, fail, passed

# (batch, (C, H, W)): the course's VGG cut after block 2 at width 16, a wider one, one image of the
# input, an ImageNet-sized activation.
ACTIVATION_CASES = ((32, (32, 8, 8)), (64, (64, 4, 4)), (1, (3, 32, 32)), (128, (256, 14, 14)))
# (parameters, ranks): the course's VGG at width 16 on 2 ranks, ResNet-50 on 4 and 8, one rank.
GRADIENT_CASES = ((1_000_000, 2), (25_600_000, 4), (25_600_000, 8), (5_000, 1))
# (stages, micro-batches): the naive splits, pipelines, one stage (never idle).
IDLE_CASES = ((2, 1), (4, 1), (4, 8), (2, 16), (1, 4))

RELATIVE = 1e-9  # the same count in another order agrees far closer

Mistake = tuple[str, Callable[..., float]]


def _activation_mistakes() -> tuple[Mistake, ...]:
    """activation_bytes's known mistakes, named in the student's language."""
    return (
        (
            _("it counts the forward pass only: what crosses the cut in the backward pass?"),
            lambda b, shape: parallelism.activation_bytes(b, shape) / 2,
        ),
        (
            _("the unit is off: your count is of values, the question's of bytes"),
            lambda b, shape: parallelism.activation_bytes(b, shape) / parallelism.BYTES_PER_VALUE,
        ),
        (
            _("it counts bits: the question asks for bytes"),
            lambda b, shape: parallelism.activation_bytes(b, shape) * 8,
        ),
        (
            _("your count is the same for every batch size"),
            lambda b, shape: parallelism.activation_bytes(1, shape),
        ),
    )


def _gradient_mistakes() -> tuple[Mistake, ...]:
    """gradient_bytes's known mistakes, named in the student's language."""
    return (
        (
            _("it counts what one rank sends: the question asks for all ranks together"),
            lambda n, p: parallelism.gradient_bytes(n, p) / p,
        ),
        (
            _(
                "your ring stops before every rank holds the whole sum: follow a ring of 3 ranks "
                "by hand, step by step, to the end"
            ),
            lambda n, p: parallelism.gradient_bytes(n, p) / 2,
        ),
        (
            _("the unit is off: your count is of values, the question's of bytes"),
            lambda n, p: parallelism.gradient_bytes(n, p) / parallelism.BYTES_PER_VALUE,
        ),
        (
            _(
                "your count grows with the square of the ranks: in a ring, what does one rank send "
                "at each step?"
            ),
            lambda n, p: p * (p - 1) * n * parallelism.BYTES_PER_VALUE,
        ),
    )


def _idle_mistakes() -> tuple[Mistake, ...]:
    """idle_fraction's known mistakes, named in the student's language."""
    return (
        (
            _("your share does not change with the number of micro-batches"),
            lambda s, m: parallelism.idle_fraction(s, 1),
        ),
        (
            _("your share is of the time a stage works; on 1 stage, which never waits, it is 1"),
            lambda s, m: 1 - parallelism.idle_fraction(s, m),
        ),
        (
            _(
                "your step is too short: draw 2 stages and 1 micro-batch on a timeline and measure "
                "the whole step"
            ),
            lambda s, m: (s - 1) / m,
        ),
    )


def close(value: float, expected: float) -> bool:
    return math.isclose(value, expected, rel_tol=RELATIVE, abs_tol=1e-12)


def _either(mistakes: list[str]) -> str:
    """Known mistakes that all give the student's number, named one after the other."""
    named = mistakes[0]
    for other in mistakes[1:]:
        # TRANSLATORS: two known mistakes that both give the student's number ({first} may be
        # two already joined).
        named = _("{first}; or {second}").format(first=named, second=other)
    return named


def _diagnosis(
    value: float, right: float, mistakes: Iterable[Mistake], case: tuple, hint: str
) -> str:
    """The known mistakes `value` matches (on 2 ranks, one rank's share is also half the ring),
    or `hint`: the limits to work out by hand, never the kit's count (a student would copy it)."""
    matched = [
        what
        for what, model in mistakes
        if close(value, wrong := model(*case)) and not close(wrong, right)
    ]
    if matched:
        return _("it looks like {mistakes}").format(mistakes=_either(matched))
    return hint


def _judge(
    function: Callable[..., Any],
    cases: list[tuple],
    reference: Callable[..., float],
    mistakes: Iterable[Mistake],
    unit: str,
    hint: str,
) -> int:
    """Observe `function` on `cases`, judge each against `reference`; the number of cases.
    `hint`: the limits to work out by hand, said when no known mistake matches."""
    __tracebackhide__ = True
    facts = observe(observers.values, function, cases=[list(case) for case in cases])
    if len(facts) != len(cases):
        fail(
            _("{name} was observed on {found} cases, not {cases}").format(
                name=function.__name__, found=len(facts), cases=len(cases)
            )
        )
    for case, fact in zip(cases, facts, strict=True):
        shown = "{}({})".format(function.__name__, ", ".join(repr(part) for part in case))
        value = number(fact["value"])
        if value is None:
            fail(
                _("{call} returned {type}, not a number of {unit}").format(
                    call=shown, type=fact["type"], unit=unit
                )
            )
        expected = reference(*case)
        expect(
            close(value, expected),
            _("{call} returned {value:.6g}, which is not the kit's count of {unit}").format(
                call=shown, value=value, unit=unit
            ),
            _diagnosis(value, expected, mistakes, case, hint),
        )
    return len(cases)


def _draw() -> random.SystemRandom:
    return random.SystemRandom()


def activation(
    activation_bytes: Callable[..., Any], cases: Iterable[tuple] = ACTIVATION_CASES
) -> None:
    """activation_bytes(batch, cut_shape) counts the kit's bytes on `cases` and one drawn case."""
    __tracebackhide__ = True
    draw = _draw()
    drawn = (draw.randint(2, 512), (draw.randint(1, 512), draw.randint(1, 64), draw.randint(1, 64)))
    every = [(batch, tuple(shape)) for batch, shape in cases] + [drawn]
    count = _judge(
        activation_bytes,
        every,
        parallelism.activation_bytes,
        _activation_mistakes(),
        _("bytes"),
        _(
            "work it out by hand for a batch of 1 and a cut of one value: what crosses the cut in "
            "a training step, and how many bytes does each value take?"
        ),
    )
    passed(
        _("{name}: the kit's count in {count} cases, one of them drawn at random").format(
            name="activation_bytes", count=count
        )
    )


def gradient(gradient_bytes: Callable[..., Any], cases: Iterable[tuple] = GRADIENT_CASES) -> None:
    """gradient_bytes(parameters, ranks) counts the kit's bytes on `cases` and one drawn case."""
    __tracebackhide__ = True
    draw = _draw()
    every = [*cases, (draw.randint(1_000, 10**9), draw.randint(3, 256))]
    count = _judge(
        gradient_bytes,
        every,
        parallelism.gradient_bytes,
        _gradient_mistakes(),
        _("bytes"),
        _(
            "work it out by hand: 1 rank sends nothing; on 2 ranks, follow the ring step by step "
            "until both hold the sum"
        ),
    )
    passed(
        _("{name}: the kit's count in {count} cases, one of them drawn at random").format(
            name="gradient_bytes", count=count
        )
    )


def idle(idle_fraction: Callable[..., Any], cases: Iterable[tuple] = IDLE_CASES) -> None:
    """idle_fraction(stages, micro_batches) gives the kit's share on `cases` and one drawn case."""
    __tracebackhide__ = True
    draw = _draw()
    every = [*cases, (draw.randint(2, 64), draw.randint(2, 256))]
    count = _judge(
        idle_fraction,
        every,
        parallelism.idle_fraction,
        _idle_mistakes(),
        _("(a share of the step)"),
        _(
            "work it out by hand: 1 stage never waits; draw 2 stages and 1 micro-batch, then 2 "
            "micro-batches, on a timeline"
        ),
    )
    passed(
        _("{name}: the kit's share in {count} cases, one of them drawn at random").format(
            name="idle_fraction", count=count
        )
    )


def measured_run(
    activation_bytes: Callable[..., Any],
    gradient_bytes: Callable[..., Any],
    folder: Path = Path("."),
    checked: Accounting | None = None,
) -> dict[str, Any]:
    """The student's two counts on the setting of their traced model-parallel run equal what the
    run counted (the split's bytes) and the kit's ring count of the gradient the run exchanged;
    with `checked`, the run's job must be in the scheduler's records as the student's.
    Returns the run's summary (course.lessons.beyond.model_parallel_report.summary)."""
    __tracebackhide__ = True
    runs, left_out = model_parallel_report.sort_out(folder, checked)
    if left_out and not runs:
        why = i18n.listed(left_out, "; ")
        # TRANSLATORS: {why} is the reasons each run was left out, joined by "; " (in Japanese ；).
        fail(_("no model-parallel run in runs/ counts: {why}").format(why=why))
    if not runs:
        fail(
            _("there is no traced model-parallel run in runs/"),
            _("submit jobs/{script} (the cell above), wait for it, then run this cell").format(
                script=model_parallel.JOB_SCRIPT
            ),
        )
    for line in left_out:
        print(model_parallel_report.NOTE.format(note=line))
    run = max(runs, key=lambda run: run.started)
    facts = observe(
        observers.traffic,
        activation_bytes,
        gradient_bytes,
        batch=run.batch,
        cut_shape=list(run.cut_shape),
        parameters=run.parameters,
        ranks=run.ranks,
    )
    counted = {
        "activation": ("activation_bytes", run.activation_bytes),
        "gradient": ("gradient_bytes", parallelism.gradient_bytes(run.parameters, run.ranks)),
    }
    for key, (name, expected) in counted.items():
        value = number(facts[key]["value"])
        expect(
            value is not None,
            _("{name} returned {type} on your run's setting, not a number of bytes").format(
                name=name, type=facts[key]["type"]
            ),
        )
        assert value is not None
        expect(
            close(value, expected),
            _(
                "{name} on your run's setting (batch {batch}, cut {cut}, {parameters:,} "
                "parameters, {ranks} ranks) returned {value:.6g}; the run counted {expected:,} "
                "bytes"
            ).format(
                name=name,
                batch=run.batch,
                cut=list(run.cut_shape),
                parameters=run.parameters,
                ranks=run.ranks,
                value=value,
                expected=expected,
            ),
            _(
                "the check of {name} above names what is off: fix it there, then run this cell "
                "again"
            ).format(name=name),
        )
    passed(
        # TRANSLATORS: {run} is the run's file, e.g. runs/model_parallel-7.local/2r-1.json;
        # {gradient} is bytes too.
        _(
            "your counts are {run}'s: the split moved {activation:,} bytes a step, the ring "
            "{gradient:,}"
        ).format(run=run.run, activation=run.activation_bytes, gradient=counted["gradient"][1])
    )
    return model_parallel_report.summary(run)

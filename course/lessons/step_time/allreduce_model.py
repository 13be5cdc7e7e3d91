"""Checks of the allreduce exercise's model and fit: the student's α–β cost model and their fit of α
and β, judged against the kit's reference (course.lessons.step_time.costmodel) on the lesson's
cases and on cases
drawn at random (course.lessons.step_time.allreduce says how; the notebook calls them from
there)."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import course.lessons.step_time.allreduce_observers as observers
from course.i18n import _
from course.lessons.step_time import costmodel
from course.lessons.step_time.allreduce_mistakes import close, diagnosis
from course.notebook.checks.observe import number, observe
from course.notebook.checks.verdict import expect, fail, passed

# How close a student's fit of a measured series must be to the kit's, alpha and beta each
# (relative): the fits differ only in how the least-squares problem is solved. The grading of the
# prediction on shared cores derives its tolerance from this
# (course.lessons.step_time.allreduce_judge).
FIT_TOLERANCE = 0.02

# (algorithm, ranks, bytes, alpha, beta): a laptop-like and a cluster-like link, and one rank (no
# exchange).
VISIBLE_CASES = (
    ("ring", 4, 2**20, 5e-6, 1e-9),
    ("recursive_doubling", 4, 2**20, 5e-6, 1e-9),
    ("ring", 8, 64 * 2**20, 2e-6, 1e-10),
    ("recursive_doubling", 16, 4096, 2e-6, 1e-10),
    ("ring", 1, 2**20, 5e-6, 1e-9),
)


def _drawn_cases() -> list[tuple[str, int, int, float, float]]:
    """One case of each algorithm that nobody knows before the check runs (recursive doubling on a
    power of two, as the lesson's cases are)."""
    draw = random.SystemRandom()
    return [
        (
            algorithm,
            ranks,
            draw.randint(1, 2**27),
            10 ** draw.uniform(-7, -4),
            10 ** draw.uniform(-11, -8),
        )
        for algorithm, ranks in (
            ("ring", draw.randint(2, 64)),
            ("recursive_doubling", 2 ** draw.randint(1, 7)),
        )
    ]


def cost_model(
    allreduce_time: Callable[..., Any],
    cases: Iterable[tuple[str, int, int, float, float]] = VISIBLE_CASES,
) -> None:
    """allreduce_time(algorithm, n_ranks, message_bytes, alpha, beta) gives the reference model's
    seconds, on `cases` and on cases drawn at random."""
    __tracebackhide__ = True
    drawn = _drawn_cases()
    every = [*cases, *drawn]
    facts = observe(observers.times, allreduce_time, cases=[list(case) for case in every])
    for (algorithm, ranks, nbytes, alpha, beta), fact in zip(every, facts, strict=True):
        expected = costmodel.allreduce_seconds(algorithm, ranks, nbytes, alpha, beta)
        shown = f"allreduce_time({algorithm!r}, {ranks}, {nbytes}, {alpha:g}, {beta:g})"
        value = number(fact["seconds"])
        if value is None:
            fail(
                _("{call} returned {type}, not a number of seconds").format(
                    call=shown, type=fact["type"]
                )
            )
        expect(
            close(value, expected),
            _("{call} returned {value:.6g} s, which is not the alpha-beta model's time").format(
                call=shown, value=value
            ),
            diagnosis(value, algorithm, ranks, nbytes, alpha, beta),
        )
    passed(
        _(
            "allreduce_time: ring and recursive doubling match the alpha-beta model in {count} "
            "cases, {drawn} of them drawn at random"
        ).format(count=len(every), drawn=len(drawn))
    )


def fitted(fact: Any, what: str) -> tuple[float, float]:
    """The (alpha, beta) of a fit's facts (allreduce_observers._pair), or why they are none."""
    __tracebackhide__ = True
    pair = fact["pair"]
    expect(
        pair is not None,
        _("fit_alpha_beta returned {type} on {what}, not the pair (alpha, beta)").format(
            type=fact["type"], what=what
        ),
    )
    first, second = pair
    alpha, beta = number(first), number(second)
    expect(
        alpha is not None and beta is not None,
        _("fit_alpha_beta returned ({first}, {second}) on {what}, not two numbers").format(
            first=fact["types"][0], second=fact["types"][1], what=what
        ),
    )
    assert alpha is not None and beta is not None
    return alpha, beta


def _compare(
    got: tuple[float, float], expected: tuple[float, float], relative: float, what: str, hint: str
) -> None:
    """Whether a fit is the expected (alpha, beta); a failure names which of the two is off and
    which way, never the expected values (a student would copy them)."""
    __tracebackhide__ = True
    if close(got[0], expected[1], relative) and close(got[1], expected[0], relative):
        fail(
            _(
                "fit_alpha_beta on {what} returned ({first:.4g}, {second:.4g}): the first is "
                "seconds per byte and the second seconds per message, by their sizes"
            ).format(what=what, first=got[0], second=got[1]),
            _("check the order of the pair the exercise asks for"),
        )
    off = [
        name
        for name, mine, kits in (("alpha", got[0], expected[0]), ("beta", got[1], expected[1]))
        if not close(mine, kits, relative)
    ]
    expect(
        not off,
        _(
            "fit_alpha_beta on {what} returned alpha {got_alpha:.4g} s, beta {got_beta:.4g} "
            "s/byte: {off} not the kit's fit of the same times (within {relative:.0%})"
        ).format(
            what=what,
            got_alpha=got[0],
            got_beta=got[1],
            off=" & ".join(off),
            relative=relative,
        ),
        hint,
    )


def fit(
    fit_alpha_beta: Callable[..., Any],
    table: Sequence,
    alpha: float = 3e-6,
    beta: float = 2e-10,
    tolerance: float = FIT_TOLERANCE,
) -> None:
    """fit_alpha_beta recovers (alpha, beta) from exact model times (and a pair drawn at random),
    and on the measured `table` (the Series of
    course.lessons.step_time.allreduce_report.measured_table)
    agrees with the kit's relative-error fit."""
    __tracebackhide__ = True
    sizes = [1024 * 4**k for k in range(1, 9)]
    draw = random.SystemRandom()
    exact = [
        ("ring", 4, alpha, beta),
        ("recursive_doubling", 2, alpha, beta),
        ("recursive_doubling", 8, alpha, beta),
        (
            draw.choice(costmodel.ALGORITHMS),
            2 ** draw.randint(1, 6),
            10 ** draw.uniform(-6, -4.5),
            10 ** draw.uniform(-10.5, -8.5),
        ),
    ]
    measured = [
        s for s in table if s.algorithm in costmodel.ALGORITHMS and s.ranks > 1 and len(s.sizes) > 1
    ]
    series = [
        [sizes, [costmodel.allreduce_seconds(a, p, n, al, be) for n in sizes], a, p]
        for a, p, al, be in exact
    ] + [[s.sizes, s.median, s.algorithm, s.ranks] for s in measured]
    facts = observe(observers.fits, fit_alpha_beta, series=series)
    if len(facts) != len(series):
        fail(
            _("fit_alpha_beta was observed on {found} series, not {series}").format(
                found=len(facts), series=len(series)
            )
        )
    for (algorithm, ranks, a, b), fact in zip(exact, facts):
        what = _("exact {algorithm} times on {ranks} ranks").format(
            algorithm=algorithm, ranks=ranks
        )
        _compare(
            fitted(fact, what),
            (a, b),
            1e-4,
            what,
            _(
                "these times follow the model exactly, so a least-squares fit of the model's two "
                "terms gives alpha and beta back; the terms' coefficients are those of "
                "allreduce_time"
            ),
        )
    expect(
        bool(measured),
        _("there is no measured ring or recursive_doubling series to fit"),
        _("submit jobs/run_allreduce_benchmark.sh, then allreduce_report.measured_table() again"),
    )
    for s, fact in zip(measured, facts[len(exact) :]):
        what = _("the measured {series}").format(series=s.label)
        _compare(
            fitted(fact, what),
            costmodel.fit(s.sizes, s.median, s.algorithm, s.ranks),
            tolerance,
            what,
            _(
                "your fit follows the largest messages: how much do the small messages' times "
                "count in it?"
            ),
        )
    passed(
        _(
            "fit_alpha_beta: recovers alpha and beta from exact times, and fits {count} measured "
            "series as the kit does"
        ).format(count=len(measured))
    )

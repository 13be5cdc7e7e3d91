"""The mistakes the cost-model check recognises in a student's allreduce_time, and the hint that
names the one a wrong number matches (computed by the judge, with the kit's
course.lessons.step_time.costmodel)."""

from __future__ import annotations

import math
from collections.abc import Callable

from course.i18n import _
from course.lessons.step_time import costmodel

RELATIVE = 1e-6  # the same formula computed in another order agrees far closer than this

Mistake = tuple[str | None, str, Callable[[str, int, float, float, float], float]]


def _mistakes() -> tuple[Mistake, ...]:
    """Mistakes the checks recognise: (the algorithm it applies to, what property of the answer it
    breaks, in the student's language, a cost model that makes it). Each names what is wrong with
    the answer, never the corrected formula (a student who only read the fix would earn it)."""
    return (
        (
            None,
            _(
                "the units of your answer are off: alpha is seconds per message and beta seconds "
                "per byte; check which one your bytes are multiplied by"
            ),
            lambda a, p, n, al, be: costmodel.allreduce_seconds(a, p, n, be, al),
        ),
        (
            None,
            _(
                "your transfer term is too large for the bytes given: message_bytes is already in "
                "the unit that beta is per"
            ),
            lambda a, p, n, al, be: costmodel.allreduce_seconds(a, p, 8 * n, al, be),
        ),
        (
            "ring",
            _(
                "your ring costs time on a single rank, where there is no neighbour to exchange "
                "with: work out a ring of 1 and of 2 ranks by hand"
            ),
            lambda a, p, n, al, be: 2 * p * al + 2 * n * be,
        ),
        (
            "ring",
            _(
                "your ring's bytes term is the same whatever the number of ranks: work out by hand "
                "what one rank sends on 2 ranks, then on many"
            ),
            lambda a, p, n, al, be: 2 * (p - 1) * al + n * be,
        ),
        (
            "ring",
            _(
                "your ring stops before every rank holds the whole sum: follow a ring of 3 ranks "
                "by hand, step by step, to the end"
            ),
            lambda a, p, n, al, be: (p - 1) * al + (p - 1) / p * n * be,
        ),
        (
            "recursive_doubling",
            _(
                "your recursive doubling's steps grow in proportion to the ranks: count by hand "
                "how many pairings 4 and 8 ranks need before each holds the sum"
            ),
            lambda a, p, n, al, be: p * (al + n * be),
        ),
        (
            "recursive_doubling",
            _(
                "your recursive doubling sends as many bytes on many ranks as on 2: what does a "
                "rank send at each of its steps?"
            ),
            lambda a, p, n, al, be: math.log2(p) * al + n * be,
        ),
    )


def close(value: float, expected: float, relative: float = RELATIVE) -> bool:
    """Whether a student's number is the expected one, to `relative`."""
    return math.isclose(value, expected, rel_tol=relative, abs_tol=1e-15)


def diagnosis(
    value: float, algorithm: str, ranks: int, nbytes: float, alpha: float, beta: float
) -> str:
    """The property of the answer that the known mistake `value` matches breaks, or the limits to
    check by hand; never the model's number (a student would only copy it)."""
    right = costmodel.allreduce_seconds(algorithm, ranks, nbytes, alpha, beta)
    for applies_to, what, model in _mistakes():
        if applies_to not in (None, algorithm):
            continue
        wrong = model(algorithm, ranks, nbytes, alpha, beta)
        if close(value, wrong) and not close(wrong, right):
            return _("it looks like {mistake}").format(mistake=what)
    if ranks == 1:
        return _("one rank alone exchanges nothing: what does an allreduce of 1 rank cost?")
    return _(
        "check your model where you can work it out by hand: 1 rank exchanges nothing, a message "
        "of 0 bytes costs only latency (alpha per step), and each further byte adds the same "
        "transfer time (beta per byte sent)"
    )

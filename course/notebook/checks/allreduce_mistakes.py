"""The mistakes the cost-model check recognises in a student's allreduce_time, and the hint that
names the one a wrong number matches (computed by the judge, with the kit's course.costmodel)."""

from __future__ import annotations

import math
from collections.abc import Callable

from course import costmodel
from course.i18n import _

RELATIVE = 1e-6  # the same formula computed in another order agrees far closer than this

Mistake = tuple[str | None, str, Callable[[str, int, float, float, float], float]]


def _mistakes() -> tuple[Mistake, ...]:
    """Mistakes the checks recognise: (the algorithm it applies to, what it is, in the student's
    language, a cost model that makes it)."""
    return (
        (
            None,
            _("alpha and beta are swapped"),
            lambda a, p, n, al, be: costmodel.allreduce_seconds(a, p, n, be, al),
        ),
        (
            None,
            _("the message is n bytes: do not multiply by 8 (bits)"),
            lambda a, p, n, al, be: costmodel.allreduce_seconds(a, p, 8 * n, al, be),
        ),
        (
            "ring",
            _("the ring counts p where it takes p - 1: 2(p-1) steps, 2(p-1)/p of the bytes"),
            lambda a, p, n, al, be: 2 * p * al + 2 * n * be,
        ),
        (
            "ring",
            _(
                "the ring sends 2(p-1)/p x n bytes, not n: reduce-scatter and allgather each move "
                "(p-1)/p of them"
            ),
            lambda a, p, n, al, be: 2 * (p - 1) * al + n * be,
        ),
        (
            "ring",
            _(
                "the ring takes 2(p - 1) steps, not p - 1: reduce-scatter then allgather, p - 1 "
                "steps each"
            ),
            lambda a, p, n, al, be: (p - 1) * al + (p - 1) / p * n * be,
        ),
        (
            "recursive_doubling",
            _("recursive doubling takes log2(p) steps, not p"),
            lambda a, p, n, al, be: p * (al + n * be),
        ),
        (
            "recursive_doubling",
            _(
                "recursive doubling sends the whole vector at each of its log2(p) steps: log2(p) x "
                "n bytes, not n"
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
    """The known mistake `value` matches, or the formula to compare with."""
    right = costmodel.allreduce_seconds(algorithm, ranks, nbytes, alpha, beta)
    for applies_to, what, model in _mistakes():
        if applies_to not in (None, algorithm):
            continue
        wrong = model(algorithm, ranks, nbytes, alpha, beta)
        if close(value, wrong) and not close(wrong, right):
            return _("it looks like {mistake}").format(mistake=what)
    latency = costmodel.allreduce_seconds(algorithm, ranks, nbytes, alpha, 0.0)
    if not right:
        return _(
            "the model's {right:.6g} s is {latency:.6g} s of latency (alpha per step) plus "
            "{transfer:.6g} s of transfer (beta per byte sent): count {algorithm}'s steps on "
            "{ranks} ranks and the bytes each rank sends, as the lesson's alpha-beta model does"
        ).format(
            right=right,
            latency=latency,
            transfer=right - latency,
            algorithm=algorithm,
            ranks=ranks,
        )
    return _(
        "the model's {right:.6g} s is {latency:.6g} s of latency (alpha per step) plus "
        "{transfer:.6g} s of transfer (beta per byte sent); yours is {times:.3g} times it: count "
        "{algorithm}'s steps on {ranks} ranks and the bytes each rank sends, as the lesson's "
        "alpha-beta model does"
    ).format(
        right=right,
        latency=latency,
        transfer=right - latency,
        times=value / right,
        algorithm=algorithm,
        ranks=ranks,
    )

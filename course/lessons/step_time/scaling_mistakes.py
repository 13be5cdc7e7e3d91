"""The mistakes the scaling checks (course.lessons.step_time.scaling) recognise, per exercise: each
a
slip of the kit's reference (course.lessons.step_time.scalingmodel) computed by the judge, never by
the student's
functions, with the words that name it.

The tables (SHARES, PLAN, EXCHANGE) are built where they are read (the module's `__getattr__`),
so that their words are in the student's language (COURSE_LANG) at that moment."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from course.i18n import _
from course.lessons.step_time import scalingmodel

Mistake = tuple[str, Callable[..., dict]]  # (what it is, the reference with that slip, on a case)

_COMPUTE = ("forward", "backward")


def _shares_of(profile: Mapping[str, float], step: float, not_computing: tuple[str, ...]) -> dict:
    shares = {phase: ms / step for phase, ms in profile.items()}
    return {"shares": shares, "not_computing": sum(shares.get(p, 0.0) for p in not_computing)}


def _percent(profile: Mapping[str, float]) -> dict:
    right = scalingmodel.step_shares(profile)
    return {
        "shares": {phase: 100 * share for phase, share in right["shares"].items()},
        "not_computing": 100 * right["not_computing"],
    }


def _only_compute_is_work(profile: Mapping[str, float]) -> dict:
    right = scalingmodel.step_shares(profile)
    computing = sum(right["shares"].get(phase, 0.0) for phase in _COMPUTE)
    return {"shares": right["shares"], "not_computing": 1 - computing}


def _shares_mistakes() -> tuple[Mistake, ...]:
    return (
        (
            _("your shares add up to more than the whole step"),
            lambda profile: _shares_of(
                profile, sum(profile.get(p, 0.0) for p in _COMPUTE), scalingmodel.NOT_COMPUTING
            ),
        ),
        (
            _("your time not computing misses a phase in which a rank does none of its own work"),
            lambda profile: _shares_of(profile, sum(profile.values()), ("allreduce",)),
        ),
        (
            _("your numbers are on another scale: the shares of a whole step add up to 1"),
            _percent,
        ),
        (
            _("your time not computing takes in phases where a rank does its own work"),
            _only_compute_is_work,
        ),
    )


def _plan(updates: int, lr: float, total: int) -> dict:
    return {"total_batch": total, "updates_per_epoch": updates, "lr": lr}


def _right(gpus: int, per_gpu: int, images: int, lr: float, base: int) -> dict:
    return scalingmodel.run_plan(gpus, per_gpu, images, lr, base)


def _plan_mistakes() -> tuple[Mistake, ...]:
    return (
        (
            _("your updates per epoch do not change with the number of GPUs"),
            lambda g, b, n, lr, b0: {**_right(g, b, n, lr, b0), "updates_per_epoch": -(-n // b)},
        ),
        (
            _("your updates per epoch leave some of the epoch's images out"),
            lambda g, b, n, lr, b0: {**_right(g, b, n, lr, b0), "updates_per_epoch": n // (g * b)},
        ),
        (
            _("your rate does not change with the images per GPU"),
            lambda g, b, n, lr, b0: {**_right(g, b, n, lr, b0), "lr": lr * g},
        ),
        (
            _("your rate falls as the total batch grows"),
            lambda g, b, n, lr, b0: {**_right(g, b, n, lr, b0), "lr": lr * b0 / (g * b)},
        ),
    )


def _implied(speedup: float, n: int, t: float) -> dict:
    return scalingmodel.implied_exchange(speedup, n, t)


def _exchange_mistakes() -> tuple[Mistake, ...]:
    return (
        (
            _(
                "your step's compute shrinks as GPUs are added: with weak scaling, does a GPU's "
                "compute per step change?"
            ),
            lambda s, n, t: {**_implied(s, n, t), "exchange_seconds": t / s - t / n},
        ),
        (
            _("your efficiency is above 1 when the speedup is below the number of GPUs"),
            lambda s, n, t: {**_implied(s, n, t), "efficiency": n / s},
        ),
        (
            _("your exchange shrinks as GPUs are added at the same efficiency"),
            lambda s, n, t: {**_implied(s, n, t), "exchange_seconds": t / s},
        ),
        (
            _(
                "your exchange is not 0 at the ideal speedup (N times on N GPUs), where a step is "
                "all compute"
            ),
            lambda s, n, t: {**_implied(s, n, t), "exchange_seconds": t * n / s},
        ),
    )


# The module's tables, by name, each built when it is read.
_TABLES: dict[str, Callable[[], tuple[Mistake, ...]]] = {
    "SHARES": _shares_mistakes,
    "PLAN": _plan_mistakes,
    "EXCHANGE": _exchange_mistakes,
}


def __getattr__(name: str) -> tuple[Mistake, ...]:
    """SHARES, PLAN or EXCHANGE: the known mistakes of step_shares, run_plan or implied_exchange,
    in the student's language."""
    if name in _TABLES:
        return _TABLES[name]()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def flat(numbers: Mapping[str, Any]) -> dict[str, float]:
    """A reference's dict as the observer reports a student's: "key/inner key" for a dict within."""
    found: dict[str, float] = {}
    for key, value in numbers.items():
        if isinstance(value, Mapping):
            found.update({f"{key}/{inner}": float(v) for inner, v in value.items()})
        else:
            found[key] = float(value)
    return found


RELATIVE = 1e-6  # float arithmetic in any order agrees this far; every known mistake is off more
COUNTS = ("total_batch", "updates_per_epoch")  # whole numbers: only the exact one is right


def agrees(key: str, value: float, expected: float) -> bool:
    """Whether the student's `value` of `key` is the `expected` one."""
    if key in COUNTS:
        return value == expected
    return math.isclose(value, expected, rel_tol=RELATIVE, abs_tol=1e-12)


def matches(found: Mapping[str, float], numbers: Mapping[str, float]) -> bool:
    """Whether the student's numbers `found` are `numbers` (both flat), key by key."""
    return all(key in found and agrees(key, found[key], value) for key, value in numbers.items())

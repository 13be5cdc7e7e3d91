"""The check of stage 3 that needs no MPI ranks: learning_rate_schedule, judged on the learning
rates a trainer with it really used. It observes the student's function where it is (mn_observers,
through observe) and judges the facts here; the notebooks call it as checks.multi_node.<check>."""

from __future__ import annotations

from typing import Any

from course import i18n
from course.i18n import _
from course.lessons.core.mn_observers import schedule_rates
from course.notebook.checks.observe import finite, observe
from course.notebook.checks.verdict import expect, passed


def learning_rate_schedule(
    schedule: Any,
    base_lr: float = 0.1,
    n_workers: int = 4,
    warmup_iterations: int = 8,
) -> None:
    """The rates the optimizer really uses: base_lr at the first update, n_workers x base_lr after
    the warm-up."""
    __tracebackhide__ = True
    updates = warmup_iterations + 4
    facts = observe(
        schedule_rates,
        schedule,
        base_lr=base_lr,
        n_workers=n_workers,
        warmup_iterations=warmup_iterations,
        updates=updates,
    )
    rates = facts["rates"]
    expect(
        rates is not None,
        _("learning_rate_schedule returned {kind}, not a trainer extension").format(
            kind=facts["type"]
        ),
        _(
            "the trainer runs extensions; one of Chainer's (see 'Extensions' in its reference) "
            "changes an optimizer attribute linearly over a number of iterations"
        ),
    )
    expect(
        isinstance(rates, list) and all(finite(r) for r in rates),
        _("the optimizer's rate became something that is not a number: {rates}").format(
            rates=rates
        ),
        _("the extension should set the optimizer's lr attribute to a number at each update"),
    )
    used = [float(r) for r in rates]
    ramp = [
        base_lr * (1 + (n_workers - 1) * min(t, warmup_iterations) / warmup_iterations)
        for t in range(updates)
    ]
    shown = i18n.listed(f"{r:.3g}" for r in used)
    target = base_lr * n_workers

    def close(a: float, b: float) -> bool:
        return abs(a - b) <= 1e-6 * max(1.0, abs(b))

    expect(
        len(used) == updates,
        _("{ran} updates ran instead of {updates}").format(ran=len(used), updates=updates),
    )
    expect(
        close(used[-1], target) or not close(used[-1], base_lr),
        _(
            "with {n_workers} workers the rate stays at the single-worker rate {base_lr} (rates "
            "used: {shown}): no scaling"
        ).format(n_workers=n_workers, base_lr=base_lr, shown=shown),
        _(
            "the linear scaling rule: {n_workers} workers move {n_workers} times the batch per "
            "update, so the rate should reach {target:g}"
        ).format(n_workers=n_workers, target=target),
    )
    expect(
        close(used[-1], target),
        _(
            "after the warm-up the rate is {rate:.3g}, not base_lr x n_workers = {target:g} "
            "(rates used: {shown})"
        ).format(rate=used[-1], target=target, shown=shown),
        _(
            "the ramp should end at the scaled rate, {n_workers} times the single-worker rate"
        ).format(n_workers=n_workers),
    )
    expect(
        close(used[0], base_lr),
        _(
            "the first update used the rate {rate:.3g}, not the single-worker rate {base_lr} "
            "(rates used: {shown}): no warm-up, so the first updates of a large batch take too "
            "large steps"
        ).format(rate=used[0], base_lr=base_lr, shown=shown),
        _(
            "a gradual warm-up (Goyal et al. 2017, in the lesson) starts from the single-worker "
            "rate while the weights are still random"
        ),
    )
    expect(
        all(close(a, b) for a, b in zip(used, ramp)),
        _("the rates used were {shown}; a linear ramp over {warmup} updates gives {ramp}").format(
            shown=shown, warmup=warmup_iterations, ramp=i18n.listed(f"{r:.3g}" for r in ramp)
        ),
        _("the warm-up should reach the scaled rate at update {warmup} and stay there").format(
            warmup=warmup_iterations
        ),
    )
    passed(
        _(
            "learning_rate_schedule: the rate ramps linearly from {base_lr} to {target:g} over "
            "{warmup} updates, then stays ({shown})"
        ).format(base_lr=base_lr, target=target, warmup=warmup_iterations, shown=shown)
    )

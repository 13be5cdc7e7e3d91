"""The large-batch rules of notebook 06, as the kit's reference: what the checks judge the
student's functions against (course.lessons.accuracy.large_batch), and what the training harness
scales the rate by (course.runtime.lr_policy).

Linear scaling (Goyal et al. 2017) multiplies the rate by the batch's growth k; the square-root rule
(Krizhevsky 2014, Hoffer et al. 2017) by sqrt(k), which keeps the variance of an update's noise as
it was. LARS (You et al. 2017) scales each layer's step by its own trust ratio, as Chainer's
`chainer.optimizer_hooks.GradientLARS` computes it.
"""

from __future__ import annotations

import math

# chainer.optimizer_hooks.GradientLARS's defaults (Chainer 7): at or below this weight norm a
# layer keeps the global rate; eps keeps a zero gradient from dividing by zero.
LARS_THRESHOLD = 1e-2
LARS_EPS = 1e-9


def large_batch_rates(base_lr: float, base_batch: int, batch: int) -> tuple[float, float]:
    """The rates of the linear and of the square-root rule for `batch`, when `base_lr` suits
    `base_batch`: (linear, square root)."""
    growth = batch / base_batch
    return base_lr * growth, base_lr * math.sqrt(growth)


def rate_factor(rule: str, workers: int) -> float:
    """What a rule of stages.LR_RULES multiplies the single-worker rate by on `workers` workers
    (the batch grows `workers` times): constant none, sqrt the square root, the others linear."""
    if rule == "constant":
        return 1.0
    linear, square_root = large_batch_rates(1.0, 1, workers)
    return square_root if rule == "sqrt" else linear


def lars_local_rate(
    weight_norm: float,
    grad_norm: float,
    weight_decay: float,
    threshold: float = LARS_THRESHOLD,
    eps: float = LARS_EPS,
) -> float:
    """The factor GradientLARS multiplies a layer's gradient (weight decay added) by: the trust
    ratio ||w|| / (eps + ||g|| + weight_decay ||w||) where ||w|| exceeds `threshold`, else 1."""
    if weight_norm > threshold:
        return weight_norm / (eps + grad_norm + weight_decay * weight_norm)
    return 1.0

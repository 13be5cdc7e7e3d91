"""What the stage-3 checks compare the ranks' facts with, computed in the checking process from
the seed it chose (mn_settings.rank_case): a communicator's broadcast and mean of the ranks'
arrays, and the updates of a real multi-node optimizer. Nothing here runs a student's code."""

from __future__ import annotations

from typing import Any

import numpy as np

from course.lessons.core.mn_settings import link, rank_case

# float32 arithmetic, summed over the ranks in another order than here
RTOL, ATOL = 1e-4, 1e-5


def array(fact: Any, shape: tuple[int, ...]) -> np.ndarray | None:
    """A fact that should be numbers of `shape` (nested lists), as float64; None when it is not."""
    try:
        found = np.asarray(fact, dtype=np.float64)
    except (TypeError, ValueError):
        return None
    return found if found.shape == shape and bool(np.all(np.isfinite(found))) else None


def close(found: np.ndarray | None, expected: np.ndarray) -> bool:
    return found is not None and bool(np.allclose(found, expected, rtol=RTOL, atol=ATOL))


def _flat(*arrays: np.ndarray) -> np.ndarray:
    return np.concatenate([np.asarray(a, dtype=np.float64).ravel() for a in arrays])


def exchanged(seed: int, size: int) -> tuple[np.ndarray, np.ndarray]:
    """(rank 0's W and b, the ranks' mean W and b gradients), flat: what a communicator's
    bcast_data and multi_node_mean_grad leave on every rank."""
    cases = [rank_case(seed, rank) for rank in range(size)]
    mean = [np.mean([c[name] for c in cases], axis=0) for name in ("W_grad", "b_grad")]
    return _flat(cases[0]["W"], cases[0]["b"]), _flat(*mean)


def multi_node_step(seed: int, size: int) -> tuple[np.ndarray, np.ndarray]:
    """(rank 0's starting W and b, the mean over the ranks of the gradients there on each rank's
    batch), flat. A multi-node optimizer's first update sends rank 0's weights to every rank; its
    second moves them by -lr x that mean (MomentumSGD's first step has no momentum yet)."""
    import chainer
    import chainer.links as L

    start = rank_case(seed, 0)
    gradients = []
    for rank in range(size):
        case = rank_case(seed, rank)
        model = L.Classifier(link(start))
        model.cleargrads()
        with chainer.using_config("train", True):
            model(case["x"], case["t"]).backward()
        gradients.append(_flat(model.predictor.W.grad, model.predictor.b.grad))
    return _flat(start["W"], start["b"]), np.mean(gradients, axis=0)


def rate_of(step: np.ndarray, gradient: np.ndarray) -> float | None:
    """The learning rate of `step` when it is -rate x `gradient` (rate > 0), else None."""
    rate = -float(step @ gradient) / float(gradient @ gradient)
    if rate <= 0 or not close(step, -rate * gradient):
        return None
    return rate

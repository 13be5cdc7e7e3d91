"""What both sides of the stage-3 probe agree on: the launcher (mn_ranks) sets them up, the ranks
(mn_probe, under mpiexec) use them, and the checks (multi_node) judge the answers by them."""

from __future__ import annotations

from typing import Any

import numpy as np

# The probe's environment: the simulated node name of each rank, comma-separated.
HOSTS = "COURSE_PROBE_HOSTS"
# The probe's examples per rank (so that they split evenly over any rank count), and its batch size.
TRAIN_PER_RANK = 16
TEST_PER_RANK = 8
BATCH = 8
SEED = 7  # the seed the probe hands to shard_datasets (and SEED + 1)
LR = 0.1  # args.lr of the optimizer part
# The communicator and optimizer parts' one Linear link: small, so that its arrays cross as facts.
FEATURES = 6
CLASSES = 4


def rank_case(seed: int, rank: int) -> dict[str, np.ndarray]:
    """What the checking process's `seed` gives rank `rank` in the communicator and optimizer
    parts: the link's starting weights W and b (other on every rank, so that only a broadcast makes
    them equal), gradients for them (for the communicator's mean) and a batch x, t (other data on
    every rank, so that only averaged gradients keep the ranks' weights equal)."""
    rng = np.random.RandomState([seed, rank])
    return {
        "W": rng.normal(0, 0.5, (CLASSES, FEATURES)).astype(np.float32),
        "b": rng.normal(0, 0.5, CLASSES).astype(np.float32),
        "W_grad": rng.normal(0, 1, (CLASSES, FEATURES)).astype(np.float32),
        "b_grad": rng.normal(0, 1, CLASSES).astype(np.float32),
        "x": rng.normal(0, 1, (BATCH, FEATURES)).astype(np.float32),
        "t": rng.randint(0, CLASSES, BATCH).astype(np.int32),
    }


def link(case: dict[str, np.ndarray]) -> Any:
    """The parts' Linear link, starting at a rank_case's W and b."""
    import chainer.links as L

    return L.Linear(FEATURES, CLASSES, initialW=case["W"], initial_bias=case["b"])

"""Data parallelism against a split of the network (model parallelism), as the kit counts them: the
reference the model-parallel exercise's checks and its run's report compare with (notebook 08).

Per training step of a batch of B images, float32 values (4 bytes):

    model parallelism, 2 stages     2·B·C·H·W·4 bytes cross the cut: the activations (C, H, W) of
                                    each image forward, and their gradient backward
    data parallelism, p ranks       2(p−1)·P·4 bytes sent by all ranks together: a ring allreduce
                                    of the P-parameter gradient, each rank sending 2(p−1)/p of it

A pipeline of S equal stages that splits the batch into M micro-batches keeps each stage idle
(S−1)/(M+S−1) of the step: the fill and drain of the pipeline (GPipe, Huang et al. 2019). The naive
split (M = 1) leaves a stage of 2 idle half the time.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from course.lessons.step_time.costmodel import BYTES_PER_PARAMETER

BYTES_PER_VALUE = BYTES_PER_PARAMETER  # activations are float32 too


def activation_bytes(batch: int, cut_shape: Sequence[int]) -> int:
    """Bytes that cross the cut of a 2-stage split in one step, forward and backward."""
    return 2 * batch * math.prod(cut_shape) * BYTES_PER_VALUE


def gradient_bytes(parameters: int, ranks: int) -> int:
    """Bytes all ranks send together in one ring allreduce of the float32 gradient."""
    return 2 * (ranks - 1) * parameters * BYTES_PER_VALUE


def idle_fraction(stages: int, micro_batches: int) -> float:
    """The share of a step each of `stages` equal pipeline stages waits, with `micro_batches`."""
    fill_and_drain = stages - 1  # steps of a micro-batch's time in which some stage waits
    return fill_and_drain / (fill_and_drain + micro_batches)

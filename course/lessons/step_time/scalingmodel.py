"""The arithmetic of a data-parallel step and of scaling out, as the kit's reference for the three
derivations of notebooks 04 and 06 (course.lessons.step_time.scaling judges the student's functions
against it).

A step's phases (ChainerMN's announcement, Preferred Networks 2017: forward, backward, all-reduce,
optimize): each phase's share is its time over the whole step, every phase of the profile counted;
a rank does none of its own work while it waits for the slowest rank and while the gradients are
exchanged.

Scaling out (Hanawa's report: ResNet-50 on up to 240 GPUs of Reedbush-H, 32 images per GPU): the
total batch is every GPU's batch together, one update takes one total batch, and an epoch's last
update takes the images left over, so the updates per epoch are rounded up; the linear scaling
rule (Goyal et al. 2017) multiplies a reference rate by how many times the total batch is the
reference batch.

A measured speedup (the announcement: about 100 times on 128 GPUs) under weak scaling: every GPU
trains on one GPU's batch, so N GPUs train N times the images of one in a step. A speedup S then
means a step of N/S times one GPU's, of which one GPU's compute is the same as alone; the rest is
the exchange (and the waiting).
"""

from __future__ import annotations

from collections.abc import Mapping

# The phases in which a rank does none of its own work (course.runtime.profile.PHASES names them).
NOT_COMPUTING = ("wait", "allreduce")


def step_shares(profile_ms: Mapping[str, float]) -> dict:
    """{"shares": {phase: its fraction of the step}, "not_computing": the fraction of the step
    spent in NOT_COMPUTING's phases}, the step being the sum of every phase of `profile_ms`."""
    step = sum(profile_ms.values())
    shares = {phase: ms / step for phase, ms in profile_ms.items()}
    return {"shares": shares, "not_computing": sum(shares.get(p, 0.0) for p in NOT_COMPUTING)}


def run_plan(
    gpus: int, images_per_gpu: int, train_images: int, base_lr: float, base_batch: int
) -> dict:
    """{"total_batch", "updates_per_epoch" (rounded up), "lr" (the linear rule's)} for `gpus` GPUs
    of `images_per_gpu` each, a training set of `train_images` and `base_lr` for `base_batch`."""
    total = gpus * images_per_gpu
    return {
        "total_batch": total,
        "updates_per_epoch": -(-train_images // total),
        "lr": base_lr * total / base_batch,
    }


def implied_exchange(speedup: float, n_gpus: int, compute_seconds: float) -> dict:
    """{"efficiency", "exchange_seconds"} of a weak-scaling speedup on `n_gpus`, one GPU's step
    computing `compute_seconds`: the step's time not spent computing, in the same unit."""
    return {
        "efficiency": speedup / n_gpus,
        "exchange_seconds": compute_seconds * n_gpus / speedup - compute_seconds,
    }

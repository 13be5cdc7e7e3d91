"""The students' functions the scaling checks' tests (tests/test_scaling_checks.py) run: notebook
03's three derivations as solved, a planted mistake per known error, and attacks. Module-level defs,
as a notebook's are: a Remote handle runs them by name."""

from __future__ import annotations

import math
import types
from pathlib import Path

import numpy as np

import course
from course.contracts import stages
from tests.helpers import module_from_file
from tests.solutions import solution_functions

SOLVED = types.SimpleNamespace()


def load(folder: Path) -> types.ModuleType:
    """Notebook 03's three derivations in a module of a real file under `folder` (tests.remote
    sends their sources), and in SOLVED."""
    sources = solution_functions(stages.MULTI_NODE.name)
    path = folder / "scaling_notebook.py"
    path.write_text(
        "import math\n"
        + "".join(f"\n\n{sources[name]}" for name in stages.MULTI_NODE.derivation_functions)
    )
    module = module_from_file(path, f"scaling_{folder.name}")
    for name in stages.MULTI_NODE.derivation_functions:
        setattr(SOLVED, name, getattr(module, name))
    return module


# --- a step's phases as shares ------------------------------------------------------------------


def shares_of_compute(profile_ms):
    compute = profile_ms["forward"] + profile_ms["backward"]
    shares = {phase: ms / compute for phase, ms in profile_ms.items()}
    return {"shares": shares, "not_computing": shares["wait"] + shares["allreduce"]}


def shares_without_wait(profile_ms):
    found = SOLVED.step_shares(profile_ms)
    return {**found, "not_computing": found["shares"]["allreduce"]}


def shares_in_percent(profile_ms):
    found = SOLVED.step_shares(profile_ms)
    return {
        "shares": {phase: 100 * share for phase, share in found["shares"].items()},
        "not_computing": 100 * found["not_computing"],
    }


def shares_all_but_compute(profile_ms):
    found = SOLVED.step_shares(profile_ms)
    return {**found, "not_computing": 1 - found["shares"]["forward"] - found["shares"]["backward"]}


def shares_as_a_list(profile_ms):
    found = SOLVED.step_shares(profile_ms)
    return [found["shares"], found["not_computing"]]


def shares_without_other(profile_ms):
    found = SOLVED.step_shares(profile_ms)
    del found["shares"]["other"]
    return found


def shares_that_empty_the_profile(profile_ms):
    found = SOLVED.step_shares(profile_ms)
    profile_ms.clear()  # the observer passes a copy: the judge's case stays as it was
    return found


def shares_from_the_kit(profile_ms):
    return getattr(course.lessons.step_time, "scalingmodel").step_shares(profile_ms)  # noqa: B009 (the attack)


# --- the 240-GPU run's plan ---------------------------------------------------------------------


def plan_per_gpu_updates(gpus, images_per_gpu, train_images, base_lr, base_batch):
    found = SOLVED.run_plan(gpus, images_per_gpu, train_images, base_lr, base_batch)
    return {**found, "updates_per_epoch": math.ceil(train_images / images_per_gpu)}


def plan_floor(gpus, images_per_gpu, train_images, base_lr, base_batch):
    found = SOLVED.run_plan(gpus, images_per_gpu, train_images, base_lr, base_batch)
    return {**found, "updates_per_epoch": train_images // (gpus * images_per_gpu)}


def plan_lr_by_gpus(gpus, images_per_gpu, train_images, base_lr, base_batch):
    found = SOLVED.run_plan(gpus, images_per_gpu, train_images, base_lr, base_batch)
    return {**found, "lr": base_lr * gpus}


def plan_ratio_upside_down(gpus, images_per_gpu, train_images, base_lr, base_batch):
    found = SOLVED.run_plan(gpus, images_per_gpu, train_images, base_lr, base_batch)
    return {**found, "lr": base_lr * base_batch / (gpus * images_per_gpu)}


def plan_numpy(gpus, images_per_gpu, train_images, base_lr, base_batch):
    found = SOLVED.run_plan(gpus, images_per_gpu, train_images, base_lr, base_batch)
    return {key: np.float64(value) for key, value in found.items()}


def plan_text(gpus, images_per_gpu, train_images, base_lr, base_batch):
    return {**SOLVED.run_plan(gpus, images_per_gpu, train_images, base_lr, base_batch), "lr": "3.0"}


# --- what 100 times on 128 GPUs implies ---------------------------------------------------------


def exchange_strong(speedup, n_gpus, compute_seconds):
    found = SOLVED.implied_exchange(speedup, n_gpus, compute_seconds)
    return {**found, "exchange_seconds": compute_seconds / speedup - compute_seconds / n_gpus}


def exchange_efficiency_upside_down(speedup, n_gpus, compute_seconds):
    return {
        **SOLVED.implied_exchange(speedup, n_gpus, compute_seconds),
        "efficiency": n_gpus / speedup,
    }


def exchange_over_speedup(speedup, n_gpus, compute_seconds):
    found = SOLVED.implied_exchange(speedup, n_gpus, compute_seconds)
    return {**found, "exchange_seconds": compute_seconds / speedup}


def exchange_whole_step(speedup, n_gpus, compute_seconds):
    found = SOLVED.implied_exchange(speedup, n_gpus, compute_seconds)
    return {**found, "exchange_seconds": compute_seconds * n_gpus / speedup}


def exchange_pair(speedup, n_gpus, compute_seconds):
    found = SOLVED.implied_exchange(speedup, n_gpus, compute_seconds)
    return found["efficiency"], found["exchange_seconds"]


def exchange_from_the_kit(speedup, n_gpus, compute_seconds):
    from course.lessons.step_time import scalingmodel

    return scalingmodel.implied_exchange(speedup, n_gpus, compute_seconds)

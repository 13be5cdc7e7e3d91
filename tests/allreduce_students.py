"""The students' functions the allreduce checks' tests (tests/test_allreduce_checks.py) run:
notebook 03's solutions, planted mistakes and attacks. Module-level defs, as a notebook's are: a
Remote handle runs them by name, and the functions a check observes together come from one
module."""

from __future__ import annotations

import math
import types
from pathlib import Path

import numpy as np

import course
from course.contracts import stages
from course.lessons.step_time import allreduce as checks
from course.lessons.step_time import costmodel
from tests.helpers import notebook_module

# Notebook 03's solutions, as the `solved` fixture loads them: the planted mistakes below call them.
SOLVED = types.SimpleNamespace()


def load(folder: Path) -> types.ModuleType:
    """Notebook 03's solution functions, in a module of a real file under `folder` (tests.remote
    sends their sources), and in SOLVED."""
    module = notebook_module(folder, stages.MULTI_NODE.name)
    SOLVED.allreduce_time, SOLVED.fit_alpha_beta = module.allreduce_time, module.fit_alpha_beta
    return module


# --- the solutions again, beside the planted functions they are observed with -------------------


def solved_time(algorithm, n_ranks, message_bytes, alpha, beta):
    return SOLVED.allreduce_time(algorithm, n_ranks, message_bytes, alpha, beta)


def solved_fit(sizes, seconds, algorithm, n_ranks):
    return SOLVED.fit_alpha_beta(sizes, seconds, algorithm, n_ranks)


def ring_with_p(algorithm, n_ranks, message_bytes, alpha, beta):
    if algorithm == "ring":
        return 2 * n_ranks * alpha + 2 * n_ranks / n_ranks * message_bytes * beta
    return SOLVED.allreduce_time(algorithm, n_ranks, message_bytes, alpha, beta)


def doubling_with_p(algorithm, n_ranks, message_bytes, alpha, beta):
    if algorithm == "recursive_doubling":
        return n_ranks * (alpha + message_bytes * beta)
    return SOLVED.allreduce_time(algorithm, n_ranks, message_bytes, alpha, beta)


def swapped_time(algorithm, n_ranks, message_bytes, alpha, beta):
    return SOLVED.allreduce_time(algorithm, n_ranks, message_bytes, beta, alpha)


def bits_time(algorithm, n_ranks, message_bytes, alpha, beta):
    return SOLVED.allreduce_time(algorithm, n_ranks, 8 * message_bytes, alpha, beta)


def ring_sends_n(algorithm, n_ranks, message_bytes, alpha, beta):
    if algorithm == "ring":
        return 2 * (n_ranks - 1) * alpha + message_bytes * beta
    return SOLVED.allreduce_time(algorithm, n_ranks, message_bytes, alpha, beta)


def text_time(algorithm, n_ranks, message_bytes, alpha, beta):
    return "1 ms"


def float32_time(algorithm, n_ranks, message_bytes, alpha, beta):
    return np.float32(SOLVED.allreduce_time(algorithm, n_ranks, message_bytes, alpha, beta))


def thousandfold_time(algorithm, n_ranks, message_bytes, alpha, beta):
    return 1e3 * SOLVED.allreduce_time(algorithm, n_ranks, message_bytes, alpha, beta)


# The lesson's cases, visible and hidden, answered from a table: right on every case it lists.
LISTED = [
    *checks.VISIBLE_CASES,
    ("ring", 3, 3 * 2**20, 1.5e-6, 8e-11),
    ("ring", 16, 250_000, 4e-6, 3e-10),
    ("recursive_doubling", 2, 12_345, 7e-6, 2e-9),
    ("recursive_doubling", 64, 40 * 2**20, 1e-6, 5e-11),
    ("recursive_doubling", 1, 2**20, 5e-6, 1e-9),
]
ANSWERS = {case: costmodel.allreduce_seconds(*case) for case in LISTED}


def listed_time(algorithm, n_ranks, message_bytes, alpha, beta):
    return ANSWERS.get((algorithm, n_ranks, message_bytes, alpha, beta), 0.0)


def swapped_fit(sizes, seconds, algorithm, n_ranks):
    alpha, beta = SOLVED.fit_alpha_beta(sizes, seconds, algorithm, n_ranks)
    return beta, alpha


def unweighted_fit(sizes, seconds, algorithm, n_ranks):
    a, b = (
        (2 * (n_ranks - 1), 2 * (n_ranks - 1) / n_ranks)
        if algorithm == "ring"
        else (math.log2(n_ranks),) * 2
    )
    rows = np.column_stack([np.full(len(sizes), a), b * np.asarray(sizes, float)])
    (alpha, beta), *_ = np.linalg.lstsq(rows, np.asarray(seconds, float), rcond=None)
    return alpha, beta


def array_fit(sizes, seconds, algorithm, n_ranks):
    return np.array(SOLVED.fit_alpha_beta(sizes, seconds, algorithm, n_ranks))


def text_fit(sizes, seconds, algorithm, n_ranks):
    return "3e-6, 2e-10"


# --- the kit's own cost model, reached without its names (issue 29, case 5) -----------------------


def getattr_time(algorithm, n_ranks, message_bytes, alpha, beta):
    model = getattr(getattr(course.lessons.step_time, "costmodel"), "allreduce_seconds")  # noqa: B009 (the attack)
    return model(algorithm, n_ranks, message_bytes, alpha, beta)


def getattr_fit(sizes, seconds, algorithm, n_ranks):
    fit = getattr(getattr(course.lessons.step_time, "costmodel"), "fit")  # noqa: B009 (the attack)
    return fit(sizes, seconds, algorithm, n_ranks)


kit_fit = costmodel.fit  # a name imported from the kit before any check runs


def alias_fit(sizes, seconds, algorithm, n_ranks):
    return kit_fit(sizes, seconds, algorithm, n_ranks)


def direct_time(algorithm, n_ranks, message_bytes, alpha, beta):
    return costmodel.allreduce_seconds(algorithm, n_ranks, message_bytes, alpha, beta)


def stub_time(algorithm, n_ranks, message_bytes, alpha, beta):
    raise NotImplementedError("stub")

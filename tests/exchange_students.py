"""The students' functions the exchange checks' tests (tests/test_exchange_checks.py) run: notebook
04's solutions, a planted mistake per known error, and attacks. Module-level defs, as a notebook's
are: a Remote handle runs them by name."""

from __future__ import annotations

import types
from pathlib import Path

import numpy as np

import course
from course.contracts import stages
from course.lessons.exchange import exchangemodel
from tests.helpers import module_from_file
from tests.solutions import solution_functions

NOTEBOOK = next(name for name in stages.LESSON_NOTEBOOKS if name.startswith("05_"))
SOLVED = types.SimpleNamespace()


def load(folder: Path) -> types.ModuleType:
    """Notebook 04's solution functions in a module of a real file under `folder` (tests.remote
    sends their sources), and in SOLVED."""
    path = folder / "exchange_notebook.py"
    path.write_text(
        "import math\n\nimport numpy as np\n\nimport course\n"
        + "".join(f"\n\n{source}" for source in solution_functions(NOTEBOOK).values())
    )
    module = module_from_file(path, f"exchange_{folder.name}")
    for name in (
        "exchange_traffic",
        "parameter_server_time",
        "overlapped_backward",
        "half_precision_saving",
        "ring_crossover_bytes",
        "weak_scaling_speedup",
        "first_slower",
        "exchange_share",
    ):
        setattr(SOLVED, name, getattr(module, name))
    return module


# --- exercise 1a ------------------------------------------------------------------------------


def traffic_one_way(pattern, n_ranks, message_bytes):
    return SOLVED.exchange_traffic(pattern, n_ranks, message_bytes) / 2


def traffic_server_counts_itself(pattern, n_ranks, message_bytes):
    if pattern == "parameter_server":
        return 2 * n_ranks * message_bytes
    return SOLVED.exchange_traffic(pattern, n_ranks, message_bytes)


def traffic_ring_sent_only(pattern, n_ranks, message_bytes):
    if pattern == "ring":
        return 2 * (n_ranks - 1) / n_ranks * message_bytes
    return SOLVED.exchange_traffic(pattern, n_ranks, message_bytes)


def traffic_ring_whole_vector(pattern, n_ranks, message_bytes):
    if pattern == "ring":
        return 4 * (n_ranks - 1) * message_bytes
    return SOLVED.exchange_traffic(pattern, n_ranks, message_bytes)


def traffic_text(pattern, n_ranks, message_bytes):
    return "2 MB"


# --- exercise 1b ------------------------------------------------------------------------------


def server_one_way(n_ranks, message_bytes, alpha, beta):
    return (n_ranks - 1) * (alpha + message_bytes * beta)


def server_counts_itself(n_ranks, message_bytes, alpha, beta):
    return 2 * n_ranks * (alpha + message_bytes * beta)


def server_parallel_links(n_ranks, message_bytes, alpha, beta):
    return 2 * (alpha + message_bytes * beta) if n_ranks > 1 else 0.0


def server_swapped(n_ranks, message_bytes, alpha, beta):
    return SOLVED.parameter_server_time(n_ranks, message_bytes, beta, alpha)


def server_is_ring(n_ranks, message_bytes, alpha, beta):
    return 2 * (n_ranks - 1) * alpha + 2 * (n_ranks - 1) / n_ranks * message_bytes * beta


def server_from_the_kit(n_ranks, message_bytes, alpha, beta):
    model = getattr(course.lessons.exchange, "exchangemodel").parameter_server_seconds  # noqa: B009 (the attack)
    return model(n_ranks, message_bytes, alpha, beta)


def server_numpy_float(n_ranks, message_bytes, alpha, beta):
    return np.float64(SOLVED.parameter_server_time(n_ranks, message_bytes, alpha, beta))


# --- exercise 2 -------------------------------------------------------------------------------


def overlap_none(backward_seconds, exchange_seconds):
    return sum(backward_seconds) + sum(exchange_seconds)


def overlap_ideal(backward_seconds, exchange_seconds):
    return max(sum(backward_seconds), sum(exchange_seconds))


def overlap_per_layer_max(backward_seconds, exchange_seconds):
    return sum(max(b, c) for b, c in zip(backward_seconds, exchange_seconds))


def overlap_many_links(backward_seconds, exchange_seconds):
    ready, ends = 0.0, []
    for b, c in zip(backward_seconds, exchange_seconds):
        ready += b
        ends.append(ready + c)
    return max([ready, *ends])


def overlap_reversed(backward_seconds, exchange_seconds):
    return SOLVED.overlapped_backward(backward_seconds[::-1], exchange_seconds[::-1])


def overlap_from_the_kit(backward_seconds, exchange_seconds):
    return exchangemodel.overlapped_seconds(backward_seconds, exchange_seconds)


# --- exercise 3 -------------------------------------------------------------------------------


def _ring(n_ranks, nbytes, alpha, beta):
    return 2 * (n_ranks - 1) * alpha + 2 * (n_ranks - 1) / n_ranks * nbytes * beta


def half_of_everything(n_ranks, n_parameters, alpha, beta):
    return _ring(n_ranks, 4 * n_parameters, alpha, beta) / 2


def half_parameters_as_bytes(n_ranks, n_parameters, alpha, beta):
    return _ring(n_ranks, n_parameters, alpha, beta) - _ring(n_ranks, n_parameters / 2, alpha, beta)


def half_whole_transfer(n_ranks, n_parameters, alpha, beta):
    return 2 * (n_ranks - 1) / n_ranks * 4 * n_parameters * beta


def half_bits(n_ranks, n_parameters, alpha, beta):
    return 8 * SOLVED.half_precision_saving(n_ranks, n_parameters, alpha, beta)


def half_swapped(n_ranks, n_parameters, alpha, beta):
    return SOLVED.half_precision_saving(n_ranks, n_parameters, beta, alpha)

"""Reasoning points that trial and error cannot earn (issue 41): for every auto-checked derivation
of notebooks 03-05 and notebook 02's learning-rate rule, a scripted student (tests/harvesting.py)
starts from each planted mistake and from a plain wrong answer, reads the real check's failures,
retries with every number they name and every correction they state, and then runs the exercise's
graded cell from the solutions notebook, visible and hidden tests, as the grader does. It must earn
none of the cell's points, no message may name the answer of the case it echoes (0 and 1 aside:
the limits a student works out by hand) and none may state a correction. The solution earns the
points through the same path, so that a cell which cannot pass is not counted as harvesting
failed. The per-exercise table is written to the terminal at the end of the session
(tests/conftest.py's pytest_terminal_summary; run without -n, whose workers keep their tables)."""

from __future__ import annotations

import types
from dataclasses import dataclass

import nbformat
import pytest

import course
from course.contracts import stages
from course.notebook import checks
from tests import (
    allreduce_students,
    exchange_scaling_students,
    exchange_students,
    large_batch_students,
    model_parallel_students,
    scaling_students,
    test_checks,
)
from tests.harvesting import ROWS, Student, harvest
from tests.mpi_helpers import measured
from tests.solutions import SOLUTIONS, solution_functions

HIDDEN = "### BEGIN HIDDEN TESTS"


@dataclass(frozen=True)
class Exercise:
    cell: str  # the graded cell's id
    function: str  # the function the student harvests with
    planted: tuple[str, ...]  # planted mistakes of `students`, each a wrong start
    students: types.ModuleType


EXERCISES = (
    Exercise(
        "check_learning_rate",
        "scaled_learning_rate",
        (
            "square_root_rule",
            "not_scaled",
            "inverse_rule",
            "base_batch_ignored",
            "rate_not_scaled_by_base",
            "twice_the_rule",
            "negative_rate",
        ),
        test_checks,
    ),
    Exercise(
        "check_implied_exchange",
        "implied_exchange",
        (
            "exchange_strong",
            "exchange_efficiency_upside_down",
            "exchange_over_speedup",
            "exchange_whole_step",
        ),
        scaling_students,
    ),
    Exercise(
        "check_step_shares",
        "step_shares",
        ("shares_of_compute", "shares_without_wait", "shares_in_percent", "shares_all_but_compute"),
        scaling_students,
    ),
    Exercise(
        "check_run_plan",
        "run_plan",
        ("plan_per_gpu_updates", "plan_floor", "plan_lr_by_gpus", "plan_ratio_upside_down"),
        scaling_students,
    ),
    Exercise(
        "check_allreduce_time",
        "allreduce_time",
        ("ring_with_p", "doubling_with_p", "swapped_time", "bits_time", "ring_sends_n"),
        allreduce_students,
    ),
    Exercise("check_fit", "fit_alpha_beta", ("swapped_fit", "unweighted_fit"), allreduce_students),
    Exercise(
        "check_exchange_traffic",
        "exchange_traffic",
        (
            "traffic_one_way",
            "traffic_server_counts_itself",
            "traffic_ring_sent_only",
            "traffic_ring_whole_vector",
        ),
        exchange_students,
    ),
    Exercise(
        "check_parameter_server_time",
        "parameter_server_time",
        (
            "server_one_way",
            "server_counts_itself",
            "server_parallel_links",
            "server_swapped",
            "server_is_ring",
        ),
        exchange_students,
    ),
    Exercise(
        "check_ring_crossover",
        "ring_crossover_bytes",
        (
            "crossover_alphas_crossed",
            "crossover_swapped",
            "crossover_ring_latency_once",
            "crossover_doubling_one_step",
            "crossover_reversed",
            "crossover_raw_ratio",
        ),
        exchange_scaling_students,
    ),
    Exercise(
        "check_overlap",
        "overlapped_backward",
        (
            "overlap_none",
            "overlap_ideal",
            "overlap_per_layer_max",
            "overlap_many_links",
            "overlap_reversed",
        ),
        exchange_students,
    ),
    Exercise(
        "check_half_precision",
        "half_precision_saving",
        (
            "half_of_everything",
            "half_parameters_as_bytes",
            "half_whole_transfer",
            "half_bits",
            "half_swapped",
        ),
        exchange_students,
    ),
    Exercise(
        "check_slowdown",
        "weak_scaling_speedup",
        (
            "speedup_strong",
            "speedup_bytes_per_rank",
            "speedup_whole_bytes",
            "speedup_is_efficiency",
            "speedup_doubling",
            "speedup_swapped",
        ),
        exchange_scaling_students,
    ),
    Exercise(
        "check_slowdown",
        "first_slower",
        ("first_at_or_below_one", "first_most_ranks", "first_faster", "first_position"),
        exchange_scaling_students,
    ),
    Exercise(
        "check_exchange_share",
        "exchange_share",
        (
            "share_over_compute",
            "share_of_compute",
            "share_bytes_per_rank",
            "share_doubling",
            "share_swapped",
        ),
        exchange_scaling_students,
    ),
    Exercise(
        "check_activation_bytes",
        "activation_bytes",
        ("forward_only", "values_not_bytes", "one_image", "bits"),
        model_parallel_students,
    ),
    Exercise(
        "check_gradient_bytes",
        "gradient_bytes",
        ("one_rank", "half_ring", "whole_to_everyone"),
        model_parallel_students,
    ),
    Exercise(
        "check_idle_fraction",
        "idle_fraction",
        ("no_micro_batches", "busy_share", "over_micro_batches"),
        model_parallel_students,
    ),
    Exercise(
        "check_large_batch_rates",
        "large_batch_rates",
        ("ratio_upside_down", "root_of_the_rate", "root_of_the_batch", "swapped", "rounded_down"),
        large_batch_students,
    ),
    Exercise(
        "check_lars_local_rate",
        "lars_local_rate",
        (
            "trust_inverted",
            "threshold_ignored",
            "threshold_reversed",
            "threshold_inclusive",
            "decay_left_out",
            "decay_on_the_gradient",
        ),
        large_batch_students,
    ),
)


def _graded_cells(
    names: tuple[str, ...] = (
        stages.MULTI_GPU.notebook,
        stages.MULTI_NODE.notebook,
        *stages.LESSON_NOTEBOOKS,
    ),
) -> dict[str, tuple[str, float]]:
    """{grade id: (source, points)} of the graded code cells of these solutions notebooks (02-05's
    unless told)."""
    found = {}
    for name in names:
        notebook = nbformat.read(SOLUTIONS / name, as_version=4)
        for cell in notebook.cells:
            marks = cell.metadata.get("nbgrader", {})
            if cell.cell_type == "code" and marks.get("grade"):
                found[marks["grade_id"]] = (cell.source, marks["points"])
    return found


CELLS = _graded_cells()


@pytest.fixture(scope="module")
def solved(tmp_path_factory):
    """Every solution function of notebooks 03-05 and notebook 02's scaled_learning_rate, by name,
    as the planted mistakes call them."""
    functions: dict = {}
    exec(solution_functions(stages.MULTI_GPU.name)["scaled_learning_rate"], functions)
    for students in (
        allreduce_students,
        scaling_students,
        exchange_students,
        model_parallel_students,
    ):
        module = students.load(tmp_path_factory.mktemp(students.__name__.rsplit(".")[-1]))
        functions.update({name: getattr(module, name) for name in dir(module)})
    return functions


def _off(right):
    """A wrong answer of no known mistake: the solution's numbers, 1.37 times."""

    def scaled(value):
        if isinstance(value, dict):
            return {key: scaled(item) for key, item in value.items()}
        if isinstance(value, tuple | list):
            return type(value)(scaled(item) for item in value)
        return 1.37 * value if isinstance(value, int | float) and value else 2.0

    def off(*args):
        return scaled(right(*args))

    return off


def _runner(source: str, solved: dict, function: str):
    """What runs `source` (a graded cell's code) with `function` the student's and the others
    the solutions, as the notebook's namespace holds them."""

    def run(student):
        namespace = {**solved, "checks": checks, "course": course, function: student}
        exec(compile(source, "<graded cell>", "exec"), namespace)

    return run


@pytest.mark.parametrize("exercise", EXERCISES, ids=lambda e: f"{e.cell}-{e.function}")
def test_harvesting_the_messages_earns_nothing(exercise, solved, tmp_path, monkeypatch, capsys):
    source, points = CELLS[exercise.cell]
    visible = _runner(source.split(HIDDEN)[0], solved, exercise.function)
    graded = _runner(source, solved, exercise.function)
    monkeypatch.chdir(tmp_path)
    measured(tmp_path)  # notebook 03's fit reads the benchmark's runs here
    right = solved[exercise.function]
    graded(right)  # the solution earns the points on the same path

    starts = [getattr(exercise.students, name) for name in exercise.planted]
    if exercise.function != "first_slower":  # a rank count scaled is no answer
        starts.append(_off(right))
    retries = passed = 0
    leaked, corrected, earned = [], [], 0.0
    for wrong in starts:
        student = Student(exercise.function, wrong, right)
        done = harvest(student, visible)
        retries, passed = retries + done.retries, passed + done.moved_on
        leaked += done.leaked
        corrected += done.corrected
        try:
            graded(student.function)
        except checks.CheckFailed:
            continue
        earned = points
    capsys.readouterr()
    ROWS.append(
        (
            exercise.cell,
            exercise.function,
            points,
            len(starts),
            retries,
            passed,
            len(leaked),
            len(corrected),
            earned,
        )
    )
    assert not leaked, f"messages named the answer: {leaked}"
    assert not corrected, f"messages stated a correction: {corrected}"
    assert earned == 0, f"the harvesting student earned {earned} of {points} points"

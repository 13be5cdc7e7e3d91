"""Notebook 03's prediction on shared cores (course.lessons.step_time.allreduce_judge, applied by
scoring.grade_profiled_prediction): where a rank of the profiled run got less than
[allreduce] shared_below of a core, a correct model earns the point whatever was measured and a
wrong one loses it, the kit's model on the same inputs being the reference; with its cores, the
measurement is judged as before. A real benchmark table (tests.mpi_helpers.measured) and a traced
profiled run (tests.test_allreduce_checks.profiled_run) in the student's folder."""

from __future__ import annotations

import json

import pytest

from course.contracts import results, stages
from course.instructor import scoring
from course.lessons.step_time import allreduce as checks
from course.lessons.step_time import allreduce_judge, allreduce_report, costmodel, profile_report
from course.lessons.step_time.allreduce_model import FIT_TOLERANCE
from course.notebook.checks import CheckFailed
from tests import allreduce_students as students
from tests.mpi_helpers import measured
from tests.test_allreduce_checks import profiled_run

GRADING = """
[allreduce]
prediction_factor = 4.0
shared_below = 0.8
"""
pytestmark = pytest.mark.usefixtures("grading_config")
ARRAYS = [10_000, 2_000, 64]  # naive: one allreduce per array
SHARED = (0.97, 0.43)  # rank 1 got 43% of a core


@pytest.fixture(scope="module", autouse=True)
def solved(tmp_path_factory):
    return students.load(tmp_path_factory.mktemp("solved"))


def predicted(folder, time=students.solved_time, fit=students.solved_fit) -> float:
    """The student's prediction of the profiled step, as the notebook's cell makes it."""
    return checks.predict(time, fit, allreduce_report.measured_table(folder), 2, "ring", ARRAYS)


def kit(folder) -> float:
    [series] = allreduce_report.measured_table(folder)
    alpha, beta = costmodel.fit(series.sizes, series.median, "ring", 2)
    return costmodel.predict_gradient_allreduce(ARRAYS, "ring", 2, alpha, beta)


def failure(*args, **kwargs) -> str:
    with pytest.raises(CheckFailed) as failed:
        scoring.grade_profiled_prediction(*args, **kwargs)
    return str(failed.value)


@pytest.mark.parametrize("allreduce_ms", [0.05, 5.0, 500.0])
def test_on_shared_cores_a_correct_model_earns_the_point_whatever_was_measured(
    folder, allreduce_ms, capsys
):
    measured(folder, ranks=2)
    profiled_run(folder, "cpu", ARRAYS, allreduce_ms, SHARED)
    assert scoring.grade_profiled_prediction(1, predicted(folder), folder) == 1
    said = capsys.readouterr().out
    assert (
        "OK: the gradient allreduce of multi_node-5.local: the cores were shared while the "
        "profile ran (a rank got only 43% of a core over its steady steps, below the grading "
        "rules' 80%): the measured time is not compared; your model agrees with the kit's" in said
    )
    assert "(ratio 1.00), within 4%" in said


def test_a_fit_at_the_edge_of_the_fit_check_agrees_and_one_farther_does_not(folder):
    """check_fit passes alpha and beta each within FIT_TOLERANCE of the kit's: a prediction from
    such a fit agrees; 10% off each does not."""
    measured(folder, ranks=2)
    profiled_run(folder, "cpu", ARRAYS, 500.0, SHARED)
    [series] = allreduce_report.measured_table(folder)
    alpha, beta = costmodel.fit(series.sizes, series.median, "ring", 2)
    for off in (1 + FIT_TOLERANCE, 1 - FIT_TOLERANCE):
        for a, b in ((alpha * off, beta), (alpha, beta * off), (alpha * off, beta * off)):
            edge = costmodel.predict_gradient_allreduce(ARRAYS, "ring", 2, a, b)
            assert scoring.grade_profiled_prediction(1, edge, folder) == 1
    farther = costmodel.predict_gradient_allreduce(ARRAYS, "ring", 2, 1.1 * alpha, 1.1 * beta)
    assert "(ratio 1.10), more than 4% apart" in failure(1, farther, folder)


@pytest.mark.parametrize(
    ("time", "fit", "hint"),
    [
        (students.bits_time, students.solved_fit, "do not multiply by 8 (bits)"),
        (students.solved_time, students.swapped_fit, "with alpha and beta swapped"),
        (students.solved_time, students.unweighted_fit, "a fit in absolute error"),
        (students.thousandfold_time, students.solved_fit, "check both with the cells that check"),
    ],
    ids=["bits", "swapped-fit", "unweighted-fit", "thousandfold"],
)
def test_on_shared_cores_a_wrong_model_loses_the_point_even_matching_the_measurement(
    folder, time, fit, hint
):
    """The profile measured exactly what the wrong model predicts: on shared cores that is not
    judged, and the kit's model tells the mistake."""
    measured(folder, ranks=2)
    wrong = predicted(folder, time, fit)
    assert abs(wrong / kit(folder) - 1) > 0.2
    profiled_run(folder, "cpu", ARRAYS, wrong * 1e3, SHARED)
    message = failure(1, wrong, folder)
    assert "your model does not agree with the kit's" in message and "4% apart" in message
    assert hint in message, message


@pytest.mark.parametrize("shares", [(0.97, 0.85), (0.97, None), (None, None)])
def test_with_its_cores_or_an_unknown_share_the_measurement_is_judged_as_before(
    folder, shares, capsys
):
    measured(folder, ranks=2)
    profiled_run(folder, "cpu", ARRAYS, 0.05, shares)
    assert scoring.grade_profiled_prediction(1, predicted(folder), folder) == 1
    said = capsys.readouterr().out
    assert "measured 0.05 ms (ratio 1.08): within 4x" in said and "kit's" not in said
    profiled_run(folder, "cpu", ARRAYS, 500.0, shares, number=6)  # the newer run is graded
    message = failure(1, predicted(folder), folder)
    assert "measured 500 ms (ratio 0.00), more than 4x apart" in message
    assert "parameters x 4" in message


def test_the_lowest_share_of_the_ranks_is_the_runs_and_a_gpu_runs_is_unknown(folder):
    profiled_run(folder, "cpu", ARRAYS, 0.05, (0.97, 0.43, 0.6))
    assert profile_report.measured_allreduce_seconds(folder)["cpu_share"] == 0.43
    profiled_run(folder, "gpu", ARRAYS, 0.05, (0.2, 0.2), number=6)  # it waits on the GPU
    assert profile_report.measured_allreduce_seconds(folder)["cpu_share"] is None


def test_a_results_file_edited_to_a_low_share_does_not_count(folder):
    """The share is written by the job: a student who lowers it breaks the results file's seal,
    and an untraced run is not graded at all."""
    measured(folder, ranks=2)
    profiled_run(folder, "cpu", ARRAYS, 500.0, (0.97, 0.95))
    path = folder / results.RUNS_DIR / f"{stages.MULTI_NODE.name}-5.local" / results.FILENAME
    record = json.loads(path.read_text())
    for rank in record["profile"]["ranks"]:
        rank["cpu_share"] = 0.1
    path.write_text(json.dumps(record))
    assert allreduce_judge.profiled_step(folder) is None
    assert "there is no profiled stage-3 run on 2 or more ranks" in failure(
        1, predicted(folder), folder
    )


def test_on_gpus_the_benchmarks_held_out_size_is_judged_from_the_files(folder, capsys):
    measured(folder, ranks=2)
    profiled_run(folder, "gpu", ARRAYS, 0.05, SHARED)
    table = allreduce_report.measured_table(folder)
    profiled = profile_report.measured_allreduce_seconds(folder)
    right, _ = checks.predict_held_out_size(
        students.solved_time, students.solved_fit, table, profiled
    )
    assert scoring.grade_profiled_prediction(1, right, folder) == 1
    assert "OK: the benchmark's 67,108,864-byte ring allreduce on 2 ranks: predicted" in (
        capsys.readouterr().out
    )
    assert "more than 4x apart" in failure(1, 1e3 * right, folder)


def test_the_cells_verdict_on_shared_cores_says_what_the_grader_says(folder, capsys):
    measured(folder, ranks=2)
    profiled_run(folder, "cpu", ARRAYS, 500.0, SHARED)
    checks.predict_profiled_step(students.solved_time, students.solved_fit, folder)
    verdict = capsys.readouterr().out.splitlines()[-1]
    assert verdict.startswith("PASS: the cores were shared while the profile ran")
    assert verdict.endswith("within 4%, so it earns the point.")
    checks.predict_profiled_step(students.bits_time, students.solved_fit, folder)
    verdict = capsys.readouterr().out.splitlines()[-1]
    assert verdict.startswith("NOT YET: the cores were shared while the profile ran")
    assert "so it would earn no point; the message is n bytes" in verdict

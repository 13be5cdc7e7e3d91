"""The harvesting test (tests/test_harvesting.py) on the reasoning exercises graded against the
student's runs: the predictions of notebooks 01-03 (updates, iterations, snapshots, and the
comparison's two choices) and notebook 03's compute-to-exchange ratio. The runs are the traced
results and job logs tests/test_predictions.py builds for the same checks (tests.helpers.make_run);
the choices are recorded with the runs' jobs, as the notebook's submitting cell records them, from
the wrong start itself, before any harvesting, which cannot reach them. Each exercise's graded
cell, visible and hidden tests, runs on what the harvest ended with; what its `points` say is what
was earned. The rows join tests/test_harvesting.py's table."""

from __future__ import annotations

import contextlib
import io
import math
from dataclasses import dataclass

import pytest

import course
from course.contracts import grading_rules
from course.notebook import checks
from tests import test_predictions as built
from tests.harvesting import ROWS, Student, harvest
from tests.test_harvesting import CELLS, _graded_cells, _off

HIDDEN = "### BEGIN HIDDEN TESTS"
# Beyond every band: naive is faster and the warm-up ends more accurate on any site's noise.
GRADING = """
[prediction]
throughput_noise = 0.1
accuracy_noise = 0.05
[prediction.cpu]
throughput_noise = 0.1
"""


def predict_run_1(train_size, batchsize, epochs):
    return {
        "updates_per_epoch": train_size / batchsize,
        "iterations": -(-epochs * train_size // batchsize),
        "snapshots_written": epochs,
        "snapshots_kept": min(epochs, 2),
    }


def predict_comparison(train_size, batchsize, ranks, epochs):
    shard = train_size // ranks
    return {
        "updates_per_epoch": shard / batchsize,
        "iterations": math.ceil(epochs * shard / batchsize),
        "faster_setting": "naive",
        "more_accurate_rule": "warmup",
    }


def compute_to_exchange(compute_ms, exchange_ms, batch_per_rank):
    ratio = compute_ms / exchange_ms
    return {"ratio": ratio, "break_even_batch": batch_per_rank / ratio}


# --- wrong starts: the slips a student makes on these counts ---------------------------------


def whole_set_updates(train_size, batchsize, *rest):
    """Stage 3: the updates of the whole set, not of a rank's part."""
    epochs = rest[-1]
    return {
        "updates_per_epoch": train_size / batchsize,
        "iterations": -(-epochs * train_size // batchsize),
        "snapshots_written": epochs,
        "snapshots_kept": epochs,
        "faster_setting": "ring",
        "more_accurate_rule": "linear",
    }


def floored(train_size, batchsize, *rest):
    """Iterations rounded down: the last, partial batch of the run forgotten."""
    ranks, epochs = (rest[0], rest[-1]) if len(rest) == 2 else (1, rest[-1])
    part = train_size // ranks
    return {
        "updates_per_epoch": part // batchsize,
        "iterations": epochs * part // batchsize,
        "snapshots_written": epochs - 1,
        "snapshots_kept": 1,
        "faster_setting": "ring",
        "more_accurate_rule": "linear",
    }


def ratio_upside_down(compute_ms, exchange_ms, batch_per_rank):
    ratio = exchange_ms / compute_ms
    return {"ratio": ratio, "break_even_batch": batch_per_rank * ratio}


def break_even_times_ratio(compute_ms, exchange_ms, batch_per_rank):
    ratio = compute_ms / exchange_ms
    return {"ratio": ratio, "break_even_batch": batch_per_rank * ratio}


@dataclass(frozen=True)
class RunExercise:
    notebook: str
    cell: str
    function: str
    right: object
    starts: tuple
    runs: object  # (folder, the wrong start) -> None: the traced runs, choices recorded


def _recorded(answers: dict) -> dict:
    return {"made_at": "2026-11-20T09:00:00+00:00", "answers": answers}


def _stage_1(folder, wrong) -> None:
    built.stage_1_run(folder)


def _comparison(folder, wrong) -> None:
    """Three runs on 2 ranks, their choices as the wrong start recorded them before they ran."""
    recorded = _recorded(wrong(4000, 64, 2, 3))
    for number, images, rule, allreduce, accuracy in (
        (11, 145.0, "warmup", None, 0.896),
        (12, 118.0, "warmup", "ring", 0.896),
        (13, 120.0, "linear", None, 0.816),
    ):
        built.stage_3_run(
            folder, number, images, accuracy, rule=rule, allreduce=allreduce, predicted=recorded
        )


def _profiled(folder, wrong) -> None:
    # 7 ms of exchange, not the fixture's 4 (= the check's example's ratio: a number that names
    # the answer by coincidence is still a number the harvester would copy)
    built.profiled(folder, {"forward": 300.0, "backward": 551.0, "allreduce": 7.0})


EXERCISES = (
    RunExercise("01", "check_predict_run", "predict_run", predict_run_1, (floored,), _stage_1),
    RunExercise(
        "03",
        "check_predict_comparison",
        "predict_comparison",
        predict_comparison,
        (whole_set_updates, floored),
        _comparison,
    ),
    RunExercise(
        "03",
        "check_exchange_ratio",
        "compute_to_exchange",
        compute_to_exchange,
        (ratio_upside_down, break_even_times_ratio),
        _profiled,
    ),
)


def _cells() -> dict[str, dict[str, tuple[str, float]]]:
    """{notebook's number: {grade id: (source, points)}} of notebooks 01 and 03."""
    return {"01": _graded_cells(("01_single_gpu.ipynb",)), "03": CELLS}


@pytest.fixture(autouse=True)
def rules(tmp_path, monkeypatch):
    path = tmp_path / "grading.toml"
    path.write_text(GRADING)
    monkeypatch.setenv(grading_rules.OVERRIDE, str(path))


def _visible(source: str, function: str, points: float):
    """The visible check as the harvester reads it: CheckFailed with what a partial verdict
    printed of the parts that did not hold (the lines a student reads), where it is not full."""

    def run(student) -> None:
        said = io.StringIO()
        with contextlib.redirect_stdout(said):
            got = _earned(source, function, student, raising=True)
        if got < points:
            missed = [line for line in said.getvalue().splitlines() if "did not hold" in line]
            raise checks.CheckFailed("\n".join(missed) or said.getvalue())

    return run


def _earned(source: str, function: str, student, raising: bool = False) -> float:
    namespace = {"checks": checks, "course": course, "math": math, function: student}
    try:
        exec(compile(source, "<graded cell>", "exec"), namespace)
    except checks.CheckFailed:
        if raising:
            raise
        return 0.0
    return float(namespace["points"])


@pytest.mark.parametrize("exercise", EXERCISES, ids=lambda e: f"{e.cell}-{e.function}")
def test_harvesting_against_the_runs_earns_nothing(exercise, tmp_path, monkeypatch, capsys):
    source, points = _cells()[exercise.notebook][exercise.cell]
    visible = source.split(HIDDEN)[0]
    retries = moved = 0
    leaked, corrected, earned = [], [], 0.0
    starts = (*exercise.starts, _off(exercise.right))
    for at, wrong in enumerate(starts):
        folder = tmp_path / str(at)
        folder.mkdir()
        monkeypatch.chdir(folder)
        exercise.runs(folder, wrong)
        if at == 0:  # the solution earns every point on the same path, from its own choices
            right_folder = tmp_path / "right"
            right_folder.mkdir()
            exercise.runs(right_folder, exercise.right)
            monkeypatch.chdir(right_folder)
            assert _earned(source, exercise.function, exercise.right) == points
            monkeypatch.chdir(folder)
        student = Student(exercise.function, wrong, exercise.right)
        done = harvest(student, _visible(visible, exercise.function, points))
        retries, moved = retries + done.retries, moved + done.moved_on
        leaked += done.leaked
        corrected += done.corrected
        earned = max(earned, _earned(source, exercise.function, student.function))
    capsys.readouterr()
    ROWS.append(
        (
            exercise.cell,
            exercise.function,
            points,
            len(starts),
            retries,
            moved,
            len(leaked),
            len(corrected),
            earned,
        )
    )
    assert not leaked, f"messages named the answer: {leaked}"
    assert not corrected, f"messages stated a correction: {corrected}"
    assert earned == 0, f"the harvesting student earned {earned} of {points} points"

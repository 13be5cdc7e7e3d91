"""The marking of the allreduce exercise's checks (course.lessons.step_time.allreduce, its known
mistakes and its observer's closed cost model), as tests/test_i18n_pseudo.py does stage 1's: the
planted mistakes of tests/test_allreduce_checks.py, read from its table, and its other failures,
under the pseudo-locale. Every line a student sees carries the markers (the failures, the OK
lines, the prediction's lines and verdict, the words of the closed cost model), but the command
lines a hint gives to type, which stay as they are. Here only: the messages are the judge's."""

from __future__ import annotations

import pytest

from course import i18n
from course.lessons.step_time import allreduce as checks
from course.lessons.step_time.allreduce_mistakes import diagnosis
from course.notebook.checks import CheckFailed
from tests import allreduce_students as students
from tests import test_allreduce_checks
from tests.mpi_helpers import measured
from tests.test_i18n_pseudo import unmarked
from tests.test_i18n_pseudo_scaling import bare, table

PLANTED = table(
    test_allreduce_checks.test_the_cost_model_check_names_planted_mistakes, "wrong, said"
)
# The other failures of tests/test_allreduce_checks.py: (what fails, on a 2-rank ring benchmark's
# table and arrays, the words of its failure).
FAILURES = {
    "a text for seconds": (
        lambda table, arrays: checks.cost_model(students.text_time),
        "returned str, not a number of seconds",
    ),
    "no known mistake": (
        lambda table, arrays: checks.cost_model(students.listed_time, cases=students.LISTED),
        "1 rank exchanges nothing",
    ),
    "alpha and beta swapped": (
        lambda table, arrays: checks.fit(students.swapped_fit, table),
        "the first is seconds per byte",
    ),
    "an unweighted fit": (
        lambda table, arrays: checks.fit(students.unweighted_fit, table),
        "your fit follows the largest messages",
    ),
    "a text for a fit": (
        lambda table, arrays: checks.fit(students.text_fit, table),
        "returned str on exact ring times on 4 ranks, not the",
    ),
    "no benchmark": (
        lambda table, arrays: checks.fit(students.solved_fit, []),
        "submit jobs/run_allreduce_benchmark.sh",
    ),
    "a text for a fit, predicting": (
        lambda table, arrays: checks.predict(
            students.solved_time, students.text_fit, table, 2, "ring", arrays
        ),
        "fit_alpha_beta returned str on the measured ring, 2",
    ),
    "a text for seconds, predicting": (
        lambda table, arrays: checks.predict(
            students.text_time, students.solved_fit, table, 2, "ring", arrays
        ),
        "allreduce_time returned str, not a number of seconds",
    ),
}
# Failures whose hint is a command line to type: it stays as it is, the rest is translated.
COMMANDS = {
    "an algorithm not measured": (
        lambda table, arrays: checks.predict(
            students.solved_time, students.solved_fit, table, 2, "recursive_doubling", arrays
        ),
        "qsub -j oe -l select=1:mpiprocs=2 -v ALGORITHMS=recursive_doubling "
        "jobs/run_allreduce_benchmark.sh",
    ),
    "a rank count not measured": (
        lambda table, arrays: checks.predict_held_out_size(
            students.solved_time,
            students.solved_fit,
            table,
            {"run": "multi_node-9.pbs", "ranks": 4, "seconds": 2e-3, "device_kind": "gpu"},
        ),
        "qsub -j oe -l select=1:mpiprocs=4 jobs/run_allreduce_benchmark.sh",
    ),
}
ARRAYS = [1_000, 250_000, 30]


@pytest.fixture(scope="module", autouse=True)
def solved(tmp_path_factory):
    return students.load(tmp_path_factory.mktemp("solved_pseudo"))


@pytest.fixture(autouse=True)
def pseudo_locale(monkeypatch):
    monkeypatch.setenv(i18n.VARIABLE, i18n.PSEUDO)


@pytest.fixture
def ring_table(tmp_path):
    return measured(tmp_path, ranks=2)


def test_the_cases_are_all_of_test_allreduce_checks_mistakes():
    assert len(PLANTED) == 5 and len(FAILURES) == 8, (len(PLANTED), len(FAILURES))


@pytest.mark.parametrize("wrong, said", PLANTED, ids=[wrong.__name__ for wrong, _ in PLANTED])
def test_every_line_of_a_planted_mistakes_failure_is_translated(wrong, said):
    with pytest.raises(CheckFailed) as failed:
        checks.cost_model(wrong)
    message = str(failed.value)
    assert said in message and "which is not the alpha-beta model's" in message, message
    assert not unmarked(message), message


@pytest.mark.parametrize("failure", FAILURES)
def test_every_line_of_the_other_failures_is_translated(failure, ring_table):
    check, words = FAILURES[failure]
    with pytest.raises(CheckFailed) as failed:
        check(ring_table, ARRAYS)
    message = str(failed.value)
    assert words in bare(message) and not unmarked(message), message


@pytest.mark.parametrize("failure", COMMANDS)
def test_a_command_to_type_is_the_only_line_left_as_it_is(failure, ring_table):
    check, command = COMMANDS[failure]
    with pytest.raises(CheckFailed) as failed:
        check(ring_table, ARRAYS)
    message = str(failed.value)
    assert unmarked(message) == [f"  -> {command}"], message


def test_the_hint_for_a_wrong_one_rank_time_is_translated():
    """One rank exchanges nothing: the hint names that limit, and no number of the model's."""
    hint = diagnosis(1.0, "ring", 1, 1024, 1e-6, 1e-9)
    assert hint.startswith(f"{i18n.MARK_OPEN}one rank alone exchanges nothing"), hint
    assert not any(ch.isdigit() for ch in hint.replace("1 rank", "")), hint
    assert not unmarked(hint), hint


def test_the_passing_lines_are_translated(solved, ring_table, capsys):
    checks.cost_model(solved.allreduce_time)
    checks.fit(solved.fit_alpha_beta, ring_table)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and all(line.startswith("OK: ") for line in lines), lines
    assert not unmarked("\n".join(lines)), lines


def test_the_predictions_lines_and_verdicts_are_translated(solved, folder, ring_table, capsys):
    """On a CPU run, its own exchange; on a GPU run, the benchmark's held-out size (a model a
    thousand times off misses it): the verdicts' tokens PASS and NOT YET stay as they are."""
    measured(folder, ranks=2)
    test_allreduce_checks.profiled_run(folder, "cpu", [10_000, 2_000, 64])
    checks.predict_profiled_step(solved.allreduce_time, solved.fit_alpha_beta, folder)
    profiled = {"run": "multi_node-9.pbs", "ranks": 2, "seconds": 2e-3, "device_kind": "gpu"}
    checks.predict_held_out_size(
        students.thousandfold_time, students.solved_fit, ring_table, profiled
    )
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(i18n.MARK_OPEN)[0] for line in lines] == ["", "PASS: ", "", "NOT YET: "]
    assert not unmarked("\n".join(lines)), lines


def test_the_verdicts_on_shared_cores_are_translated(solved, folder, capsys):
    """The profile's ranks got 43% of a core: the verdicts compare with the kit's model, a right
    one and a wrong one (its mistake named), every part marked."""
    measured(folder, ranks=2)
    test_allreduce_checks.profiled_run(folder, "cpu", [10_000, 2_000, 64], 500.0, (0.97, 0.43))
    checks.predict_profiled_step(solved.allreduce_time, solved.fit_alpha_beta, folder)
    checks.predict_profiled_step(students.bits_time, students.solved_fit, folder)
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(i18n.MARK_OPEN)[0] for line in lines] == ["", "PASS: ", "", "NOT YET: "]
    assert not unmarked("\n".join(lines)), lines


def test_without_a_profiled_run_the_prediction_says_so_translated(solved, folder):
    with pytest.raises(CheckFailed) as failed:
        checks.predict_profiled_step(solved.allreduce_time, solved.fit_alpha_beta, folder)
    message = str(failed.value)
    assert "no profiled stage-3 run" in message and not unmarked(message), message


def test_the_kits_closed_cost_model_says_so_translated():
    with pytest.raises(RuntimeError) as raised:
        checks.cost_model(students.getattr_time)
    said = [str(raised.value), *raised.value.__notes__]
    assert "course.lessons.step_time.costmodel) is closed" in said[0]
    assert len(said) == 2 and not unmarked("\n".join(said)), said

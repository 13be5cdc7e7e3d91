"""The large-batch exercise (notebook 05): its checks pass the solutions and name each planted
mistake, with the functions themselves (as in a notebook) and with Remote handles (as under the
grader); a function that hands the work to the kit's own rules fails; in the notebook's own test
cells each mistake loses exactly its point; and the kit's reference is Chainer's GradientLARS."""

from __future__ import annotations

import chainer
import nbformat
import numpy as np
import pytest

import course
from course.lessons.accuracy import large_batch as checks
from course.lessons.accuracy import large_batch_observers
from course.notebook import checks as notebook_checks
from course.notebook.checks import CheckFailed
from course.runtime import largebatch
from tests import large_batch_students as students
from tests import model_parallel_students
from tests.remote import HANDLES, RemoteRaised
from tests.solutions import SOLUTIONS


@pytest.fixture(scope="module", autouse=True)
def solved(tmp_path_factory):
    return model_parallel_students.load(tmp_path_factory.mktemp("solved"))


@HANDLES
def test_the_solutions_pass_the_checks(handle, solved, capsys):
    checks.rates(handle(solved.large_batch_rates))
    checks.rates(handle(solved.large_batch_rates), cases=[(0.2, 32, 32768), (0.004, 100, 150)])
    checks.lars(handle(solved.lars_local_rate))
    checks.lars(handle(solved.lars_local_rate), cases=[(40.0, 0.0, 0.0, 1e-2, 1e-7)])
    said = capsys.readouterr().out
    assert said.count("OK: ") == 4, said
    assert "large_batch_rates: the kit's two rates in 6 cases, one of them drawn at random" in said
    assert "lars_local_rate: the kit's local rate in 7 cases" in said


MISTAKES = [
    (checks.rates, students.ratio_upside_down, "your rates fall as the batch grows"),
    (checks.rates, students.root_of_the_rate, "does not double when the base rate doubles"),
    (checks.rates, students.root_of_the_batch, "is not the base rate when the batch is unchanged"),
    (checks.rates, students.swapped, "check the order of the pair"),
    (checks.rates, students.rounded_down, "your rates jump by whole steps"),
    (checks.lars, students.trust_inverted, "your factor grows with the gradient's norm"),
    (checks.lars, students.threshold_ignored, "your factor does not depend on the threshold"),
    (checks.lars, students.threshold_reversed, "check a layer on each side of the threshold"),
    (checks.lars, students.threshold_inclusive, "check a weight norm exactly at the threshold"),
    (checks.lars, students.decay_left_out, "your factor does not change with weight_decay"),
    (
        checks.lars,
        students.decay_on_the_gradient,
        "your decay term changes with the gradient's norm",
    ),
]


@HANDLES
@pytest.mark.parametrize(
    "check, wrong, said", MISTAKES, ids=[wrong.__name__ for _, wrong, _ in MISTAKES]
)
def test_each_planted_mistake_is_named_alone(handle, check, wrong, said):
    with pytest.raises(CheckFailed) as failed:
        check(handle(wrong))
    message = str(failed.value)
    assert "returned" in message and said in message, message
    others = [words for _, other, words in MISTAKES if other is not wrong and words in message]
    assert not others, f"{wrong.__name__} is also called {others}: {message}"


@HANDLES
def test_a_single_rate_a_text_a_stub_and_a_function_that_knows_only_the_listed_cases_fail(handle):
    with pytest.raises(CheckFailed, match=r"returned float, not the pair \(linear"):
        checks.rates(handle(students.one_rate))
    with pytest.raises(CheckFailed, match="returned str, not a number"):
        checks.lars(handle(students.text_rate))
    with pytest.raises((NotImplementedError, RemoteRaised)):
        checks.rates(handle(students.stub_rates))
    with pytest.raises(CheckFailed, match="which is not the kit's pair"):
        checks.rates(handle(students.listed_rates), cases=list(students.LISTED))


CLOSED = r"the kit's own large-batch rules \(course.runtime.largebatch\) are closed"


@HANDLES
@pytest.mark.parametrize(
    "check, cheat",
    [(checks.rates, students.kit_rates), (checks.lars, students.kit_lars)],
    ids=["imported", "attribute"],
)
def test_a_function_that_hands_the_work_to_the_kit_earns_nothing(handle, check, cheat):
    codes = [function.__code__ for function in large_batch_observers.REFERENCE]
    with pytest.raises((RuntimeError, RemoteRaised), match=CLOSED):
        check(handle(cheat))
    assert [function.__code__ for function in large_batch_observers.REFERENCE] == codes
    assert largebatch.large_batch_rates(0.1, 256, 1024) == (0.4, 0.2)


@pytest.mark.parametrize("case", checks.LARS_CASES[:3] + checks.LARS_CASES[4:])
def test_the_kits_reference_is_what_chainers_gradient_lars_does(case):
    """The reference against the hook itself: a parameter of the case's norms, the hook applied,
    the gradient (decay added) divided back out."""
    weight_norm, grad_norm, weight_decay, threshold, eps = case
    direction = np.array([3.0, 4.0], dtype=np.float64) / 5.0
    param = chainer.Parameter(direction * weight_norm)
    param.grad = direction * grad_norm
    before = param.grad + weight_decay * param.array
    hook = chainer.optimizer_hooks.GradientLARS(threshold, weight_decay, eps)
    hook(None, param)
    factor = float(param.grad[0] / before[0])
    assert factor == pytest.approx(largebatch.lars_local_rate(*case), rel=1e-9)


# --- the notebook's test cells: each mistake loses exactly its point ------------------------------

NOTEBOOK = nbformat.read(SOLUTIONS / model_parallel_students.LARGE_BATCH_NOTEBOOK, as_version=4)
GRADED = {
    cell.metadata["nbgrader"]["grade_id"]: (cell.source, cell.metadata["nbgrader"]["points"])
    for cell in NOTEBOOK.cells
    if cell.cell_type == "code"
    and cell.metadata["nbgrader"].get("grade")
    and "checks.large_batch." in cell.source
}


@HANDLES
@pytest.mark.parametrize(
    "name, wrong, expected",
    [
        (None, None, set()),
        ("large_batch_rates", students.root_of_the_rate, {"check_large_batch_rates"}),
        ("lars_local_rate", students.threshold_ignored, {"check_lars_local_rate"}),
    ],
    ids=["solved", "rates", "lars"],
)
def test_in_the_notebook_each_mistake_loses_exactly_its_point(
    handle, name, wrong, expected, solved
):
    functions = {
        key: handle(getattr(solved, key)) for key in ("large_batch_rates", "lars_local_rate")
    }
    if name is not None:
        functions[name] = handle(wrong)
    failed = {}
    for grade_id, (source, points) in GRADED.items():
        try:
            exec(source, {"checks": notebook_checks, "course": course, **functions})
        except (CheckFailed, RemoteRaised, NotImplementedError):
            failed[grade_id] = points
    assert set(failed) == expected
    assert sum(failed.values()) == len(expected)  # a point each
    assert sum(points for _, points in GRADED.values()) == 2  # and 3 for the written answers

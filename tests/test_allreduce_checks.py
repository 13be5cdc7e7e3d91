"""The allreduce exercise's checks (course.lessons.step_time.allreduce): notebook 03's solutions
pass
them and each planted mistake fails with the words that name it, both with the functions themselves
(as in a notebook) and with Remote handles whose observations run in a forked child (as under the
grader); a function that hands the work to the kit's own cost model fails, by whatever name it
reaches it."""

from __future__ import annotations

import nbformat
import pytest

import course
from course.contracts import stages
from course.lessons.step_time import allreduce as checks
from course.lessons.step_time import allreduce_observers, costmodel
from course.notebook import checks as notebook_checks
from course.notebook.checks import CheckFailed
from course.notebook.checks.observe import Remote
from tests import allreduce_students as students
from tests.helpers import make_run
from tests.mpi_helpers import measured
from tests.remote import HANDLES, RemoteRaised
from tests.solutions import SOLUTIONS

GRADING = """
[allreduce]
prediction_factor = 4.0
shared_below = 0.8
"""

# Each check is run on the functions themselves and on Remote handles of them.


@pytest.fixture(scope="module", autouse=True)
def solved(tmp_path_factory):
    """Notebook 03's solution functions, as the planted functions call them."""
    return students.load(tmp_path_factory.mktemp("solved"))


# --- the checks -----------------------------------------------------------------------------------


@HANDLES
def test_the_solutions_pass_the_checks(handle, solved, tmp_path, capsys):
    checks.cost_model(handle(solved.allreduce_time))
    checks.cost_model(
        handle(solved.allreduce_time),
        cases=[("ring", 3, 12345, 1e-5, 3e-10), ("recursive_doubling", 32, 7, 1, 2)],
    )
    checks.cost_model(handle(students.float32_time), cases=[("ring", 4, 4096, 1.0, 0.5)])
    table = measured(tmp_path)
    checks.fit(handle(solved.fit_alpha_beta), table)
    checks.fit(handle(solved.fit_alpha_beta), table, alpha=1e-5, beta=1e-9)
    checks.fit(handle(students.array_fit), table)  # an array of the two will do
    said = capsys.readouterr().out
    assert said.count("OK: ") == 6
    assert "match the alpha-beta model in 7 cases, 2 of them drawn at random" in said


@HANDLES
@pytest.mark.parametrize(
    "wrong, said",
    [
        (students.ring_with_p, "your ring costs time on a single rank"),
        (students.doubling_with_p, "steps grow in proportion to the ranks"),
        (students.swapped_time, "the units of your answer are off"),
        (students.bits_time, "your transfer term is too large for the bytes given"),
        (students.ring_sends_n, "bytes term is the same whatever the number of ranks"),
    ],
)
def test_the_cost_model_check_names_planted_mistakes(handle, wrong, said):
    with pytest.raises(CheckFailed) as failed:
        checks.cost_model(handle(wrong))
    message = str(failed.value)
    assert "returned" in message and "which is not the alpha-beta model's" in message
    assert said in message, message


@HANDLES
def test_the_cost_model_check_says_what_a_wrong_type_is(handle):
    with pytest.raises(CheckFailed, match="returned str, not a number of seconds"):
        checks.cost_model(handle(students.text_time))


@HANDLES
def test_a_model_that_knows_only_the_lessons_cases_fails_on_a_drawn_one(handle):
    """Every listed case, visible and hidden, is right: the cases drawn at random are not."""
    with pytest.raises(CheckFailed, match=r"\) returned 0 s, which is not the alpha-beta model's"):
        checks.cost_model(handle(students.listed_time), cases=students.LISTED)


@HANDLES
def test_the_fit_check_fails_a_swapped_or_unweighted_fit_a_text_and_an_empty_table(
    handle, solved, tmp_path
):
    table = measured(tmp_path)
    with pytest.raises(CheckFailed, match="the first is seconds per byte") as failed:
        checks.fit(handle(students.swapped_fit), table)
    assert "check the order of the pair" in str(failed.value)
    with pytest.raises(CheckFailed, match="your fit follows the largest messages"):
        checks.fit(handle(students.unweighted_fit), table)
    with pytest.raises(CheckFailed, match="returned str on exact ring times on 4 ranks, not the"):
        checks.fit(handle(students.text_fit), table)
    with pytest.raises(CheckFailed, match="submit jobs/run_allreduce_benchmark.sh"):
        checks.fit(handle(solved.fit_alpha_beta), [])


@HANDLES
def test_the_students_prediction_is_their_model_per_parameter_array(handle, solved, tmp_path):
    table = measured(tmp_path, ranks=2)
    arrays = [1_000, 250_000, 30]
    time, fit = handle(solved.allreduce_time), handle(solved.fit_alpha_beta)
    alpha, beta = costmodel.fit(table[0].sizes, table[0].median, "ring", 2)
    per_array = checks.predict(time, fit, table, 2, "ring", arrays)
    packed = checks.predict(time, fit, table, 2, "ring", sum(arrays))
    assert type(per_array) is float and type(packed) is float
    assert per_array == pytest.approx(
        costmodel.predict_gradient_allreduce(arrays, "ring", 2, alpha, beta)
    )
    assert packed == pytest.approx(
        costmodel.predict_gradient_allreduce(sum(arrays), "ring", 2, alpha, beta)
    )
    with pytest.raises(CheckFailed, match="has not measured recursive_doubling on 2 ranks"):
        checks.predict(time, fit, table, 2, "recursive_doubling", arrays)
    with pytest.raises(CheckFailed, match="fit_alpha_beta returned str on the measured ring, 2"):
        checks.predict(
            handle(students.solved_time), handle(students.text_fit), table, 2, "ring", arrays
        )
    with pytest.raises(CheckFailed, match="allreduce_time returned str, not a number of seconds"):
        checks.predict(
            handle(students.text_time), handle(students.solved_fit), table, 2, "ring", arrays
        )


@HANDLES
def test_on_gpus_the_graded_prediction_is_the_benchmarks_largest_size_from_the_others(
    handle, solved, tmp_path, capsys
):
    """A GPU step's exchange is NCCL's in GPU memory, which the host-memory benchmark does not
    measure: the cell grades the held-out largest message instead, and says why."""
    table = measured(tmp_path, ranks=2)
    profiled = {"run": "multi_node-9.pbs", "ranks": 2, "seconds": 2e-3, "device_kind": "gpu"}
    time, fit = handle(solved.allreduce_time), handle(solved.fit_alpha_beta)
    predicted, graded = checks.predict_held_out_size(time, fit, table, profiled)
    [series] = table
    assert graded["seconds"] == series.median[-1] and "67,108,864-byte ring" in graded["run"]
    assert type(predicted) is float and 0.5 < predicted / graded["seconds"] < 2
    said = capsys.readouterr().out
    assert "ran on GPUs" in said and "NCCL in GPU memory" in said and "PASS" in said
    # A model a thousand times off misses it: the point is not given for running the cell.
    wrong, _ = checks.predict_held_out_size(
        handle(students.thousandfold_time), handle(students.solved_fit), table, profiled
    )
    assert wrong / graded["seconds"] > 100 and "NOT YET" in capsys.readouterr().out
    with pytest.raises(CheckFailed, match="no ring or recursive_doubling series"):
        checks.predict_held_out_size(time, fit, table, {**profiled, "ranks": 4})


def profiled_run(
    folder,
    device_kind: str,
    arrays: list[int],
    allreduce_ms: float = 0.05,
    shares: tuple[float | None, ...] = (None, None),
    number: int = 5,
) -> None:
    """A traced 2-rank stage-3 run with a step profile: its allreduce 0.05 ms a step by default,
    about what the benchmark of tests.mpi_helpers.measured gives `arrays` on 2 ranks; each rank's
    share of a core from `shares` (None: left out, as older runs have none)."""
    make_run(
        folder,
        stages.MULTI_NODE.name,
        number,
        100.0,
        workers=2,
        device_kind=device_kind,
        communicator="naive",
        allreduce="ring",
        fields={
            "model": {"name": "vgg", "width": 16, "parameters": sum(arrays), "arrays": arrays},
            "profile": {
                "ranks": [
                    {
                        "rank": rank,
                        "host": "n1",
                        "median_ms": {"allreduce": allreduce_ms},
                        "steps": 10,
                        **({"cpu_share": share} if share is not None else {}),
                    }
                    for rank, share in enumerate(shares)
                ]
            },
        },
    )


@HANDLES
@pytest.mark.parametrize(
    ("device_kind", "share", "allreduce_ms"),
    [("cpu", None, 0.05), ("cpu", 0.43, 50.0), ("gpu", None, 0.05)],
    ids=["cpu", "cpu-shared-cores", "gpu"],
)
@pytest.mark.usefixtures("grading_config")
def test_the_prediction_cell_scores_a_plain_float_of_the_judges(
    handle, device_kind, share, allreduce_ms, solved, folder, monkeypatch, capsys
):
    """Notebook 04's prediction cell, hidden test included, on a CPU run (its own exchange), a CPU
    run whose cores were shared (its exchange a thousand times the model's: the kit's model is
    compared instead) and a GPU run (the benchmark's held-out size): the scoring gets the judge's
    float, and reads everything else from the files."""
    notebook = nbformat.read(SOLUTIONS / "04_step_time.ipynb", as_version=4)
    [cell] = [
        c.source
        for c in notebook.cells
        if c.metadata.get("nbgrader", {}).get("grade_id") == "check_prediction"
    ]
    table = measured(folder, ranks=2)
    arrays = [10_000, 2_000, 64]
    profiled_run(folder, device_kind, arrays, allreduce_ms, (0.97, share))
    monkeypatch.chdir(folder)  # where the student's runs/ are
    namespace = {
        "checks": notebook_checks,
        "course": course,
        "allreduce_time": handle(solved.allreduce_time),
        "fit_alpha_beta": handle(solved.fit_alpha_beta),
    }
    exec(cell, namespace)
    predicted, exchange = namespace["predicted"], namespace["measured"]
    assert type(predicted) is float
    said = capsys.readouterr().out
    if device_kind == "cpu":
        alpha, beta = costmodel.fit(table[0].sizes, table[0].median, "ring", 2)
        assert predicted == pytest.approx(
            costmodel.predict_gradient_allreduce(arrays, "ring", 2, alpha, beta)
        )
        assert exchange["seconds"] == pytest.approx(allreduce_ms / 1e3)
        assert "the gradient allreduce of multi_node-5.local: " in said
    else:
        assert "67,108,864-byte ring" in said
    # the cell's own verdict, then the grader's: both say what was compared
    assert said.count("PASS: ") == 1 and said.count("OK: ") == 1, said
    if share is not None:
        assert exchange["cpu_share"] == share
        compared = (
            "a rank got only 43% of a core over its steady steps, below the grading rules' 80%"
        )
        assert said.count(compared) == 2 and said.count("your model agrees with the kit's") == 2
    else:
        assert "predicted" in said and "within 4x" in said and "the cores were shared" not in said


@HANDLES
def test_the_prediction_says_a_stub_before_anything_about_the_runs(handle, folder):
    with pytest.raises((NotImplementedError, RemoteRaised), match="stub"):
        checks.predict_profiled_step(
            handle(students.stub_time), handle(students.solved_fit), folder
        )


# --- the kit's own cost model is closed while the student's function runs ------------------------

CLOSED = (
    r"the kit's own cost model \(course.lessons.step_time.costmodel\) is closed while your "
    r"function is checked"
)


@HANDLES
@pytest.mark.parametrize(
    "check",
    [
        lambda handle, table: checks.cost_model(handle(students.getattr_time)),
        lambda handle, table: checks.cost_model(handle(students.direct_time)),
        lambda handle, table: checks.fit(handle(students.getattr_fit), table),
        lambda handle, table: checks.fit(handle(students.alias_fit), table),
        lambda handle, table: checks.predict(
            handle(students.getattr_time), handle(students.solved_fit), table, 2, "ring", [1000]
        ),
        lambda handle, table: checks.predict(
            handle(students.solved_time), handle(students.getattr_fit), table, 2, "ring", [1000]
        ),
    ],
    ids=[
        "getattr-model",
        "named-model",
        "getattr-fit",
        "imported-fit",
        "predict-model",
        "predict-fit",
    ],
)
def test_a_function_that_hands_the_work_to_the_kit_earns_nothing(handle, check, tmp_path):
    """Issue 29, case 5: by getattr, by name or by a name imported before the check, the kit's
    model and fit raise while the student's function runs, saying why; the kit is left as it
    was."""
    table = measured(tmp_path, ranks=2)
    codes = [function.__code__ for function in allreduce_observers.REFERENCE]
    with pytest.raises((RuntimeError, RemoteRaised), match=CLOSED) as failed:
        check(handle, table)
    assert "write the formula (or the least-squares fit) in your function yourself" in str(
        failed.value
    )
    assert [function.__code__ for function in allreduce_observers.REFERENCE] == codes
    assert costmodel.allreduce_seconds("ring", 2, 0, 1.0, 0.0) == 2.0


def right_facts(observer: str, names: list[str], inputs: dict) -> object:
    """What a child running a right solution sends, computed from the observer's inputs."""
    if observer.endswith(":times"):
        return [
            {"seconds": costmodel.allreduce_seconds(*case), "type": "float"}
            for case in inputs["cases"]
        ]
    pairs = [list(costmodel.fit(*series)) for series in inputs["series"]]
    return [{"pair": pair, "type": "tuple", "types": ["float", "float"]} for pair in pairs]


def forged(change) -> Remote:
    """A Remote whose child sends the right facts changed by `change`."""
    return Remote("forged", {}, lambda *asked: change(right_facts(*asked)))


def as_text(facts: list) -> list:
    key = "seconds" if "seconds" in facts[0] else "pair"
    return [{**fact, key: str(fact[key])} for fact in facts]


@pytest.mark.parametrize(
    "change",
    [
        as_text,  # the numbers as text
        lambda facts: (
            [{**fact, "seconds": True} for fact in facts]
            if "seconds" in facts[0]
            else [{**fact, "pair": [*fact["pair"], 0.0]} for fact in facts]
        ),  # a bool for a number; a pair of three
        lambda facts: facts[:-1],  # one short
        lambda facts: {str(k): fact for k, fact in enumerate(facts)},  # an object for the list
        lambda facts: [{"type": fact["type"]} for fact in facts],  # no value at all
    ],
    ids=["text", "bool-or-triple", "short", "object", "valueless"],
)
@pytest.mark.parametrize("check", ["cost_model", "fit"])
def test_forged_facts_of_the_wrong_shape_fail_the_check(check, change, tmp_path, capsys):
    """What the child sends may be forged: the right numbers in the wrong type or shape fail, never
    pass; sent as they should be, they pass (so each failure is the forgery's)."""
    table = measured(tmp_path, ranks=2)
    run = {"cost_model": checks.cost_model, "fit": lambda fn: checks.fit(fn, table)}[check]
    run(forged(lambda facts: facts))
    assert "OK: " in capsys.readouterr().out
    with pytest.raises(Exception) as failed:
        run(forged(change))
    assert not isinstance(failed.value, (KeyboardInterrupt, SystemExit))


def test_the_notebooks_check_cells_pass_its_solutions_visible_and_hidden(
    solved, folder, monkeypatch, capsys
):
    measured(folder, ranks=2)
    monkeypatch.chdir(folder)  # where the student's runs/ are
    notebook = nbformat.read(SOLUTIONS / "04_step_time.ipynb", as_version=4)
    cells = {
        cell.metadata.nbgrader.grade_id: cell.source
        for cell in notebook.cells
        if cell.metadata.get("nbgrader", {}).get("grade")
    }
    for grade_id in ("check_allreduce_time", "check_fit"):
        exec(cells[grade_id], {"checks": notebook_checks, "course": course, **vars(solved)})
    assert capsys.readouterr().out.count("OK: ") == 4

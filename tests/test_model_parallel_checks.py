"""The model-parallel exercise (notebook 05): its checks pass the solutions and name each planted
mistake, with the functions themselves (as in a notebook) and with Remote handles (as under the
grader); a function that hands the work to the kit's own model fails; the run's file is read only
when its job's log vouches for it; and in the notebook's own test cells each mistake loses exactly
its points."""

from __future__ import annotations

import json

import nbformat
import pytest

import course
from course.cluster import accounting
from course.contracts import model_parallel
from course.lessons.beyond import model_parallel as checks
from course.lessons.beyond import model_parallel_observers, model_parallel_report, parallelism
from course.notebook import checks as notebook_checks
from course.notebook.checks import CheckFailed
from tests import model_parallel_students as students
from tests.helpers import ROOT
from tests.remote import HANDLES, RemoteRaised
from tests.solutions import SOLUTIONS


@pytest.fixture(scope="module", autouse=True)
def solved(tmp_path_factory):
    return students.load(tmp_path_factory.mktemp("solved"))


def traced_run(folder, job: str = "7.local", log: bool = True, **changed) -> str:
    """A model-parallel file as jobs/run_model_parallel.sh leaves it (VGG width 8, batch 32, cut
    after block 2), and its job's log naming it; its path under `folder`."""
    record = {
        "job": {"id": job, "scheduler": "local", "name": model_parallel.JOB_SCRIPT},
        "ranks": 2,
        "hosts": ["vm", "vm"],
        "cores": 2,
        "dataset": "synthetic",
        "model": {"name": "vgg", "width": 8, "parameters": 235_970},
        "batch": 32,
        "images": 192,
        "rounds": 2,
        "cut": {"after_block": 2, "shape": [16, 8, 8]},
        "data_parallel": {"seconds": [0.40, 0.45, 0.50], "gradient_bytes_per_rank": 943_880},
        "model_parallel": {"seconds": [0.60, 0.65, 0.70], "activation_bytes": 262_144},
        "started": 1.0,
        "seconds_total": 9.0,
        **changed,
    }
    path = model_parallel.next_path(model_parallel.run_folder(folder, job), record["ranks"])
    path.parent.mkdir(parents=True, exist_ok=True)
    sha256 = model_parallel.write(path, record)
    name = path.relative_to(folder).as_posix()
    if log:
        (folder / f"{model_parallel.JOB_SCRIPT}.o{job.split('.')[0]}").write_text(
            "course launch: ...\n" + model_parallel.log_line(name, sha256, record["ranks"]) + "\n"
        )
    return name


# --- the checks -----------------------------------------------------------------------------------


@HANDLES
def test_the_solutions_pass_the_checks(handle, solved, folder, capsys):
    checks.activation(handle(solved.activation_bytes))
    checks.activation(handle(solved.activation_bytes), cases=[(3, (10,)), (256, (512, 7, 7))])
    checks.gradient(handle(solved.gradient_bytes))
    checks.gradient(handle(solved.gradient_bytes), cases=[(10, 1), (138_000_000, 16)])
    checks.idle(handle(solved.idle_fraction))
    checks.idle(handle(solved.idle_fraction), cases=[(3, 1), (16, 4)])
    traced_run(folder)
    summary = checks.measured_run(
        handle(solved.activation_bytes), handle(solved.gradient_bytes), folder
    )
    said = capsys.readouterr().out
    assert said.count("OK: ") == 7, said
    assert "activation_bytes: the kit's count in 5 cases, one of them drawn at random" in said
    assert "model parallel took" not in said  # the report cell shows the table, not the check
    assert summary["activation_bytes"] == 262_144
    assert summary["gradient_bytes"] == parallelism.gradient_bytes(235_970, 2) == 1_887_760


MISTAKES = [
    (checks.activation, students.forward_only, "counts the forward pass only"),
    (
        checks.activation,
        students.values_not_bytes,
        "your count is of values, the question's of bytes",
    ),
    (checks.activation, students.one_image, "your count is the same for every batch size"),
    (checks.activation, students.bits, "counts bits"),
    (checks.gradient, students.one_rank, "counts what one rank sends"),
    (checks.gradient, students.half_ring, "your ring stops before every rank holds the whole sum"),
    (checks.gradient, students.whole_to_everyone, "your count grows with the square of the ranks"),
    (
        checks.idle,
        students.no_micro_batches,
        "your share does not change with the number of micro-batches",
    ),
    (checks.idle, students.busy_share, "your share is of the time a stage works"),
    (checks.idle, students.over_micro_batches, "your step is too short"),
]


@HANDLES
@pytest.mark.parametrize(
    "check, wrong, said", MISTAKES, ids=[wrong.__name__ for _, wrong, _ in MISTAKES]
)
def test_each_planted_mistake_is_named(handle, check, wrong, said):
    with pytest.raises(CheckFailed) as failed:
        check(handle(wrong))
    message = str(failed.value)
    assert "returned" in message and "which is not the kit's count" in message, message
    assert said in message, message


@HANDLES
def test_a_text_a_stub_and_a_function_that_knows_only_the_listed_cases_fail(handle):
    with pytest.raises(CheckFailed, match="returned str, not a number of bytes"):
        checks.activation(handle(students.text_count))
    with pytest.raises((NotImplementedError, RemoteRaised)):
        checks.gradient(handle(students.stub_count))
    with pytest.raises(CheckFailed, match=r"returned 0, which is not the kit's count"):
        checks.idle(handle(students.listed_idle), cases=list(students.LISTED))


CLOSED = (
    r"the kit's own model of the two parallelisms \(course.lessons.beyond.parallelism\) is closed"
)


@HANDLES
@pytest.mark.parametrize(
    "check, cheat",
    [(checks.activation, students.kit_activation), (checks.idle, students.kit_idle)],
    ids=["imported", "getattr"],
)
def test_a_function_that_hands_the_work_to_the_kit_earns_nothing(handle, check, cheat):
    codes = [function.__code__ for function in model_parallel_observers.REFERENCE]
    with pytest.raises((RuntimeError, RemoteRaised), match=CLOSED):
        check(handle(cheat))
    assert [function.__code__ for function in model_parallel_observers.REFERENCE] == codes
    assert parallelism.idle_fraction(2, 1) == 0.5


# --- the run: traced, or left out with the reason ------------------------------------------------


@HANDLES
def test_the_run_check_needs_a_run_its_log_vouches_for(handle, solved, folder, capsys):
    functions = handle(solved.activation_bytes), handle(solved.gradient_bytes)
    with pytest.raises(CheckFailed, match="submit jobs/run_model_parallel.sh"):
        checks.measured_run(*functions, folder)
    unlogged = traced_run(folder, job="8.local", log=False)
    edited = traced_run(folder, job="9.local")
    record = json.loads((folder / edited).read_text())
    record["model_parallel"]["seconds"] = [0.1, 0.1, 0.1]
    (folder / edited).write_text(json.dumps(record))
    copied = traced_run(folder, job="10.local")
    (folder / f"{model_parallel.JOB_SCRIPT}.o10").write_text("course launch: ...\n")
    with pytest.raises(CheckFailed, match="no model-parallel run in runs/ counts") as failed:
        checks.measured_run(*functions, folder)
    said = str(failed.value)
    assert f"left out {unlogged}: no job log of job 8.local is in this folder" in said
    assert f"left out {edited}: " in said and "was changed after the job wrote it" in said
    assert f"left out {copied}: the log {model_parallel.JOB_SCRIPT}.o10 does not name" in said
    model_parallel_report.traced(folder)
    assert f"note: left out {unlogged}: no job log" in capsys.readouterr().out


def known(account: accounting.JobAccount | None) -> accounting.Accounting:
    """The grader's accounting for alice (cluster user s1234), with records that hold `account` for
    every job (None: no such job)."""
    why = "" if account else "sacct -j 7.local knows no such job"
    return accounting.Accounting(
        "alice",
        "s1234",
        records=lambda scheduler, job: accounting.Lookup(account, why, absent=account is None),
    )


@HANDLES
def test_with_the_graders_accounting_a_run_must_be_the_students_job(handle, solved, folder, capsys):
    functions = handle(solved.activation_bytes), handle(solved.gradient_bytes)
    name = traced_run(folder)
    forged = {
        "unknown": (None, "job 7.local is not in the scheduler's records"),
        "another user's": (
            accounting.JobAccount("s9999", 1, None, 60.0, "sacct -j 7.local"),
            "job 7.local ran as user s9999 (sacct -j 7.local), not as s1234",
        ),
        "too short": (
            accounting.JobAccount("s1234", 1, None, 3.0, "sacct -j 7.local"),
            "job 7.local ran 3 s (sacct -j 7.local), less than the run's own 9 s",
        ),
    }
    for account, why in forged.values():
        with pytest.raises(CheckFailed, match="no model-parallel run in runs/ counts") as failed:
            checks.measured_run(*functions, folder, checked=known(account))
        assert f"left out {name}: {why}" in str(failed.value)
    mine = accounting.JobAccount("s1234", 1, None, 60.0, "sacct -j 7.local")
    checks.measured_run(*functions, folder, checked=known(mine))
    said = capsys.readouterr().out
    assert "job 7.local checked against sacct -j 7.local: user s1234, 1 node(s)" in said
    checks.measured_run(*functions, folder, checked=accounting.Accounting("alice", "s1234"))
    said = capsys.readouterr().out  # the local scheduler keeps no records: said, not failed
    assert "OK: your counts are" in said
    assert "job 7.local was not checked against the scheduler's records" in said


@HANDLES
def test_a_wrong_count_misses_the_run_as_it_misses_its_own_check(handle, solved, folder):
    traced_run(folder)
    with pytest.raises(CheckFailed, match="returned 131072; the run counted 262,144 bytes"):
        checks.measured_run(handle(students.forward_only), handle(students.solved_gradient), folder)
    with pytest.raises(CheckFailed, match="returned 943880; the run counted 1,887,760 bytes"):
        checks.measured_run(handle(students.solved_activation), handle(students.one_rank), folder)


def test_the_log_line_round_trips_and_the_report_says_when_there_is_no_run(folder, capsys):
    line = model_parallel.log_line("runs/model_parallel-1/2r-1.json", "a" * 64, 2)
    assert model_parallel.logged(f"x\n{line}\ny") == [
        {"path": "runs/model_parallel-1/2r-1.json", "sha256": "a" * 64, "ranks": 2}
    ]
    assert model_parallel_report.show(folder) is None
    assert "No model-parallel run yet: submit jobs/run_model_parallel.sh" in capsys.readouterr().out


# --- the notebook's test cells: each mistake loses exactly its points ----------------------------

NOTEBOOK = nbformat.read(SOLUTIONS / students.NOTEBOOK, as_version=4)
GRADED = {
    cell.metadata["nbgrader"]["grade_id"]: (cell.source, cell.metadata["nbgrader"]["points"])
    for cell in NOTEBOOK.cells
    if cell.cell_type == "code"
    and cell.metadata["nbgrader"].get("grade")
    and "checks.model_parallel." in cell.source  # the large-batch cells: test_large_batch_checks
}


def lost(functions: dict, folder, monkeypatch) -> dict[str, int]:
    """{grade id: points} of the notebook's test cells (hidden tests included) that fail, graded
    by the kit's grading.toml as the grader finds it."""
    monkeypatch.chdir(folder)
    monkeypatch.setenv("COURSE_GRADING_CONFIG", str(ROOT / "grading.toml"))
    failed = {}
    for grade_id, (source, points) in GRADED.items():
        try:
            exec(source, {"checks": notebook_checks, "course": course, **functions})
        except (CheckFailed, RemoteRaised, NotImplementedError):
            failed[grade_id] = points
    return failed


@HANDLES
@pytest.mark.parametrize(
    "name, wrong, expected",
    [
        (None, None, set()),
        (
            "activation_bytes",
            students.forward_only,
            {"check_activation_bytes", "check_model_parallel_run"},
        ),
        (
            "gradient_bytes",
            students.half_ring,
            {"check_gradient_bytes", "check_model_parallel_run"},
        ),
        ("idle_fraction", students.no_micro_batches, {"check_idle_fraction"}),
    ],
    ids=["solved", "activation", "gradient", "idle"],
)
def test_in_the_notebook_each_mistake_loses_exactly_its_points(
    handle, name, wrong, expected, solved, folder, monkeypatch, capsys
):
    """A wrong count also misses the run (the run's check is that count on the run's setting);
    the idle fraction has its own point alone."""
    traced_run(folder)
    functions = {
        key: handle(getattr(solved, key))
        for key in ("activation_bytes", "gradient_bytes", "idle_fraction")
    }
    if name is not None:
        functions[name] = handle(wrong)
    failed = lost(functions, folder, monkeypatch)
    assert set(failed) == expected
    assert sum(failed.values()) == len(expected)  # a point each
    assert sum(points for _, points in GRADED.values()) == 4  # and 2 for the written answer

"""No submission stops, hangs or starves a class's `course grade` (the real command, nbgrader's
apps, the bubblewrap sandbox where it starts): a loop of links, a link to /dev/zero, a named pipe
where a job log would be, a link to a classmate's notebook, and an edition that does not build are
each that submission's NOT GRADED, with the cause named, while the rest of the class is graded and
the gradebook and plagiarism table are written."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess

import pytest

from course import paths
from course.instructor import demo, i18n_release
from tests.helpers import PYTHON, ROOT, bubblewrap

pytestmark = pytest.mark.integration

A = paths.ASSIGNMENT
JA = i18n_release.assignment("ja")


def _untranslated_always_hidden_line(course) -> None:
    """The instructor adds an English comment to an ALWAYS HIDDEN block of notebook 02: the
    catalogs have no Japanese for it, so the Japanese edition does not build."""
    path = course / "solutions" / A / "02_multi_gpu.ipynb"
    notebook = json.loads(path.read_text())
    [cell] = [c for c in notebook["cells"] if "### BEGIN ALWAYS HIDDEN TESTS\n" in c["source"]]
    at = cell["source"].index("### BEGIN ALWAYS HIDDEN TESTS\n") + 1
    cell["source"].insert(at, "# A case a student once got wrong: keep it secret.\n")
    path.write_text(json.dumps(notebook, indent=1, ensure_ascii=False))


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("batch")
    course = demo.course_folder(ROOT, tmp / "course")
    _untranslated_always_hidden_line(course)
    solved = demo.student_copy(ROOT / "notebooks" / A, ROOT / "solutions" / A, tmp / "solved")
    submitted = course / "submitted"
    for student in ("dora", "erin", "loop", "zero", "fifo", "zed"):
        shutil.copytree(solved, submitted / student / A)
    (submitted / "loop" / A / "runs").mkdir()
    (submitted / "loop" / A / "runs" / "a").symlink_to("b")
    (submitted / "loop" / A / "runs" / "b").symlink_to("a")
    results = submitted / "zero" / A / "runs" / "single_gpu-7.pbs" / "results.json"
    results.parent.mkdir(parents=True)
    results.symlink_to("/dev/zero")
    os.mkfifo(submitted / "fifo" / A / "run_single_gpu_training.sh.o7")  # hashed as a job log
    notebook = submitted / "zed" / A / "01_single_gpu.ipynb"
    notebook.unlink()
    notebook.symlink_to(submitted / "dora" / A / "01_single_gpu.ipynb")
    shutil.copytree(ROOT / "notebooks" / JA, submitted / "hanako" / JA)
    env = paths.tool_environment()
    if not bubblewrap():
        env["COURSE_SANDBOX"] = "off"
    run = subprocess.run(
        [PYTHON, "-m", "course", "grade", "--course-dir", str(course), "--no-feedback"],
        capture_output=True,
        text=True,
        env=env,
        timeout=1200,  # the /dev/zero link alone held the run until its limit before
    )
    return run, course


def _details(course) -> dict[str, str]:
    """{student: the message of their first row} of grades-details.csv."""
    found: dict[str, str] = {}
    with open(course / "grades-details.csv") as f:
        for row in csv.DictReader(f):
            found.setdefault(row["student"], row["message"])
    return found


def test_the_class_is_graded_and_exported_around_the_submissions_that_cannot_be(graded):
    run, course = graded
    assert run.returncode == 1, run.stdout + run.stderr  # some could not be graded
    with open(course / "grades.csv") as f:
        graded_students = sorted(row["student_id"] for row in csv.DictReader(f))
    assert graded_students == ["dora", "erin"], run.stdout + run.stderr
    assert (course / "grades-plagiarism.csv").is_file()
    assert "NOT GRADED: fifo, hanako, loop, zed, zero" in run.stderr


@pytest.mark.parametrize(
    "student, cause",
    [
        ("loop", "runs/a -> b: a loop of links; runs/b -> a: a loop of links"),
        ("zero", "runs/single_gpu-7.pbs/results.json -> /dev/zero: outside the submission"),
        ("fifo", "run_single_gpu_training.sh.o7: a named pipe (FIFO)"),
        ("zed", "01_single_gpu.ipynb -> "),
    ],
)
def test_a_submission_holding_what_no_step_may_open_is_not_graded_with_the_cause(
    graded, student, cause
):
    run, course = graded
    message = _details(course)[student]
    assert message.startswith(
        f"NOT GRADED: the submission holds files the grader does not open ({cause}"
    ), message


def test_an_edition_that_does_not_build_is_that_editions_error(graded):
    run, course = graded
    message = _details(course)["hanako"]
    assert message.startswith(f"NOT GRADED: the {JA} edition could not be built for grading: ")
    assert "A case a student once got wrong" in message or "02_multi_gpu" in message, message
    with open(course / "grades-plagiarism.csv") as f:
        assert next(csv.reader(f)) == ["kind", "shared", "students", "files"]

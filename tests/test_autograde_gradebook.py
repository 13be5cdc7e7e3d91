"""What `course grade` makes of nbgrader's gradebook (course.instructor.autograde), without running
autograde.

A real gradebook, filled through nbgrader's own API as autograde leaves it, stands in for a grading
run: tests/test_grading.py grades real submissions end to end (slowly).
"""

from __future__ import annotations

import csv
import re
import shutil
import subprocess

import pytest

from course import paths
from course.errors import GradingError
from course.instructor import autograde, grade_command, grade_report
from tests.helpers import PYTHON, ROOT

# nbgrader's add_submission trips SQLAlchemy's autoflush warnings; they are nbgrader's, not the
# kit's.
pytestmark = pytest.mark.filterwarnings("ignore::sqlalchemy.exc.SAWarning")
A = paths.ASSIGNMENT
NOTEBOOKS = {
    "01_single_gpu": ["check_iterators", "check_results"],
    "03_multi_node": ["check_optimizer"],
}
HANDED_IN = {
    "alice": ["01_single_gpu", "03_multi_node"],
    "judy": ["01_single_gpu", "03_multi_node"],
    "mia": ["01_single_gpu"],
}


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """(course folder, gradebook URL): every test passed, but mia handed in no
    03_multi_node.ipynb."""
    from nbgrader.api import Gradebook

    root = tmp_path_factory.mktemp("course")
    shutil.copy(ROOT / "nbgrader_config.py", root)
    db_url = f"sqlite:///{root / 'gradebook.db'}"
    with pytest.MonkeyPatch.context() as env:
        env.setenv("PATH", paths.tool_environment()["PATH"])  # a new gradebook runs `alembic`
        with Gradebook(db_url, grade_report.course_id(root)) as gradebook:
            gradebook.add_assignment(A)
            for notebook, tests in NOTEBOOKS.items():
                gradebook.add_notebook(notebook, A)
                for test in tests:
                    gradebook.add_grade_cell(test, notebook, A, max_score=2, cell_type="code")
            for student, notebooks in HANDED_IN.items():
                gradebook.add_student(student)
                gradebook.add_submission(A, student)
                for notebook, tests in NOTEBOOKS.items():
                    if notebook in notebooks:
                        (root / "submitted" / student / A).mkdir(parents=True, exist_ok=True)
                        (root / "submitted" / student / A / f"{notebook}.ipynb").write_text("{}")
                    for test in tests:  # nbgrader's autograde scores a notebook not handed in 0
                        grade = gradebook.find_grade(test, notebook, A, student)
                        grade.auto_score = 2 if notebook in notebooks else 0
            gradebook.db.commit()
    return root, db_url


def read_gradebook(course, student: str) -> grade_report.Outcome:
    root, db_url = course
    outcome = grade_report.Outcome(student, graded=True, seconds=1.0)
    grade_report.read_gradebook(root, root / "submitted", db_url, outcome)
    return outcome


@pytest.mark.integration
def test_a_notebook_not_handed_in_is_named(course, tmp_path):
    mia = read_gradebook(course, "mia")
    assert (mia.score, mia.max_score, mia.missing) == (4, 6, ["03_multi_node.ipynb"])
    grade_report.write_details([mia], tmp_path / "details.csv")
    with open(tmp_path / "details.csv") as f:
        lost = [
            (row["test"], row["message"]) for row in csv.DictReader(f) if float(row["score"]) < 2
        ]
    assert lost == [("check_optimizer", "03_multi_node.ipynb was not handed in")]
    assert grade_report.summary([mia]).splitlines() == [
        "mia: 4/6 (01_single_gpu 4/4, 03_multi_node 0/2)",
        "    03_multi_node.ipynb: not handed in",
    ]
    assert read_gradebook(course, "alice").missing == []


@pytest.mark.integration
def test_a_submission_not_graded_is_left_out_of_grades_csv(course, tmp_path):
    root, db_url = course
    judy = grade_report.Outcome(
        "judy", graded=False, seconds=1.0, failure="01_single_gpu.ipynb: NotJSONError"
    )
    outcomes = [read_gradebook(course, "alice"), judy, read_gradebook(course, "mia")]
    autograde.export(root, db_url, tmp_path / "grades.csv", outcomes)
    with open(tmp_path / "grades.csv") as f:
        reader = csv.DictReader(f)
        scores = {row["student_id"]: row["score"] for row in reader}
    assert reader.fieldnames[:4] == [
        "assignment",
        "duedate",
        "timestamp",
        "student_id",
    ]  # nbgrader's columns
    assert scores == {
        "alice": "6.0",
        "mia": "4.0",
    }  # judy's gradebook holds 6 points she was not graded for
    grade_report.write_details(outcomes, tmp_path / "grades-details.csv")
    with open(tmp_path / "grades-details.csv") as f:
        [row] = [row for row in csv.DictReader(f) if row["student"] == "judy"]
    assert row["message"] == "NOT GRADED: 01_single_gpu.ipynb: NotJSONError"


# Another `course grade`, holding the course folder's lock until its stdin closes.
HOLDER = """
import sys
from pathlib import Path
from course.instructor.autograde import grading_lock
with grading_lock(Path(sys.argv[1])):
    print("grading", flush=True)
    sys.stdin.read()
"""


@pytest.mark.parametrize("ends", ["finishes", "is killed"])
def test_a_second_grading_run_stops_at_once_and_says_why(tmp_path, ends):
    for name in ("nbgrader_config.py", "grading.toml"):
        shutil.copy(ROOT / name, tmp_path)
    (tmp_path / "solutions" / A).mkdir(parents=True)
    other = subprocess.Popen(
        [PYTHON, "-c", HOLDER, str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert other.stdout.readline() == "grading\n"
        with pytest.raises(
            GradingError,
            match=re.escape(
                f"a grading run is already in progress in {tmp_path} (pid {other.pid})"
            ),
        ):
            grade_command.main(["--course-dir", str(tmp_path)])
        assert not (tmp_path / "gradebook.db").exists(), (
            "the second run must not touch the gradebook"
        )
        if ends == "finishes":
            other.stdin.close()
        else:
            other.kill()
        other.wait(timeout=60)
    finally:
        other.kill()
        other.wait()
    with autograde.grading_lock(tmp_path):  # the lock went with the run that held it
        pass

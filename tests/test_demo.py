"""make demo's term through nbgrader's exchange (course.instructor.demo.play_term), with two
students who train nothing, so that it stays cheap: one solves part of notebook 01, one hands in the
release as fetched. The gradebook comes from the collected submissions; each student fetches their
own feedback. make demo itself adds a student who solves everything and runs the real jobs."""

from __future__ import annotations

import csv

import pytest

from course import paths
from course.errors import CourseError
from course.instructor import class_report, demo, notebook_run, sandbox
from tests.helpers import ROOT, bubblewrap

A = paths.ASSIGNMENT
STUDENTS = (
    demo.Student("ada", (demo.NOTEBOOKS[0],), frozenset({"build_trainer", "add_snapshots"})),
    demo.Student("ben", ()),
)


@pytest.mark.slow
@pytest.mark.extended  # a term through the exchange: test_bundle_term.py, test_hub.py
def test_a_term_through_nbgraders_exchange(tmp_path, quick_env, monkeypatch, capfd):
    if not bubblewrap():
        monkeypatch.setenv(sandbox.SWITCH, "off")
    status, folders = demo.play_term(ROOT, tmp_path, STUDENTS, env=quick_env)
    assert status == 0
    # Long steps say how far they are: each graded cell a student runs, each submission verified.
    said = capfd.readouterr().out
    assert "    01_single_gpu.ipynb cell " in said and " (check_iterators): " in said, said
    assert "  verified ada (" in said and "  verified ben (" in said, said
    course = tmp_path / "course"
    inbound = tmp_path / "exchange" / "chainer-distributed-training" / "inbound"
    sent = {
        path.name.split("+")[0]: (path / "timestamp.txt").read_text() for path in inbound.iterdir()
    }
    assert sorted(sent) == ["ada", "ben"]
    with open(course / "grades.csv") as f:
        rows = {row["student_id"]: row for row in csv.DictReader(f)}
    assert sorted(rows) == ["ada", "ben"]
    for student, row in rows.items():
        assert row["timestamp"] in sent[student], "graded what nbgrader collected from the exchange"
    assert (
        float(rows["ada"]["score"]) == 2 + 2
    )  # make_iterators, make_model_and_optimizer (the answer: by hand)
    assert float(rows["ben"]["score"]) == 0
    for student in ("ada", "ben"):
        fetched = sorted(p.name for p in (folders[student] / "feedback").rglob("*.html"))
        assert fetched == sorted(n.replace(".ipynb", ".html") for n in demo.NOTEBOOKS)
    ada = next((folders["ada"] / "feedback").rglob("01_single_gpu.html")).read_text()
    ben = next((folders["ben"] / "feedback").rglob("01_single_gpu.html")).read_text()
    assert "Score: 4.0 / 15.0" in ada and "Score: 0.0 / 15.0" in ben, "each fetched their own"
    # The class report of this term: both students, neither with a run.
    assert class_report.main(["--course-dir", str(course)]) == 0
    page = (course / class_report.DEFAULT_NAME).read_text()
    assert "<td>ada</td><td>4/84</td>" in page and "<td>ben</td><td>0/84</td>" in page


@pytest.mark.integration
def test_a_long_cell_says_it_is_still_running(tmp_path, monkeypatch):
    """The demo's stage-3 comparison runs for many minutes in one cell: it says so while it runs.
    The cell waits until the demo has said it (no sleep decides the outcome)."""
    import nbformat

    said = tmp_path / "said"
    monkeypatch.setattr(notebook_run, "HEARTBEAT", 0.5)
    monkeypatch.setattr(notebook_run, "SLOW_CELL", 0.0)  # and said as it ends
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [
        nbformat.v4.new_code_cell(
            "import pathlib, time\n"
            f"said = pathlib.Path({str(said)!r})\n"
            "deadline = time.monotonic() + 120\n"
            "while not said.exists() and time.monotonic() < deadline:\n"
            "    time.sleep(0.1)\n"
            "assert said.exists(), 'the demo said nothing while this cell ran'"
        )
    ]
    nbformat.write(notebook, tmp_path / "long.ipynb")
    lines: list[str] = []

    def echo(line: str) -> None:
        lines.append(line)
        if "still running" in line:
            said.touch()

    assert demo.run_notebook(tmp_path / "long.ipynb", echo=echo) == []
    assert lines[0].startswith("    long.ipynb cell 1/1: still running, "), lines
    assert lines[-1].startswith("    long.ipynb cell 1/1: ") and " s in" in lines[-1], lines


@pytest.mark.integration
def test_a_cell_past_its_limit_is_said_as_a_timeout_not_a_disk_problem(tmp_path):
    """nbclient's cell timeout is a TimeoutError, an OSError: `course demo` told a user whose
    comparison cell ran past 1800 s at load 16 to check a path's permissions and free space. A
    limit is now opt-in, and running past it names the cell and the limit."""
    import nbformat

    notebook = nbformat.v4.new_notebook()
    notebook.cells = [
        nbformat.v4.new_code_cell("1"),
        nbformat.v4.new_code_cell("import threading\nthreading.Event().wait()"),
    ]
    nbformat.write(notebook, tmp_path / "stuck.ipynb")
    with pytest.raises(CourseError) as said:
        demo.run_notebook(tmp_path / "stuck.ipynb", timeout=5)
    assert said.value.message.startswith("stuck.ipynb cell 2/2 ran longer than its limit of 5 s")
    assert "disk" not in said.value.hint

"""A term played from the student bundle alone: `./install.sh` into a fresh folder, the instructor
releases to the exchange the bundle names, the student runs the solved notebook 01 (its real job
included) with the bundle's own JupyterLab environment and hands in with `course handin`, and the
instructor collects and grades with nbgrader. A hand-in that cannot reach the exchange exits 1 and
says so. tests/test_bundle.py checks what the bundle holds; tests/test_demo.py the term from the
kit itself."""

from __future__ import annotations

import csv
import os
import shutil
import subprocess

import nbformat
import pytest

from course import paths
from course.instructor import bundle, demo, exchange, grade_command, sandbox
from tests.helpers import ROOT, bubblewrap

A = paths.ASSIGNMENT
NOTEBOOK = demo.NOTEBOOKS[0]
INSTALL_TIMEOUT = 1800  # pip resolves and installs the pins: minutes, on a cold cache
NOTEBOOK_TIMEOUT = 1800


def student(command: list[str], cwd, env, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )


@pytest.mark.slow
@pytest.mark.timeout(INSTALL_TIMEOUT + NOTEBOOK_TIMEOUT + 600)  # each step's limit, and grading
def test_a_term_from_the_student_bundle_alone(tmp_path, quick_env, monkeypatch):
    if not bubblewrap():
        monkeypatch.setenv(sandbox.SWITCH, "off")
    ex = tmp_path / "exchange"
    made = bundle.build(ROOT, tmp_path / "bundle", ex)
    # The student's shell: the bundle's environment only (none of the kit's), CPU only.
    env = {k: v for k, v in quick_env.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    installed = student(["./install.sh"], made, env, INSTALL_TIMEOUT)
    assert installed.returncode == 0, installed.stdout[-2000:] + installed.stderr[-2000:]
    env = {
        **env,
        "PATH": f"{made / '.venv' / 'bin'}{os.pathsep}{env['PATH']}",
        "CUDA_VISIBLE_DEVICES": "",
    }
    python = str(made / ".venv" / "bin" / "python")
    handin = [python, "-m", "course", "handin", "--student=ada", f"--Exchange.cache={tmp_path}"]

    # Before the instructor released anything, the exchange is not there: nothing is handed in,
    # and the command says so with a failing exit status.
    refused = student(handin, made, env)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "Nothing was handed in" in refused.stderr and str(ex) in refused.stderr

    course = demo.course_folder(ROOT, tmp_path / "course")
    shutil.copytree(ROOT / "notebooks" / A, course / "notebooks" / A)
    exchange.run("release_assignment", [A], course, ex)

    # The bundle holds the release already; fetching through its configuration adds nothing.
    fetched = student(
        [
            python,
            "-m",
            "nbgrader",
            "fetch_assignment",
            A,
            "--replace",
            f"--Exchange.cache={tmp_path}",
        ],
        made,
        env,
    )
    assert fetched.returncode == 0, fetched.stdout + fetched.stderr
    folder = exchange.assignment_folder(made, exchange.settings(made))
    demo.solve(folder, ROOT / "solutions" / A, (NOTEBOOK,))
    ran = student(
        [
            str(made / ".venv" / "bin" / "jupyter"),
            "nbconvert",
            "--to=notebook",
            "--execute",
            "--inplace",
            f"--ExecutePreprocessor.timeout={NOTEBOOK_TIMEOUT}",
            NOTEBOOK,
        ],
        folder,
        env,
        timeout=NOTEBOOK_TIMEOUT,
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    outputs = [
        output
        for cell in nbformat.read(folder / NOTEBOOK, as_version=4).cells
        for output in cell.get("outputs", [])
    ]
    assert not [o for o in outputs if o.output_type == "error"]
    assert list((folder / "runs").glob("single_gpu-*/results.json")), "the job ran"

    handed = student(handin, made, env)
    assert handed.returncode == 0, handed.stdout + handed.stderr
    assert "Handed in" in handed.stdout
    assert list((ex / exchange.settings(made).course_id / "inbound").glob(f"ada+{A}+*"))

    status = grade_command.main(["--course-dir", str(course), "--exchange", str(ex)])
    assert status == 0
    with open(course / "grades.csv") as f:
        rows = {row["student_id"]: row for row in csv.DictReader(f)}
    assert list(rows) == ["ada"]
    # Every autograded point of notebook 01 (its checks, its job's run and the prediction of it);
    # its written answers (2 + 1 points) are graded by hand.
    assert float(rows["ada"]["score"]) == 12
    feedback = course / "feedback" / "ada" / A / NOTEBOOK.replace(".ipynb", ".html")
    assert "Score: 12.0 / 15.0" in feedback.read_text()

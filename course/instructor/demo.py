"""`python -m course demo` (make demo): the whole course on this machine, as a newcomer sees it.

1. data: the data set the site profile names (the synthetic set is made when missing);
2. doctor: what works here;
3. release: the student release, made from solutions/ by nbgrader, in a fresh course folder;
4. a student: takes the release, writes the solutions into the exercise cells and runs every notebook
   top to bottom, which submits the real jobs (run here by the embedded scheduler, or by qsub where
   the site profile says so);
5. the instructor: collects the student's folder and grades it with `course grade` (nbgrader autograde,
   feedback, CSV export);
6. the gradebook and the scaling figures.

Everything goes to build/demo/ in the kit's folder. On a machine without GPUs stage 2's job cannot
run: its notebook stops at that cell with the message a student would see, and its throughput earns
no points.
"""
from __future__ import annotations

import argparse
import os
import shutil
import time
from pathlib import Path

from course import doctor, paths, stages
from course.cluster import siteenv
from course.errors import GradingError
from course.instructor import autograde, release, sandbox, verify
from course.notebook import report
from course.runtime import data

STUDENT = "demo-student"
NOTEBOOKS = tuple(stage.notebook for stage in stages.STAGES.values())


def student_copy(release_folder: Path, solutions_folder: Path, destination: Path) -> Path:
    """A copy of the release whose exercise cells hold the solutions, as a student would write them."""
    import nbformat

    shutil.copytree(release_folder, destination)
    for name in NOTEBOOKS:
        notebook = nbformat.read(destination / name, as_version=4)
        source = nbformat.read(solutions_folder / name, as_version=4)
        answers = {cell.metadata["nbgrader"]["grade_id"]: cell.source for cell in source.cells
                   if cell.metadata.get("nbgrader", {}).get("solution")}
        for cell in notebook.cells:
            grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
            if grade_id in answers:
                cell.source = "\n".join(line for line in answers[grade_id].splitlines()
                                        if "### BEGIN SOLUTION" not in line and "### END SOLUTION" not in line)
        nbformat.write(notebook, destination / name)
    return destination


def run_notebook(path: Path, timeout: int = 1800, env: dict[str, str] | None = None) -> list[str]:
    """Execute a notebook in its folder as JupyterLab would, keep its outputs; return its errors.

    env: the kernel's environment (default: this process's).
    """
    import nbformat
    from nbclient import NotebookClient

    notebook = nbformat.read(path, as_version=4)
    client = NotebookClient(notebook, timeout=timeout, allow_errors=True, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}},
                            extra_arguments=["--IPKernelApp.log_level=ERROR"])  # as nbgrader_config.py
    client.execute(**({"env": env} if env is not None else {}))
    nbformat.write(notebook, path)
    errors = []
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            if output.output_type == "error":
                grade_id = cell.metadata.get("nbgrader", {}).get("grade_id", "?")
                errors.append(f"{grade_id}: {output.ename}: {output.evalue.splitlines()[0] if output.evalue else ''}")
    return errors


def course_folder(root: Path, destination: Path) -> Path:
    """A course folder for nbgrader: its configuration, grading.toml and the source solutions/."""
    destination.mkdir(parents=True)
    for name in ("nbgrader_config.py", "grading.toml"):
        shutil.copy(root / name, destination / name)
    shutil.copytree(root / "solutions", destination / "solutions")
    return destination


def play_student(root: Path, workdir: Path, echo=print, env: dict[str, str] | None = None) -> Path:
    """Release, then a student who solves and runs every notebook; returns the student's folder."""
    released = Path(workdir) / "release"
    release.generate(root, released)
    student = student_copy(released / paths.ASSIGNMENT, root / "solutions" / paths.ASSIGNMENT,
                           Path(workdir) / "student" / paths.ASSIGNMENT)
    for name in NOTEBOOKS:
        started = time.monotonic()
        errors = run_notebook(student / name, env=env)
        echo(f"  {name}: ran in {time.monotonic() - started:.0f} s"
             + ("" if not errors else "; stopped with: " + "; ".join(errors)))
    return student


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="course demo", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=None, help="default: build/demo in the kit's folder")
    args = parser.parse_args(argv)
    root = paths.kit_root()
    out = (args.out or root / "build" / "demo").resolve()
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    started = time.monotonic()

    settings = siteenv.read(siteenv.in_folder(root))
    print(f"== 1. Data (site profile {settings['COURSE_SITE']}: {settings['COURSE_DATASET']})")
    name = settings["COURSE_DATASET"]
    if name == data.SYNTHETIC and not data.path_for(name).exists():
        data.prepare_synthetic()
    print(data.info(data.resolve(name)).describe())
    print("\n== 2. What works on this machine")
    print(doctor.render(doctor.run_checks()))

    print("\n== 3-4. The student release, and a student who works through it (the jobs run now)")
    student = play_student(root, out)

    print("\n== 5. The instructor grades the submission with nbgrader")
    course = course_folder(root, out / "course")
    shutil.copytree(student, course / "submitted" / STUDENT / paths.ASSIGNMENT)
    try:
        verify.check_sandbox()
    except GradingError as e:  # the demo grades its own student: say what a real grading run needs, go on
        print(f"Note: {e.message}\n  -> {e.hint}\n  The demo grades its own student without the sandbox.")
        os.environ[sandbox.SWITCH] = "off"
    status = autograde.main(["--course-dir", str(course)])

    print("\n== 6. The student's runs: throughput, scaling, accuracy and time to accuracy")
    table = report.rows(student)
    print(report.table_text(table))
    for line in report.notes(table, report.target_of(student)):
        print(line)
    print(f"\nDemo finished in {(time.monotonic() - started) / 60:.1f} min. The student's folder: {student}")
    print(f"Feedback for the student: {course / 'feedback' / STUDENT / paths.ASSIGNMENT}")
    return status

"""`python -m course release`: the student release notebooks/ from the nbgrader source solutions/.

nbgrader's own generate_assignment makes the notebooks (stubs for solutions, hidden tests removed);
then the job scripts of jobs/ are copied in, so that the released folder holds everything a student
needs. tests/test_release.py checks that the committed notebooks/ equals what this makes.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from course import paths
from course.cluster import sites
from course.errors import CourseError
from course.instructor import exchange

JOB_OUTPUTS = ("runs", "*.o[0-9]*", "train_cifar_*.py", "result")


def job_outputs(folder: Path) -> list[Path]:
    """Job outputs and generated scripts in `folder`: they must not travel with the assignment."""
    return sorted(p for pattern in JOB_OUTPUTS for p in Path(folder).glob(pattern))


def generate(root: Path, destination: Path) -> list[Path]:
    """Run nbgrader generate_assignment on root's source into `destination`/<assignment>."""
    source = root / "solutions" / paths.ASSIGNMENT
    leftovers = job_outputs(source)
    if leftovers:
        raise CourseError(
            f"{source} holds job outputs ({', '.join(p.name for p in leftovers[:4])})",
            "run the solution notebooks in a copy, not in solutions/; remove these first",
        )
    with tempfile.TemporaryDirectory(prefix="course-release-") as tmp:
        command = [
            sys.executable,
            "-m",
            "nbgrader",
            "generate_assignment",
            paths.ASSIGNMENT,
            "--force",
            "--CourseDirectory.root=" + str(root),
            f"--CourseDirectory.release_directory={destination}",
            f"--CourseDirectory.db_url=sqlite:///{tmp}/gradebook.db",
            "--log-level=WARN",
        ]
        run = subprocess.run(
            command, cwd=root, capture_output=True, text=True, env=paths.tool_environment()
        )
    if run.returncode != 0:
        raise CourseError(
            f"nbgrader generate_assignment failed:\n{run.stdout}{run.stderr}",
            "fix the notebook it names (nbgrader's cell metadata or solution markers)",
        )
    folder = Path(destination) / paths.ASSIGNMENT
    sites.copy_jobs(root / paths.JOBS_DIR, folder / paths.JOBS_DIR)
    return sorted(folder.rglob("*"))


def main(argv: list[str] | None = None) -> int:
    import argparse

    argparse.ArgumentParser(prog="course release", description=__doc__).parse_args(argv or [])
    root = paths.kit_root()
    release = root / "notebooks"
    folder = release / paths.ASSIGNMENT
    if folder.exists() and job_outputs(folder):
        raise CourseError(
            f"{folder} holds job outputs", "work in a copy of the release; remove them here first"
        )
    with tempfile.TemporaryDirectory(prefix="course-release-") as tmp:
        generate(root, Path(tmp))
        if folder.exists():
            shutil.rmtree(folder)
        shutil.copytree(Path(tmp) / paths.ASSIGNMENT, folder)
    print(f"released {paths.ASSIGNMENT} to {folder}:")
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            print(f"  {path.relative_to(release)}")
    print(
        f"To the students: nbgrader release_assignment {paths.ASSIGNMENT} (here; the exchange is "
        f"{exchange.settings(root).root}), and hand out make student-bundle"
    )
    return 0

"""`python -m course release`: the student release notebooks/ from the nbgrader source solutions/,
in every language of the course (the English edition, and each other one as its own assignment).

nbgrader's own generate_assignment makes the notebooks (stubs for solutions, hidden tests removed);
then the job scripts of jobs/ are copied in (another language's with their comments translated), so
that the released folder holds everything a student needs. tests/test_release.py checks that the
committed notebooks/ equals what this makes.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from course import i18n, paths
from course.cluster import sites
from course.contracts import lessons
from course.errors import CourseError
from course.instructor import exchange, i18n_release, lesson_source

JOB_OUTPUTS = ("runs", "*.o[0-9]*", "train_cifar_*.py", "result")


def job_outputs(folder: Path) -> list[Path]:
    """Job outputs and generated scripts in `folder`: they must not travel with the assignment."""
    return sorted(p for pattern in JOB_OUTPUTS for p in Path(folder).glob(pattern))


def _generate_assignment(root: Path, assignment: str, destination: Path, source: Path) -> None:
    """nbgrader generate_assignment of `source`/<assignment> into `destination`, with root's
    nbgrader configuration."""
    with tempfile.TemporaryDirectory(prefix="course-release-") as tmp:
        command = [
            sys.executable,
            "-m",
            "nbgrader",
            "generate_assignment",
            assignment,
            "--force",
            "--CourseDirectory.root=" + str(root),
            f"--CourseDirectory.source_directory={source}",
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


def generate(
    root: Path,
    destination: Path,
    lang: str = i18n.DEFAULT,
    choice: lessons.Choice | None = None,
) -> list[Path]:
    """Run nbgrader generate_assignment on root's source of the chosen lessons (`choice`, else
    root's course.toml), in the edition `lang`, into `destination`/<the edition's assignment>.
    Another language's source is built first from the English one and its catalog
    (course.instructor.i18n_release), in a course folder of its own."""
    source = root / "solutions" / paths.ASSIGNMENT
    leftovers = job_outputs(source)
    if leftovers:
        raise CourseError(
            f"{source} holds job outputs ({', '.join(p.name for p in leftovers[:4])})",
            "run the solution notebooks in a copy, not in solutions/; remove these first",
        )
    choice = choice or lessons.load(root)
    assignment = i18n_release.assignment(lang)
    folder = Path(destination) / assignment
    with tempfile.TemporaryDirectory(prefix=f"course-release-{lang}-") as tmp:
        edition = Path(tmp)
        source = edition / "solutions"
        # the job scripts beside the edition's source, not in it (nbgrader would release them)
        jobs = edition / paths.JOBS_DIR
        lesson_source.build(root, lang, source, choice, jobs=jobs)
        if lang == i18n.DEFAULT:
            _generate_assignment(root, assignment, destination, source)
            sites.copy_jobs(root / paths.JOBS_DIR, folder / paths.JOBS_DIR)
        else:
            (edition / "nbgrader_config.py").write_text(
                i18n_release.nbgrader_config(root, lang), encoding="utf-8"
            )
            _generate_assignment(edition, assignment, destination, source)
            sites.copy_jobs(jobs, folder / paths.JOBS_DIR)
    return sorted(folder.rglob("*"))


def main(argv: list[str] | None = None) -> int:
    import argparse

    argparse.ArgumentParser(prog="course release", description=__doc__).parse_args(argv or [])
    root = paths.kit_root()
    release = root / "notebooks"
    folders = [release / i18n_release.assignment(lang) for lang in i18n.LANGUAGES]
    for folder in folders:
        if folder.exists() and job_outputs(folder):
            raise CourseError(
                f"{folder} holds job outputs",
                "work in a copy of the release; remove them here first",
            )
    choice = lessons.load(root)
    print(f"lessons ({lessons.FILE}), about {choice.minutes / 60:.1f} h of work:")
    print(choice.describe())
    with tempfile.TemporaryDirectory(prefix="course-release-") as tmp:
        for lang in i18n.LANGUAGES:  # every edition made before any is replaced
            generate(root, Path(tmp), lang, choice)
        for folder in folders:
            if folder.exists():
                shutil.rmtree(folder)
            shutil.copytree(Path(tmp) / folder.name, folder)
    for folder in folders:
        print(f"released {folder.name} to {folder}:")
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                print(f"  {path.relative_to(release)}")
    print(
        f"To the students: nbgrader release_assignment {' and '.join(f.name for f in folders)} "
        f"(here; the exchange is {exchange.settings(root).root}), and hand out make student-bundle"
    )
    return 0

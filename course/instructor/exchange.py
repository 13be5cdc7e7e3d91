"""nbgrader's exchange as the kit configures it: where it is, the students' side of the
configuration, and nbgrader's exchange apps run against it (release_assignment, fetch_assignment,
submit, ...).

The course's nbgrader_config.py is the one place the exchange is set (COURSE_EXCHANGE, else
exchange/ beside it); the students' configuration (the bundle's nbgrader_config.py) is written from
it.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from course import paths
from course.errors import CourseError

ENV = "COURSE_EXCHANGE"


@dataclass(frozen=True)
class Settings:
    """What nbgrader's exchange apps read from a course's nbgrader_config.py."""

    course_id: str
    root: Path
    path_includes_course: bool
    ignore: tuple[str, ...]
    max_file_size: int  # kB, nbgrader's unit (1 kB = 1000 bytes)
    max_dir_size: int  # kB


def settings(course_dir: Path) -> Settings:
    """The exchange settings of the course folder's nbgrader_config.py (COURSE_EXCHANGE applied)."""
    from nbgrader.coursedir import CourseDirectory
    from nbgrader.exchange.default import Exchange
    from traitlets.config.loader import PyFileConfigLoader

    config = PyFileConfigLoader("nbgrader_config.py", path=str(course_dir)).load_config()
    coursedir, exchange = (
        CourseDirectory(config=config),
        Exchange(config=config),
    )  # nbgrader's defaults filled in
    if not coursedir.course_id:
        raise CourseError(
            f"{course_dir / 'nbgrader_config.py'} sets no CourseDirectory.course_id",
            "the exchange keeps each course under its id: set it",
        )
    return Settings(
        coursedir.course_id,
        Path(exchange.root),
        exchange.path_includes_course,
        tuple(coursedir.ignore),
        coursedir.max_file_size,
        coursedir.max_dir_size,
    )


# nbgrader's submit, naming what makes a folder too big (course/notebook/handin_submit.py); a name,
# not an import: importing nbgrader's exchange takes over a second.
SUBMIT = "course.notebook.handin_submit.NamingSubmit"


def student_config(course: Settings, root: Path | None = None) -> str:
    """The text of the students' nbgrader_config.py: the course's exchange (or `root`),
    COURSE_EXCHANGE first."""
    made_by = "made by `python -m course bundle`"
    return f'''"""nbgrader's configuration for the course's students ({made_by}).

JupyterLab's Assignment List and `nbgrader fetch_assignment / submit / fetch_feedback` read it when
started in this folder. Set COURSE_EXCHANGE if your instructor gives you another exchange folder.
"""
import os

c = get_config()  # noqa: F821 (nbgrader provides it)

c.CourseDirectory.course_id = {course.course_id!r}
c.Exchange.root = os.environ.get({ENV!r}) or {str(root or course.root)!r}
c.Exchange.path_includes_course = {course.path_includes_course!r}
# What submit leaves out (snapshots, data, caches): the job outputs in runs/ and the job logs go in.
c.CourseDirectory.ignore = {list(course.ignore)!r}
# nbgrader refuses a submission over max_dir_size kB (ignored files counted); larger files are
# left out.
c.CourseDirectory.max_dir_size = {course.max_dir_size!r}
c.CourseDirectory.max_file_size = {course.max_file_size!r}
# nbgrader's submit, whose refusal of a folder over that size names its largest files.
c.ExchangeFactory.submit = {SUBMIT!r}
'''


def assignment_folder(notebook_root: Path, course: Settings) -> Path:
    """Where fetch_assignment puts the assignment and submit takes it from, under a student's
    notebook root."""
    base = (
        Path(notebook_root) / course.course_id
        if course.path_includes_course
        else Path(notebook_root)
    )
    return base / paths.ASSIGNMENT


def run(app: str, args: list[str], cwd: Path, root: Path, cache: Path | None = None) -> str:
    """`nbgrader APP ARGS` in `cwd` (whose nbgrader_config.py applies) against the exchange `root`;
    its log.

    cache: the student's own nbgrader cache (submit records there what fetch_feedback looks for);
    one per student when several play on one machine, as each would have their own home folder.
    """
    command = [sys.executable, "-m", "nbgrader", app, *args, f"--Exchange.root={root}"]
    if cache is not None:
        command.append(f"--Exchange.cache={cache}")
    done = subprocess.run(
        command, cwd=cwd, capture_output=True, text=True, env=paths.tool_environment()
    )
    log = done.stdout + done.stderr
    if done.returncode != 0:
        said = [
            line for line in log.splitlines() if "ERROR" in line or "CRITICAL" in line
        ] or log.splitlines()[-3:]
        raise CourseError(
            f"nbgrader {app} failed in {cwd}:\n  " + "\n  ".join(said),
            f"those are nbgrader's words; the exchange was {root} ({ENV} or c.Exchange.root in "
            "nbgrader_config.py sets it)",
        )
    return log

"""nbgrader's autograde with the verifier in place of its Execute step, and deleted test cells put
back (both set in nbgrader_config.py).

`python -m course grade` verifies every submission first, each in its own sandboxed process and
several at a time, and leaves the verdicts in COURSE_VERIFIED_DIR; nbgrader then puts their outputs
into the test cells, scores them as it always does, and keeps the gradebook, the feedback and the
export. Run by nbgrader alone (`nbgrader autograde`, the Formgrader), the step verifies the notebook
itself. Either way no student code runs in nbgrader's process or in a kernel.

A test cell the student deleted (or whose nbgrader marks they changed) is put back from the
gradebook by nbgrader's own OverwriteCells (`add_missing_cells`), so the verifier's run of the
instructor's copy is scored as for any other test; RestoreDeletedCells only places it where
nbgrader 0.9.6 cannot.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import nbformat
from nbgrader.converters import Autograde
from nbgrader.coursedir import CourseDirectory
from nbgrader.preprocessors import Execute, NbGraderPreprocessor, OverwriteCells
from traitlets import Float

from course import i18n
from course.instructor import editions, nbgrader_cells, verify, verify_functions, verify_plan
from course.instructor.submission_html import SanitizeSubmission
from course.instructor.verify_protocol import SAID_KEY, Plan, Reply, Verdict, VerificationError

VERDICTS = "COURSE_VERIFIED_DIR"
# Seconds a test cell may run in the verifier (the stage-3 checks start MPI ranks: a few seconds,
# more on a loaded machine): VerifiedExecute.timeout's default, and `course grade --cell-timeout`'s.
CELL_TIMEOUT = 180.0


def verdict_file(folder: Path, student: str) -> Path:
    return Path(folder) / f"{student}.json"


def write_verdicts(
    folder: Path, student: str, verdicts: list[Verdict] | None, failure: str = ""
) -> None:
    verdict_file(folder, student).write_text(Reply(verdicts, failure).to_json())


def read_verdicts(folder: Path, student: str) -> tuple[list[Verdict] | None, str]:
    """(verdicts, failure) that `course grade` left for a student; (None, "") when there are
    none."""
    path = verdict_file(folder, student)
    if not path.is_file():
        return None, ""
    reply = Reply.from_json(path.read_text())
    return reply.verdicts, reply.failure


class VerifiedExecute(NbGraderPreprocessor):
    """Give each test cell the outputs the verifier's run of it produced; leave the other cells
    empty."""

    timeout = Float(CELL_TIMEOUT, help="seconds a test cell may run in the verifier").tag(
        config=True
    )

    def preprocess(self, nb: Any, resources: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        student, name = (
            resources["nbgrader"]["student"],
            f"{resources['nbgrader']['notebook']}.ipynb",
        )
        assignment = resources["nbgrader"]["assignment"]
        folder = Path(resources["metadata"]["path"])
        course = CourseDirectory(config=self.config)
        root = Path(course.root)
        source = Path(course.format_path(course.source_directory, ".", assignment))
        plan = next(p for p in verify_plan.plans(source) if p.notebook == name)
        verdict = self._prepared(student, name, nb, plan)
        if verdict is None:
            verdict = verify.verify(
                folder,
                [plan],
                course_root=root,
                grading_config=root / "grading.toml",
                timeout=self.timeout,
                # the edition's language: its checks and the grader's words on it speak it
                lang=editions.ASSIGNMENTS.get(assignment, i18n.DEFAULT),
            )[0]
        for cell in nb.cells:
            if cell.cell_type == "code":
                grade_id = nbgrader_cells.grade_id(cell) or ""
                cell.outputs = [nbformat.from_dict(o) for o in verdict.outputs.get(grade_id, [])]
                cell.metadata.pop(SAID_KEY, None)  # only the grader's record, never one handed in
                if grade_id in verdict.said:  # for grade_report's English of its error
                    cell.metadata[SAID_KEY] = verdict.said[grade_id]
        return nb, resources

    @staticmethod
    def _prepared(student: str, name: str, nb: Any, plan: Plan) -> Verdict | None:
        """The verdict `course grade` prepared for this notebook, if it verified these very solution
        cells."""
        folder = os.environ.get(VERDICTS)
        if not folder:
            return None
        verdicts, failure = read_verdicts(Path(folder), student)
        if failure:
            raise VerificationError(failure, "")
        sources = verify_functions.solution_sources(nb, plan.solution_ids)
        return next(
            (
                v
                for v in verdicts or []
                if v.notebook == name and v.digest == verify_functions.digest(sources)
            ),
            None,
        )


def autograde_preprocessors() -> list[type]:
    """nbgrader's own list of autograde steps, with VerifiedExecute in place of Execute, and the
    graded notebook's HTML cleaned last (course.instructor.submission_html)."""
    default = Autograde.class_traits()["autograde_preprocessors"].default()
    steps = [VerifiedExecute if step is Execute else step for step in default]
    return [*steps, SanitizeSubmission]


class RestoreDeletedCells(OverwriteCells):
    """nbgrader's OverwriteCells, whose `add_missing_cells` puts a deleted grade cell back after the
    nearest cell of the source notebook that the submission still has.

    nbgrader 0.9.6 puts it after the source cell just before it, and fails on the whole notebook
    (KeyError) when that cell is a read-only one, as the report cell before each results check is.
    """

    def add_missing_grade_cells(self, nb: Any, resources: dict[str, Any]) -> tuple[Any, Any]:
        source = self.gradebook.find_notebook(self.notebook_id, self.assignment_id)
        order = [cell.name for cell in source.source_cells]  # the source notebook's order
        by_name = {cell.name: cell for cell in source.source_cells}
        solutions = {cell.name for cell in source.solution_cells}
        for grade_cell in source.grade_cells:
            present = {
                name: index
                for index, cell in enumerate(nb.cells)
                if (name := nbgrader_cells.grade_id(cell)) is not None
            }
            if grade_cell.name in present:
                continue
            self.log.warning("Missing grade cell %s, adding it to the notebook", grade_cell.name)
            earlier = order[: order.index(grade_cell.name)]
            after = next((present[name] for name in reversed(earlier) if name in present), -1)
            nb.cells.insert(
                after + 1,
                self.missing_cell_transform(
                    by_name[grade_cell.name],
                    grade_cell.max_score,
                    is_solution=grade_cell.name in solutions,
                ),
            )
        return nb, resources


def sanitize_preprocessors() -> list[type]:
    """nbgrader's own list of autograde's sanitizing steps, with RestoreDeletedCells in place of
    OverwriteCells."""
    default = Autograde.class_traits()["sanitize_preprocessors"].default()
    return [RestoreDeletedCells if step is OverwriteCells else step for step in default]

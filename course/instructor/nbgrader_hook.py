"""nbgrader's autograde with the verifier in place of its Execute step (set in nbgrader_config.py).

`python -m course grade` verifies every submission first, each in its own sandboxed process and
several at a time, and leaves the verdicts in COURSE_VERIFIED_DIR; nbgrader then puts their outputs
into the test cells, scores them as it always does, and keeps the gradebook, the feedback and the
export. Run by nbgrader alone (`nbgrader autograde`, the Formgrader), the step verifies the notebook
itself. Either way no student code runs in nbgrader's process or in a kernel.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import nbformat
from nbgrader.converters import Autograde
from nbgrader.coursedir import CourseDirectory
from nbgrader.preprocessors import Execute, NbGraderPreprocessor
from traitlets import Float

from course.instructor import nbgrader_cells, verify, verify_functions, verify_plan
from course.instructor.verify_protocol import Plan, Reply, Verdict, VerificationError

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
            submitted = Path(course.format_path(course.submitted_directory, ".", ".")).resolve()
            verdict = verify.verify(
                folder,
                [plan],
                hidden=verify.private_paths(root, submitted),
                grading_config=root / "grading.toml",
                timeout=self.timeout,
            )[0]
        for cell in nb.cells:
            if cell.cell_type == "code":
                outputs = verdict.outputs.get(nbgrader_cells.grade_id(cell) or "", [])
                cell.outputs = [nbformat.from_dict(output) for output in outputs]
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
    """nbgrader's own list of autograde steps, with VerifiedExecute in place of Execute."""
    default = Autograde.class_traits()["autograde_preprocessors"].default()
    return [VerifiedExecute if step is Execute else step for step in default]

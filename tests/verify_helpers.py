"""A submission of one solution cell, verified by the real verifier (course.instructor.verify), as
the verifier's own tests need it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import nbformat

from course.instructor import verify
from course.instructor.verify_protocol import Plan, TestCell, Verdict

# A test cell's way to a student's function, as the checks have it: through an observer, in the
# test's child process.
OBSERVING = "from course.notebook.checks.observe import observe, returned"


def verified(
    tmp_path: Path, student: str, tests: list[TestCell], setup: str = OBSERVING, **options: Any
) -> Verdict:
    """The verdict on a notebook whose one solution cell is `student`, tested by `tests`
    (`options`: verify.verify's)."""
    cell = nbformat.v4.new_code_cell(student)
    cell.metadata["nbgrader"] = {"solution": True, "grade": False, "grade_id": "code"}
    folder = tmp_path / "student"
    folder.mkdir(exist_ok=True)  # it may hold files of the test's already
    nbformat.write(nbformat.v4.new_notebook(cells=[cell]), folder / "submitted.ipynb")
    config = tmp_path / "grading.toml"
    config.write_text("")
    [verdict] = verify.verify(
        folder,
        [Plan("submitted.ipynb", setup, ["code"], tests)],
        grading_config=config,
        timeout=60,
        **options,
    )
    return verdict

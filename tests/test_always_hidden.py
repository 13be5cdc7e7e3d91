"""`### BEGIN ALWAYS HIDDEN TESTS`: out of the release and the feedback, in the gradebook.

The real release (notebooks/ against solutions/) is checked by tests/test_release.py and
tests/test_bundle.py, the real feedback by tests/test_grading.py; here the steps themselves."""

from __future__ import annotations

import nbformat
import pytest
from nbgrader.preprocessors import ClearHiddenTests, ComputeChecksums, SaveCells
from traitlets.config.loader import PyFileConfigLoader

from course.instructor.always_hidden import (
    ClearAlwaysHiddenTests,
    assignment_preprocessors,
    feedback_preprocessors,
)
from course.instructor.submission_html import SanitizeSubmission
from tests.helpers import ROOT
from tests.solutions import SOLUTIONS

TEST_CELL = (
    "check(f)\n### BEGIN HIDDEN TESTS\ncheck(f, n=3)\n### END HIDDEN TESTS\n"
    "### BEGIN ALWAYS HIDDEN TESTS\ncheck(f, n=5)\n### END ALWAYS HIDDEN TESTS\ncheck(g)"
)


def grade_cell(source: str) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_code_cell(source)
    cell.metadata["nbgrader"] = {
        "grade": True,
        "solution": False,
        "locked": True,
        "grade_id": "check_f",
        "points": 1,
        "schema_version": 3,
    }
    return cell


def cleared(source: str) -> str:
    notebook = nbformat.v4.new_notebook(cells=[grade_cell(source)])
    notebook, _ = ClearAlwaysHiddenTests().preprocess(notebook, {})
    return notebook.cells[0].source


def test_only_the_always_hidden_region_goes():
    assert cleared(TEST_CELL) == (
        "check(f)\n### BEGIN HIDDEN TESTS\ncheck(f, n=3)\n### END HIDDEN TESTS\ncheck(g)"
    )


def test_an_unclosed_region_is_refused_not_released():
    with pytest.raises(RuntimeError, match="No end hidden tests statement"):
        cleared("check(f)\n### BEGIN ALWAYS HIDDEN TESTS\ncheck(f, n=5)\n")


def test_the_gradebook_keeps_the_region_and_the_release_checksums_come_after():
    steps = assignment_preprocessors()
    where = steps.index(ClearAlwaysHiddenTests)
    assert steps.index(SaveCells) < steps.index(ClearHiddenTests) < where
    assert ComputeChecksums in steps[where:]
    assert feedback_preprocessors()[-1] is ClearAlwaysHiddenTests


def test_the_courses_configuration_uses_both():
    config = PyFileConfigLoader("nbgrader_config.py", path=str(ROOT)).load_config()
    assert config.GenerateAssignment.preprocessors == assignment_preprocessors()
    assert config.GenerateFeedback.preprocessors[:-1] == feedback_preprocessors()
    assert config.GenerateFeedback.preprocessors[-1] is SanitizeSubmission  # test_submission_html


def test_the_course_has_an_always_hidden_test_and_its_release_does_not():
    [source] = [
        cell.source
        for path in sorted(SOLUTIONS.glob("*.ipynb"))
        for cell in nbformat.read(path, as_version=4).cells
        if "BEGIN ALWAYS HIDDEN TESTS" in cell.source
    ]
    secret = source.split("### BEGIN ALWAYS HIDDEN TESTS\n")[1].split("###")[0].strip()
    released = "".join(
        path.read_text() for path in (ROOT / "notebooks" / "distributed_training").glob("*.ipynb")
    )
    assert secret.splitlines()[-1] not in released and "ALWAYS HIDDEN" not in released

"""The verifier's plan of a notebook, read from the instructor's source notebook (not a student's).

A plan holds the setup cell, the solution cells' grade_ids and every test cell with its visible
part (what the student's notebook shows) and its hidden part (what nbgrader adds when it grades).
The cells' marks are read with nbgrader's own helpers, the hidden tests by its own delimiters.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbgrader.preprocessors import ClearHiddenTests
from nbgrader.utils import is_grade, is_solution

from course.instructor.nbgrader_cells import ALWAYS_HIDDEN_MARKERS
from course.instructor.verify_protocol import Plan, TestCell

# nbgrader's delimiters of hidden tests (its ClearHiddenTests removes them from the release)
_TRAITS = ClearHiddenTests.class_traits()
HIDDEN_MARKERS = (
    _TRAITS["begin_test_delimeter"].default_value,
    _TRAITS["end_test_delimeter"].default_value,
)


def _split(source: str) -> tuple[str, str]:
    """(visible part, hidden part) of a test cell's source; the delimiter lines are in neither."""
    visible: list[str] = []
    hidden: list[str] = []
    inside = False
    for line in source.splitlines():
        if any(marker in line for marker in (*HIDDEN_MARKERS, *ALWAYS_HIDDEN_MARKERS)):
            inside = HIDDEN_MARKERS[0] in line or ALWAYS_HIDDEN_MARKERS[0] in line
            continue
        (hidden if inside else visible).append(line)
    return "\n".join(visible), "\n".join(hidden)


def plans(source: Path) -> list[Plan]:
    """The plans of every notebook of the source (instructor's) assignment folder."""
    found = []
    for path in sorted(Path(source).glob("*.ipynb")):
        code = [
            cell for cell in nbformat.read(path, as_version=4).cells if cell.cell_type == "code"
        ]
        found.append(
            Plan(
                path.name,
                next(cell.source for cell in code if cell.get("id") == "setup"),
                [cell.metadata["nbgrader"]["grade_id"] for cell in code if is_solution(cell)],
                [
                    TestCell(meta["grade_id"], *_split(cell.source), meta["points"])
                    for cell in code
                    if is_grade(cell)
                    for meta in [cell.metadata["nbgrader"]]
                ],
            )
        )
    return found

"""What nbgrader's marks on a notebook cell say, where nbgrader.utils has no helper for it.

nbgrader's own helpers (`is_grade`, `is_solution`, ...) and its preprocessors' delimiters cover the
rest; this module imports no nbgrader, so the sandboxed verifier can use it without loading it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# Hidden tests that newer nbgraders leave out of the feedback as well: the kit's tests may use them,
# nbgrader 0.9 has no delimiter for them (its ClearHiddenTests has the plain hidden-test ones).
ALWAYS_HIDDEN_MARKERS = ("BEGIN ALWAYS HIDDEN TESTS", "END ALWAYS HIDDEN TESTS")


def grade_id(cell: Mapping[str, Any]) -> str | None:
    """The cell's nbgrader grade_id (a plain JSON cell or nbformat's); None for an unmarked cell."""
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")

"""Tests hidden for good: `### BEGIN ALWAYS HIDDEN TESTS` regions, left out of the release and of
the feedback (both set in nbgrader_config.py).

nbgrader 0.9.6 knows only `BEGIN HIDDEN TESTS`: it clears those from the release but shows them in
the feedback, so every hidden input is public once a term is graded. An always-hidden region is
cleared from the release as a hidden one is, kept in the gradebook (SaveCells runs before it, so
autograde puts it back and the verifier runs it, course.instructor.verify_plan), and cleared again
from the feedback: its inputs can serve the next term unchanged.
"""

from __future__ import annotations

from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor
from nbgrader.converters import GenerateAssignment, GenerateFeedback
from nbgrader.preprocessors import ClearHiddenTests, ComputeChecksums, GetGrades
from traitlets import Unicode

from course.instructor.nbgrader_cells import ALWAYS_HIDDEN_MARKERS


class ClearAlwaysHiddenTests(ClearHiddenTests):
    """nbgrader's ClearHiddenTests, for the always-hidden delimiters."""

    begin_test_delimeter = Unicode(ALWAYS_HIDDEN_MARKERS[0]).tag(config=True)
    end_test_delimeter = Unicode(ALWAYS_HIDDEN_MARKERS[1]).tag(config=True)


def assignment_preprocessors() -> list[type]:
    """GenerateAssignment's own steps, the always-hidden regions cleared right after the hidden
    ones: after SaveCells (the gradebook keeps them) and before the checksums of the release."""
    steps = list(GenerateAssignment.class_traits()["preprocessors"].default())
    steps.insert(steps.index(ClearHiddenTests) + 1, ClearAlwaysHiddenTests)
    assert ComputeChecksums in steps[steps.index(ClearAlwaysHiddenTests) :], "nbgrader changed"
    return steps


def feedback_preprocessors() -> list[type]:
    """GenerateFeedback's own steps, then the always-hidden regions cleared from what it shows."""
    steps = list(GenerateFeedback.class_traits()["preprocessors"].default())
    assert steps == [GetGrades, CSSHTMLHeaderPreprocessor], "nbgrader's feedback steps changed"
    return [*steps, ClearAlwaysHiddenTests]

"""Errors that a student or instructor can fix. Each carries the fix in `hint`.

The command line prints them as two short lines instead of a traceback, and the
notebook helpers raise them from frames that IPython hides (``__tracebackhide__``).
"""

from __future__ import annotations

from course.contracts.message import joined


class CourseError(Exception):
    """Something went wrong that the user can fix; `hint` says how."""

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        # joined, each part's catalog id kept (course.contracts.message): the grader renders it in
        # English
        return joined("\n  -> ", (self.message, self.hint)) if self.hint else self.message


class DatasetError(CourseError):
    """A data set is missing, truncated or corrupt."""


class ResultsError(CourseError):
    """A results file is missing, corrupt or does not match its job log."""


class JobError(CourseError):
    """A job could not be submitted, or it failed."""


class SiteError(CourseError):
    """A site profile is invalid, or a job asks for what the site cannot give."""


class GradingError(CourseError):
    """Grading itself failed (not a student's mistake)."""

"""What a grading run found per student: scores from nbgrader's gradebook, the messages of the
failed tests from the autograded notebooks, the verifier's flags; written out as grades-details.csv
and the summary `python -m course grade` prints.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
from nbgrader.utils import is_grade

from course import i18n, paths
from course.fileio import atomic_file
from course.instructor.verify_protocol import SAID_KEY

ASSIGNMENT = paths.ASSIGNMENT


@dataclass
class Part:
    notebook: str
    test: str
    score: float
    max_score: float
    message: str = ""  # in the student's language, as their feedback shows it
    by_hand: bool = False  # a written answer: the instructor grades it in the Formgrader
    flags: list[str] = field(
        default_factory=list
    )  # what the instructor should look at (not a score)
    english: str = ""  # the message in English (course.contracts.message), for the instructor


BY_HAND = "a written answer: grade it by hand in the Formgrader"
UNANSWERED = "a written answer left as it was released (nbgrader scores it 0)"
NOT_HANDED_IN = "{notebook} was not handed in"  # every test of a notebook missing from a submission


@dataclass
class Outcome:
    student: str
    graded: bool
    seconds: float  # autograde time per submission (all notebooks)
    score: float = 0.0
    max_score: float = 0.0
    parts: list[Part] = field(default_factory=list)
    failure: str = ""
    missing: list[str] = field(
        default_factory=list
    )  # notebooks not handed in, e.g. 07_run_part.ipynb
    flags: dict[tuple[str, str], list[str]] = field(
        default_factory=dict
    )  # (notebook, test or "") -> notes
    assignment: str = ASSIGNMENT  # the edition handed in (course.instructor.editions)


def _first_lines(text: str) -> str:
    return "\n".join(line.strip() for line in text.splitlines()[:2])


def _messages(notebook: Path) -> dict[str, tuple[str, str]]:
    """grade_id -> the first lines of the error a graded test cell shows in an autograded notebook,
    as the student read them and in English: rendered from the record of how its message was made
    (course.contracts.message, left in the cell by nbgrader_hook), else as the student read them
    (their own
    exception's words)."""
    try:
        cells = json.loads(notebook.read_text())["cells"]
    except (OSError, ValueError, KeyError):
        return {}
    found = {}
    for cell in map(nbformat.from_dict, cells):
        if not is_grade(cell) or cell.get("cell_type") != "code":
            continue
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                said = output.get("evalue") or ""
                english = said
                if SAID_KEY in cell.metadata:
                    try:
                        english = i18n.render(cell.metadata[SAID_KEY], "en")
                    except (ValueError, TypeError, AttributeError):  # a record made wrongly
                        english = said
                found[cell.metadata.nbgrader.grade_id] = (
                    f"{output.get('ename')}: {_first_lines(said)}",
                    f"{output.get('ename')}: {_first_lines(english)}",
                )
                break
    return found


def _one_line(message: str) -> str:
    """A message's lines as one CSV cell reads them."""
    return "; ".join(message.splitlines())


def course_id(root: Path) -> str:
    """The course id that nbgrader_config.py sets (the gradebook is keyed by it)."""
    from traitlets.config.loader import PyFileConfigLoader

    config = PyFileConfigLoader("nbgrader_config.py", path=str(root)).load_config()
    return config.CourseDirectory.course_id or "default_course"


def read_gradebook(root: Path, submitted: Path, db_url: str, outcome: Outcome) -> None:
    from nbgrader.api import Gradebook, MissingEntry

    with Gradebook(db_url, course_id(root)) as gradebook:
        try:
            submission = gradebook.find_submission(outcome.assignment, outcome.student)
        except MissingEntry:
            outcome.graded, outcome.failure = (
                False,
                "nbgrader recorded no grades for it (see its log above)",
            )
            return
        outcome.score, outcome.max_score = submission.score, submission.max_score
        for notebook in submission.notebooks:
            file = f"{notebook.name}.ipynb"
            handed_in = Path(outcome.student, outcome.assignment, file)
            if (submitted / handed_in).exists():
                messages = _messages(root / "autograded" / handed_in)
            else:  # nbgrader scores it 0 and says nothing else
                outcome.missing.append(file)
                messages = {
                    grade.name: (NOT_HANDED_IN.format(notebook=file),) * 2
                    for grade in notebook.grades
                }
            for grade in sorted(notebook.grades, key=lambda g: g.name):
                if grade.max_score:
                    score = grade.score or 0.0
                    by_hand = grade.cell_type == "markdown"
                    if file in outcome.missing:  # written answers too: nothing to grade by hand
                        message, english = messages[grade.name]
                    elif by_hand:
                        message = english = (
                            BY_HAND
                            if grade.needs_manual_grade
                            else UNANSWERED
                            if score < grade.max_score
                            else ""
                        )
                    elif score < grade.max_score:
                        message, english = messages.get(grade.name, ("", ""))
                    else:
                        message = english = ""
                    outcome.parts.append(
                        Part(
                            notebook.name,
                            grade.name,
                            score,
                            grade.max_score,
                            _one_line(message),
                            by_hand,
                            outcome.flags.get((notebook.name, grade.name), []),
                            _one_line(english),
                        )
                    )


def write_details(outcomes: list[Outcome], path: Path) -> None:
    with atomic_file(path, "w") as f:
        writer = csv.writer(f)
        writer.writerow(
            ["student", "notebook", "test", "score", "max_score", "message", "flags", "message_en"]
        )
        for outcome in outcomes:
            if not outcome.graded:
                english = i18n.english(outcome.failure)
                writer.writerow(
                    [outcome.student, "", "", "", "", f"NOT GRADED: {outcome.failure}", ""]
                    + [f"NOT GRADED: {english}"]
                )
            for (notebook, test), notes in sorted(outcome.flags.items()):
                if not test:  # about the notebook as a whole
                    writer.writerow(
                        [outcome.student, notebook, "", "", "", "", " | ".join(notes), ""]
                    )
            for part in outcome.parts:
                writer.writerow(
                    [
                        outcome.student,
                        part.notebook,
                        part.test,
                        part.score,
                        part.max_score,
                        part.message,
                        " | ".join(part.flags),
                        part.english,
                    ]
                )


def summary(outcomes: list[Outcome]) -> str:
    lines = []
    for outcome in outcomes:
        if not outcome.graded:
            lines.append(f"{outcome.student}: NOT GRADED ({outcome.failure})")
            continue
        by_notebook: dict[str, list[Part]] = {}
        for part in outcome.parts:
            by_notebook.setdefault(part.notebook, []).append(part)
        per_notebook = ", ".join(
            f"{name} {sum(p.score for p in parts):g}/{sum(p.max_score for p in parts):g}"
            for name, parts in sorted(by_notebook.items())
        )
        lines.append(f"{outcome.student}: {outcome.score:g}/{outcome.max_score:g} ({per_notebook})")
        lines += [f"    {name}: not handed in" for name in outcome.missing]
        lines += [
            f"    FLAG {' '.join(filter(None, (notebook, test))) or 'submission'}: {note}"
            for (notebook, test), notes in sorted(outcome.flags.items())
            for note in notes
        ]
        for part in outcome.parts:
            if (
                part.score < part.max_score
                and not part.by_hand
                and f"{part.notebook}.ipynb" not in outcome.missing
            ):
                lines.append(
                    f"    {part.notebook} {part.test}: {part.score:g}/{part.max_score:g}  "
                    f"{part.message}"
                )
    return "\n".join(lines)

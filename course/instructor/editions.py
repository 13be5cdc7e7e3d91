"""The editions of the assignment a class hands in: the English one and each translation, each its
own nbgrader assignment (course.instructor.i18n_release). Which edition each student handed in, and
the source each edition needs in the course folder to be graded.

Each edition's source is built, of the chosen lessons' notebooks (course.instructor.lesson_source),
when it is graded; a translated one from the English solutions/ and the catalogs: its cells are
the English ones, so it grades the same, and its text is the student's language, so the feedback
is too.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

from course import i18n
from course.contracts import lessons
from course.instructor import i18n_release, lesson_source

# {nbgrader assignment: its language}, the English edition first
ASSIGNMENTS = {i18n_release.assignment(lang): lang for lang in i18n.LANGUAGES}


def language(assignment: str) -> str:
    """The language of the edition `assignment`."""
    return ASSIGNMENTS[assignment]


def _handed_in_at(folder: Path) -> str:
    """When nbgrader's collect says the submission was made (its timestamp.txt, which sorts as
    text), or "" where it says nothing."""
    stamp = folder / "timestamp.txt"
    return stamp.read_text().strip() if stamp.is_file() else ""


def handed_in(
    submitted: Path, skip: Collection[str] = ()
) -> tuple[dict[str, str], dict[str, list[str]]]:
    """({student: the edition graded}, {student: the other editions they handed in, not graded}),
    leaving out the students `skip` names (whose files must not be opened). A student who handed in
    more than one edition is graded on the latest (nbgrader's timestamp)."""
    found: dict[str, list[tuple[str, str]]] = {}
    for assignment in ASSIGNMENTS:
        for folder in sorted(submitted.glob(f"*/{assignment}")):
            if folder.is_dir() and folder.parent.name not in skip:
                found.setdefault(folder.parent.name, []).append((_handed_in_at(folder), assignment))
    chosen = {student: max(editions)[1] for student, editions in sorted(found.items())}
    others = {
        student: [a for _, a in editions if a != chosen[student]]
        for student, editions in found.items()
        if len(editions) > 1
    }
    return chosen, others


def prepare_source(root: Path, assignment: str, out: Path) -> Path:
    """The source of the edition `assignment` of the lessons the course folder `root` chose
    (its course.toml), built afresh into `out`; its folder."""
    return lesson_source.build(root, language(assignment), out, lessons.load(root))

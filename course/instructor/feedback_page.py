"""The feedback page of a translated edition: nbgrader's own page, its labels in the edition's
language.

nbgrader 0.9.6 has no translations: its feedback template (formgrader/templates/feedback) writes
"Score:", "Student's answer", "Comments:" and its table of contents in English. A translated
edition's `generate_feedback` gets, as options of that run only, the kit's template
(feedback_template/translated_feedback), which extends nbgrader's and restates just the blocks that
carry those labels, and the Jinja filter `course_label`, which gives it each label below in
COURSE_LANG (set for that run). The English edition's run takes neither: nbgrader's page as it is.
"""

from __future__ import annotations

from pathlib import Path

from course import i18n
from course.i18n import N_

TEMPLATES = Path(__file__).resolve().parent / "feedback_template"
TEMPLATE_NAME = "translated_feedback"  # its conf.json names nbgrader's `feedback` as its base
# Not index.html.j2: the template extends nbgrader's, which has that name.
TEMPLATE_FILE = "translated.html.j2"
FILTER = "course_label"

# The page's labels, by the names the template gives them: nbgrader's English, word for word.
LABELS = {
    # TRANSLATORS: feedback page, after the notebook's name and in the table of contents
    "points_in_brackets": N_("(Score: {score} / {points})"),
    # TRANSLATORS: feedback page, on the heading of a graded cell
    "points": N_("Score: {score} / {points}"),
    # TRANSLATORS: feedback page, the link back to the table of contents
    "top": N_("(Top)"),
    # TRANSLATORS: feedback page, the kinds of graded cell in the table of contents
    "test_cell": N_("Test cell"),
    "code_answer": N_("Coding free-response"),
    "written_answer": N_("Written response"),
    "task": N_("Task"),
    "comment": N_("Comment"),
    "late_penalty": N_("Late submission penalty (Score: -{penalty})"),
    # TRANSLATORS: feedback page, the heading of a cell the student filled in (read by the student)
    "answer": N_("Student's answer"),
    "student_task": N_("Student's task"),
    # TRANSLATORS: feedback page, the heading of a test cell; {name} is its id, as code
    "grade_cell": N_("Grade cell: {name}"),
    # TRANSLATORS: feedback page, before the grader's comment on a cell
    "comments": N_("Comments:"),
}


def label(key: str, /, **fields: object) -> str:
    """The template's filter: the label `key` in COURSE_LANG, its fields filled in (positional
    only, so that a field may be called `name`)."""
    return i18n.in_language(i18n.language(), LABELS[key]).format(**fields)


def _nbgrader_templates() -> Path:
    """nbgrader's template folder, which its generate_feedback adds itself only when it is not
    given one (nbgrader/converters/generate_feedback.py)."""
    import nbgrader

    return Path(nbgrader.__file__).parent / "server_extensions" / "formgrader" / "templates"


def options(lang: str) -> list[str]:
    """The options of a `generate_feedback` run of the edition in `lang`: none for English."""
    if lang == i18n.DEFAULT:
        return []
    return [
        f"--HTMLExporter.extra_template_basedirs={TEMPLATES}",
        f"--HTMLExporter.extra_template_basedirs={_nbgrader_templates()}",
        f"--HTMLExporter.template_name={TEMPLATE_NAME}",
        f"--HTMLExporter.template_file={TEMPLATE_FILE}",
        f"--HTMLExporter.filters={FILTER}={__name__}.label",
    ]


def environment(lang: str) -> dict[str, str]:
    """What a `generate_feedback` run of the edition in `lang` adds to its environment: the
    language the filter speaks (none for English, whose run is nbgrader's own)."""
    return {} if lang == i18n.DEFAULT else {i18n.VARIABLE: lang}

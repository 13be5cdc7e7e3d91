"""The feedback page of the Japanese edition (course/instructor/feedback_page.py): nbgrader's page,
its labels in Japanese; the English edition's page is nbgrader's own.

A tiny notebook of each edition, graded and commented through nbgrader's gradebook API (as
autograde and a grader leave it: the real autograde needs the verifier, which tests/test_grading.py
runs), then its page made by nbgrader's generate_feedback as `course grade` runs it
(course.instructor.autograde.feedback).
"""

from __future__ import annotations

import html
import re
import shutil
from pathlib import Path

import nbformat
import pytest

from course import i18n, paths
from course.instructor import autograde, editions, feedback_page, grade_report
from tests.helpers import ROOT

# nbgrader's add_submission trips SQLAlchemy's autoflush warnings; they are nbgrader's.
pytestmark = pytest.mark.filterwarnings("ignore::sqlalchemy.exc.SAWarning")
EN, JA = paths.ASSIGNMENT, "distributed_training_ja"
NOTEBOOK, STUDENT = "tiny", "hanako"
COMMENT = "Explain the speedup with the number of ranks."
# The labels of nbgrader's feedback template (nbgrader 0.9.6) on the tiny notebook's page, as a
# browser shows them: the score, the contents (each kind of graded cell, a comment, the late
# penalty), each cell's heading, score and link back, the grader's comment.
ENGLISH = [
    "tiny (Score: 3.5 / 6.0)",
    "Test cell (Score: 2.0 / 2.0)",
    "Coding free-response (Score: 0.0 / 1.0)",
    "Written response (Score: 1.0 / 2.0)",
    "Comment",
    "Task (Score: 1.0 / 1.0)",
    "Late submission penalty (Score: -0.5)",
    "Student's answer (Top)",
    "Grade cell: check_ranks Score: 2.0 / 2.0 (Top)",
    "Student's answer Score: 0.0 / 1.0 (Top)",
    f"Comments: {COMMENT}",
    "Student's task Score: 1.0 / 1.0 (Top)",
]
JAPANESE = [
    "tiny (点数: 3.5 / 6.0)",
    "テストセル (点数: 2.0 / 2.0)",
    "コードによる自由記述 (点数: 0.0 / 1.0)",
    "文章による解答 (点数: 1.0 / 2.0)",
    "コメント",
    "タスク (点数: 1.0 / 1.0)",
    "提出遅れによる減点 (点数: -0.5)",
    "解答 (先頭へ)",
    "採点セル: check_ranks 点数: 2.0 / 2.0 (先頭へ)",
    "解答 点数: 0.0 / 1.0 (先頭へ)",
    f"コメント: {COMMENT}",
    "タスク 点数: 1.0 / 1.0 (先頭へ)",
]
# Words of nbgrader's labels, none of which the tiny notebook's own text has.
ENGLISH_WORDS = re.compile(
    r"\b(Score|Top|Test cell|free-response|Written|Task|Comments?|Late|Student's|Grade cell)\b"
)


def _cell(kind: str, source: str, **grading: object) -> nbformat.NotebookNode:
    make = nbformat.v4.new_code_cell if kind == "code" else nbformat.v4.new_markdown_cell
    cell = make(source)
    if grading:
        cell.metadata["nbgrader"] = {
            "grade": False,
            "solution": False,
            "locked": False,
            "task": False,
            "schema_version": 3,
            **grading,
        }
    return cell


def tiny_notebook() -> nbformat.NotebookNode:
    """A notebook with one cell of every kind the feedback page labels."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        _cell("markdown", "# Stage 1"),
        _cell("code", "def ranks():\n    return 4", solution=True, grade_id="ranks"),
        _cell(
            "code", "assert ranks() == 4", grade=True, locked=True, grade_id="check_ranks", points=2
        ),
        _cell(
            "code",
            "def speedup():\n    return 3.5",
            solution=True,
            grade=True,
            grade_id="speedup",
            points=1,
        ),
        _cell("markdown", "Why?", solution=True, grade=True, grade_id="why", points=2),
        _cell("markdown", "Plot the speedup.", task=True, grade_id="plot", points=1),
    ]
    return nb


def graded(root: Path, assignment: str) -> None:
    """`assignment` in the gradebook and its submission as autograde and a grader leave it: 4 of 6
    points, less half a point for lateness, a comment on the written answer."""
    from nbgrader.api import Gradebook

    db_url = f"sqlite:///{root / 'gradebook.db'}"
    with Gradebook(db_url, grade_report.course_id(root)) as gradebook:
        gradebook.add_assignment(assignment)
        gradebook.add_notebook(NOTEBOOK, assignment)
        for cell in tiny_notebook().cells:
            grading = cell.metadata.get("nbgrader", {})
            name, kind = grading.get("grade_id"), cell.cell_type
            if grading.get("solution"):
                gradebook.add_solution_cell(name, NOTEBOOK, assignment)
            if grading.get("grade"):
                gradebook.add_grade_cell(
                    name, NOTEBOOK, assignment, max_score=grading["points"], cell_type=kind
                )
            if grading.get("task"):
                gradebook.add_task_cell(
                    name, NOTEBOOK, assignment, max_score=grading["points"], cell_type=kind
                )
        gradebook.update_or_create_student(STUDENT)
        gradebook.add_submission(assignment, STUDENT)
        for name, score in {"check_ranks": 2, "speedup": 0, "why": 1, "plot": 1}.items():
            gradebook.find_grade(name, NOTEBOOK, assignment, STUDENT).auto_score = score
        gradebook.find_comment("why", NOTEBOOK, assignment, STUDENT).manual_comment = COMMENT
        notebook = gradebook.find_submission_notebook(NOTEBOOK, assignment, STUDENT)
        notebook.late_submission_penalty = 0.5
        gradebook.db.commit()
    for folder in ("submitted", "autograded"):
        (root / folder / STUDENT / assignment).mkdir(parents=True)
        nbformat.write(tiny_notebook(), root / folder / STUDENT / assignment / f"{NOTEBOOK}.ipynb")
    autograde.feedback(root, root / "submitted", db_url, assignment)


@pytest.fixture(scope="module")
def pages(tmp_path_factory) -> dict[str, str]:
    """{edition: the text of its feedback page}."""
    root = tmp_path_factory.mktemp("feedback")
    for name in ("nbgrader_config.py", "grading.toml"):
        shutil.copy(ROOT / name, root / name)
    found = {}
    with pytest.MonkeyPatch.context() as env:
        env.setenv("PATH", paths.tool_environment()["PATH"])  # a new gradebook runs `alembic`
        env.delenv(i18n.VARIABLE, raising=False)  # each run in its edition's language, not ours
        for assignment in (EN, JA):
            graded(root, assignment)
            page = root / "feedback" / STUDENT / assignment / f"{NOTEBOOK}.html"
            found[assignment] = page.read_text()
    return found


def shown(page: str) -> str:
    """The page's text as a browser shows it: tags, styles and scripts off, entities read, each
    run of white space one space."""
    text = re.sub(r"<(style|script)\b.*?</\1>", " ", page, flags=re.S)
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", text)).split())


def test_the_english_edition_s_run_is_nbgraders_own():
    assert editions.language(EN) == i18n.DEFAULT and editions.language(JA) == "ja"
    assert feedback_page.options(i18n.DEFAULT) == [] and feedback_page.environment("en") == {}


def test_every_label_the_template_names_is_marked_and_translated():
    template = feedback_page.TEMPLATES / feedback_page.TEMPLATE_NAME / feedback_page.TEMPLATE_FILE
    named = set(re.findall(r"'(\w+)'", template.read_text()))  # a label's name, or a cell type's
    assert set(feedback_page.LABELS) <= named
    japanese = {m: i18n.in_language("ja", m) for m in feedback_page.LABELS.values()}
    assert [message for message, ja in japanese.items() if ja == message] == []


@pytest.mark.integration
def test_the_english_edition_s_page_keeps_nbgraders_labels(pages):
    text = shown(pages[EN])
    assert [label for label in ENGLISH if label not in text] == [], text[-1500:]
    assert not re.search(r"[\u3040-\u30ff]", text)


@pytest.mark.integration
def test_the_japanese_edition_s_page_has_its_labels_in_japanese(pages):
    page, text = pages[JA], shown(pages[JA])
    assert [label for label in JAPANESE if label not in text] == [], text[-1500:]
    assert ENGLISH_WORDS.findall(text) == []
    # nbgrader's page otherwise: its cells, the contents' links to them, its styles
    assert all(cell in text for cell in ("Stage 1", "Why?", "Plot the speedup."))
    assert '<span class="nf">speedup</span>' in page
    for anchor in ("check_ranks", "speedup", "why", "comment-why"):
        assert f'href="#{anchor}"' in page and f'<a name="{anchor}">' in page
    panel = 'class="panel panel-primary nbgrader_cell"'
    assert page.count(panel) == pages[EN].count(panel) == 5
    assert "Bootstrap v3" in page and "div.nbgrader_cell .panel-heading" in page

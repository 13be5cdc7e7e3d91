"""What a student wrote or printed is cleaned of script before nbgrader stores the graded notebook
(course.instructor.submission_html). The pages themselves, in Chromium: tests/test_browser.py."""

from __future__ import annotations

import nbformat
from nbconvert.filters.markdown import markdown2html_mistune

from course.instructor import nbgrader_hook
from course.instructor.submission_html import SanitizeSubmission, clean_markdown, clean_output

PLANTED = (
    "<script>document.title = 'planted'</script>\n\n"
    "<img src=x onerror=\"document.title = 'planted'\">\n\n"
    "[the data](javascript:document.title='planted')\n"
)
ANSWER = "The speedup was **1.8×** on 2 ranks: `a < b` held, and $T = \\alpha + n\\beta$.\n\n"


def test_an_ordinary_answer_keeps_its_markdown_as_written():
    for answer in (
        ANSWER,
        "> what I predicted\n\n| ranks | s |\n|---|---|\n| 2 | 1.0 |\n",
        "[Goyal et al.](https://arxiv.org/abs/1706.02677) and ![plot](runs/plot.png)\n",
        "```python\nif a < b:\n\n    pass\n```\n",
    ):
        assert clean_markdown(answer) == answer


def test_a_planted_script_handler_or_link_is_removed_and_the_answer_still_shows():
    cleaned = clean_markdown(ANSWER + PLANTED + "\n```\nline 1\n\nline 3\n```\n")
    shown = markdown2html_mistune(cleaned)  # as nbconvert renders it in both pages
    for word in ("<script", "onerror", "javascript:", "planted"):
        assert word not in shown.lower(), shown
    assert "<strong>1.8×</strong>" in shown and "<code>a &lt; b</code>" in shown, shown
    assert "$T = \\alpha + n\\beta$" in shown  # MathJax's text, untouched
    # The code block keeps its blank line, and nothing after it is read as markdown again.
    assert "line 1&#10;\nline 3" in shown and shown.rstrip().endswith("</div>"), shown


def test_outputs_keep_text_and_images_and_lose_script():
    output = clean_output(
        {
            "output_type": "display_data",
            "metadata": {},
            "data": {
                "text/plain": "<Figure>",
                "image/png": "iVBORw0KGgo=",
                "text/html": "<table><tr><td>1.8</td></tr></table><script>alert(1)</script>",
                "text/markdown": PLANTED,
                "application/javascript": "alert(1)",
                "image/svg+xml": "<svg onload='alert(1)'/>",
            },
        }
    )
    data = output["data"]
    assert set(data) == {"text/plain", "image/png", "text/html", "text/markdown"}
    assert data["text/plain"] == "<Figure>"  # shown as text: escaped by nbconvert
    assert data["text/html"] == "<table><tbody><tr><td>1.8</td></tr></tbody></table>"
    assert "planted" not in data["text/markdown"]
    stream = {"output_type": "stream", "name": "stdout", "text": "<script>x</script>"}
    assert clean_output(dict(stream)) == stream  # nbconvert's templates escape a stream


def test_autograde_cleans_the_graded_notebook_last_and_the_feedback_again():
    assert nbgrader_hook.autograde_preprocessors()[-1] is SanitizeSubmission
    notebook = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_markdown_cell(ANSWER + PLANTED),
            nbformat.v4.new_raw_cell("<img src=x onerror=alert(1)>"),
            nbformat.v4.new_markdown_cell("mine", metadata={"nbgrader": {"grade_id": "<b>x</b>"}}),
            nbformat.v4.new_code_cell("", metadata={"nbgrader": {"grade_id": "check_trainer"}}),
        ]
    )
    cleaned, _ = SanitizeSubmission().preprocess(notebook, {})
    assert "planted" not in cleaned.cells[0].source and "1.8×" in cleaned.cells[0].source
    assert cleaned.cells[1].source == '<img src="x">'
    ids = [cell.metadata["nbgrader"]["grade_id"] for cell in cleaned.cells[2:]]
    assert ids == ["&lt;b&gt;x&lt;/b&gt;", "check_trainer"]  # the instructor's ids untouched

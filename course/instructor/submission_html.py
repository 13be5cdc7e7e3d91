"""What a student wrote or printed, made safe to show as HTML, before nbgrader stores the graded
notebook.

nbgrader's formgrader and its feedback page are both rendered from the autograded notebook by
nbconvert, which passes a markdown cell's raw HTML, a `javascript:` link and a `text/html` output
through as they are: a `<script>` in a written answer would run with the instructor's session in
the formgrader. SanitizeSubmission, the last of autograde's steps (nbgrader_config.py), cleans that
notebook with nh3 (the Ammonia sanitiser) before nbgrader writes it, so every page made from it,
whoever renders it and however it is configured, shows the text without the script.

A markdown cell is rendered by nbconvert's own markdown renderer, which notes what only a sanitiser
may let through (raw HTML, a link or image whose scheme runs code, by mistune's own rule). A cell
without either is left as the student wrote it, so ordinary answers keep their markdown; one with
either is replaced by its rendering, cleaned, as one HTML block (which markdown shows as it is).
Outputs keep the kinds that are shown as text or as images, `text/html` and `text/markdown` cleaned;
the kinds that carry script (`application/javascript`, widgets, SVG) are dropped. Streams and errors
are escaped by nbconvert's templates already. A cell id (nbgrader's `grade_id`, which its pages
write into the HTML as it is) that is not plain words is escaped.
"""

from __future__ import annotations

import html
import re
from typing import Any

import mistune
import nh3
from nbconvert.filters.markdown_mistune import IPythonRenderer, MarkdownWithMath
from nbgrader.preprocessors import NbGraderPreprocessor

SHOWN_AS_IS = {"text/plain", "text/latex", "application/json", "image/png", "image/jpeg"}
# nh3's defaults, and the classes of highlighted code and of math (MathJax reads the text).
ATTRIBUTES = {
    **{tag: set(names) for tag, names in nh3.ALLOWED_ATTRIBUTES.items()},
    **{tag: {"class"} for tag in ("div", "span", "code", "pre")},
}
_GRADE_ID = re.compile(r"[\w.-]*")
_BLANK_LINE = re.compile(r"\n[ \t]*\n")
_URL_RULE = mistune.HTMLRenderer(escape=False)  # mistune's own list of schemes that run nothing


class _NotingRenderer(IPythonRenderer):
    """nbconvert's markdown renderer (as its HTMLExporter uses it), noting whether the source holds
    raw HTML or a link or image of a scheme that may run code."""

    unsafe = False

    def block_html(self, html: str) -> str:
        self.unsafe = True
        return super().block_html(html)

    def inline_html(self, html: str) -> str:
        self.unsafe = True
        return super().inline_html(html)

    def link(self, text: str, url: str, title: str | None = None) -> str:
        self._check(url)
        return super().link(text, url, title)

    def image(self, text: str, url: str, title: str | None = None) -> str:
        self._check(url)
        return super().image(text, url, title)

    def _check(self, url: str) -> None:
        if _URL_RULE.sanitize_url(url) != url:
            self.unsafe = True


def clean_html(html: str) -> str:
    """`html` with every script, handler, frame, form and unsafe URL removed."""
    return nh3.clean(html, attributes=ATTRIBUTES)


def clean_markdown(source: str) -> str:
    """`source` as written when it holds neither raw HTML nor a link of a scheme that runs code;
    else its rendering, cleaned, as one HTML block."""
    renderer = _NotingRenderer(escape=False)
    rendered = MarkdownWithMath(renderer=renderer).render(source)
    if not renderer.unsafe:
        return source
    cleaned = clean_html(rendered).strip()
    # A blank line would end the HTML block and have the rest read as markdown again: a line
    # feed written as a character reference shows the same, also inside <pre>.
    while _BLANK_LINE.search(cleaned):
        cleaned = _BLANK_LINE.sub(lambda blank: "&#10;" + blank.group(0)[1:], cleaned)
    return f"<div>\n{cleaned}\n</div>"


def clean_output(output: dict[str, Any]) -> dict[str, Any]:
    """A code cell's output with the kinds that may run script dropped and HTML cleaned."""
    data = output.get("data")
    if not isinstance(data, dict):
        return output  # streams and errors: text, which nbconvert's templates escape
    kept = {kind: value for kind, value in data.items() if kind in SHOWN_AS_IS}
    for kind, clean in (("text/html", clean_html), ("text/markdown", clean_markdown)):
        if isinstance(data.get(kind), str):
            kept[kind] = clean(data[kind])
    output["data"] = kept
    return output


class SanitizeSubmission(NbGraderPreprocessor):
    """Autograde's last step: the graded notebook's markdown, raw cells and outputs cleaned."""

    def preprocess_cell(
        self, cell: Any, resources: dict[str, Any], index: int
    ) -> tuple[Any, dict[str, Any]]:
        marks = cell.get("metadata", {}).get("nbgrader", {})
        grade_id = marks.get("grade_id") if isinstance(marks, dict) else None
        if isinstance(grade_id, str) and not _GRADE_ID.fullmatch(grade_id):
            # nbgrader's pages write a cell's id into their HTML as it is; the instructor's ids are
            # plain words, so this is a cell the student marked: its id shown as text
            marks["grade_id"] = html.escape(grade_id)
        if cell.cell_type == "markdown":
            cell.source = clean_markdown(cell.source)
        elif cell.cell_type == "raw":
            cell.source = clean_html(cell.source)
        elif cell.cell_type == "code":
            cell.outputs = [clean_output(output) for output in cell.get("outputs", [])]
        return cell, resources

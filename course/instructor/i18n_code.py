"""The prose inside a released code cell: its docstrings and its comments, the parts of a code
cell a student reads as text. Each is a piece: where it stands in the cell's source (so a
translation replaces exactly that text and nothing else) and its English.

What a student never sees is left out: nbgrader's solution and hidden-test regions (the release
removes them) and its `###` markers. The stub's comment (`# PUT YOUR CODE HERE`) is nbgrader's
code_stub, translated once for every cell (course.instructor.i18n_release).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_REGION = re.compile(r"^\s*### (BEGIN|END) (SOLUTION|HIDDEN TESTS)\s*$")
_DOCSTRING = re.compile(r'^(\s*)"""(.*?)"""', re.S | re.M)
_FULL_COMMENT = re.compile(r"^([ \t]*)# (.+)$")
# a comment after code that has no quote and no hash of its own (so the `#` opens the comment)
_TRAILING = re.compile(r"^([ \t]*[^#'\"\n]*[^\s#'\"])(\s+# )(.+)$")
STUB = "PUT YOUR CODE HERE"
TEXT_STUB = "YOUR ANSWER HERE"  # nbgrader_config.py's text_stub: a written answer's cell


@dataclass(frozen=True)
class Piece:
    """Prose in a code cell: source[start:end] is `text`; `prefix` opens each of its lines but the
    first when it is a comment block (a translation of several lines gets it back on each)."""

    start: int
    end: int
    text: str
    prefix: str = ""

    def replaced_by(self, translation: str) -> str:
        return ("\n" + self.prefix).join(translation.split("\n"))


def _visible_lines(source: str) -> list[tuple[int, str]]:
    """(offset, line) of each line a student sees: outside the solution and hidden-test regions."""
    found, offset, inside = [], 0, False
    for line in source.split("\n"):
        marker = _REGION.match(line)
        if marker:
            inside = marker.group(1) == "BEGIN"
        elif not inside:
            found.append((offset, line))
        offset += len(line) + 1
    return found


def pieces(source: str) -> list[Piece]:
    """The docstrings and comments of a code cell's source, in order."""
    visible = _visible_lines(source)
    shown = {offset for offset, _ in visible}
    found: list[Piece] = []
    covered: set[int] = set()
    for match in _DOCSTRING.finditer(source):
        line_start = source.rfind("\n", 0, match.start()) + 1
        if line_start in shown:
            indent = match.group(1)
            first, *rest = match.group(2).split("\n")
            if all(line.startswith(indent) or not line for line in rest):
                text = "\n".join([first, *(line[len(indent) :] for line in rest)])
                found.append(Piece(match.start(2), match.end(2), text, indent))
            else:
                found.append(Piece(match.start(2), match.end(2), match.group(2)))
            covered.update(range(match.start(), match.end()))
    block: list[tuple[int, str, str]] = []  # a run of full-line comments at one indentation

    def close_block() -> None:
        if block:
            start = block[0][0]
            end = block[-1][0] + len(block[-1][2])
            found.append(Piece(start, end, "\n".join(text for _, _, text in block), block[0][1]))
            block.clear()

    for offset, line in visible:
        if offset in covered:
            close_block()
            continue
        full = _FULL_COMMENT.match(line)
        if full and not full.group(2).startswith((STUB, "#")):
            prefix = full.group(1) + "# "
            if block and block[0][1] != prefix:
                close_block()
            block.append((offset + len(prefix), prefix, full.group(2)))
            continue
        close_block()
        trailing = _TRAILING.match(line)
        if trailing and not full:
            start = offset + len(trailing.group(1)) + len(trailing.group(2))
            found.append(Piece(start, start + len(trailing.group(3)), trailing.group(3)))
    close_block()
    return sorted(found, key=lambda piece: piece.start)


def translated(source: str, translations: list[str | None]) -> str:
    """`source` with each piece (in `pieces` order) replaced by its translation (None: kept)."""
    result = source
    for piece, translation in reversed(list(zip(pieces(source), translations, strict=True))):
        if translation is not None:
            result = result[: piece.start] + piece.replaced_by(translation) + result[piece.end :]
    return result

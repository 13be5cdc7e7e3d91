"""Solution code two submissions share beyond the instructor's solution, for the instructor to read.

Short exercises have few right answers, so two students writing the same calls says nothing; what
two students cannot both have written alone is the same code where it differs from the solution.
As MOSS does with a base file, the solution's and the release's code are taken out first; each
student's own code is the rest. It is compared as token sequences with local names renamed in order
of appearance (renaming variables hides nothing) and comments and strings' text dropped, in runs of
`SHINGLE` tokens. A pair is listed when their own code overlaps by `THRESHOLD` (Jaccard) or more
over at least `MIN_SHARED` runs. It is a list to read, never a deduction.
"""

from __future__ import annotations

import ast
import io
import itertools
import json
import tokenize
from dataclasses import dataclass
from pathlib import Path

from course.instructor import nbgrader_cells

SHINGLE = 6  # tokens in a run
THRESHOLD = 0.8
MIN_SHARED = 15  # runs: a few lines of code
_SKIPPED = {tokenize.COMMENT, tokenize.NL, tokenize.ENCODING, tokenize.ENDMARKER}


@dataclass(frozen=True)
class Pair:
    notebook: str
    students: tuple[str, str]
    similarity: float  # Jaccard of their own code's runs
    shared: int  # runs both have


def _bound(source: str) -> set[str]:
    """The names the code binds itself (parameters, assignments, loop and `as` targets): the ones
    a copier renames. Raises SyntaxError for code that is not Python."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.arg):
            found.add(node.arg)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            found.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            found.add(node.name)
    return found


def tokens(source: str) -> list[str]:
    """The code's tokens, normalised: the names it binds by order of appearance, strings as one
    token, no comments; attribute, keyword-argument and module names (an API's words) kept."""
    try:
        bound = _bound(source)
        raw = [
            token
            for token in tokenize.generate_tokens(io.StringIO(source).readline)
            if token.type not in _SKIPPED
        ]
    except (tokenize.TokenError, SyntaxError, ValueError):
        return source.split()  # not Python: its words, as written
    renamed: dict[str, str] = {}
    parens: list[str] = []  # "def" for a signature's, "call" for the others
    found: list[str] = []
    for i, token in enumerate(raw):
        text = token.string
        before = raw[i - 1].string if i else ""
        after = raw[i + 1].string if i + 1 < len(raw) else ""
        if text in "([{" and token.type == tokenize.OP:
            parens.append("def" if i > 1 and raw[i - 2].string == "def" else "call")
        elif text in ")]}" and token.type == tokenize.OP and parens:
            parens.pop()
        keyword_argument = after == "=" and parens[-1:] == ["call"]
        if token.type == tokenize.NAME and text in bound and before != "." and not keyword_argument:
            text = renamed.setdefault(text, f"v{len(renamed)}")
        elif token.type == tokenize.STRING:
            text = "STR"
        found.append(text)
    return found


def shingles(source: str) -> set[tuple[str, ...]]:
    words = tokens(source)
    return {tuple(words[i : i + SHINGLE]) for i in range(max(0, len(words) - SHINGLE + 1))}


def solution_code(path: Path) -> dict[str, str]:
    """{grade_id: source} of a notebook's solution cells (nbgrader's marks), as handed in."""
    try:
        notebook = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError):
        return {}
    found = {}
    for cell in notebook.get("cells", []) if isinstance(notebook, dict) else []:
        marks = cell.get("metadata", {}).get("nbgrader", {}) if isinstance(cell, dict) else {}
        cell_id = nbgrader_cells.grade_id(cell) if isinstance(cell, dict) else None
        if cell_id and marks.get("solution") and cell.get("cell_type") == "code":
            source = cell.get("source", "")
            found[cell_id] = "".join(source) if isinstance(source, list) else str(source)
    return found


def own_code(path: Path, base: set[tuple[str, ...]]) -> set[tuple[str, ...]]:
    """The runs of a handed-in notebook's solution code that the base (solution, release) lacks."""
    return set().union(*(shingles(s) for s in solution_code(path).values())) - base


def base_code(*notebooks: Path) -> set[tuple[str, ...]]:
    """The runs every student was given or expected to write: the solution's and the release's."""
    return set().union(*(shingles(s) for path in notebooks for s in solution_code(path).values()))


def similar_pairs(submissions: dict[str, Path], source: Path, release: Path) -> list[Pair]:
    """Pairs of `submissions` ({student: assignment folder}) whose own solution code is alike, per
    notebook of `source` (the instructor's notebooks; `release` the students' copy)."""
    pairs = []
    for notebook in sorted(path.name for path in source.glob("*.ipynb")):
        base = base_code(source / notebook, release / notebook)
        own = {
            student: own_code(folder / notebook, base)
            for student, folder in sorted(submissions.items())
        }
        for a, b in itertools.combinations(sorted(own), 2):
            shared = len(own[a] & own[b])
            union = len(own[a] | own[b])
            if shared >= MIN_SHARED and shared / union >= THRESHOLD:
                pairs.append(Pair(notebook, (a, b), round(shared / union, 3), shared))
    return pairs

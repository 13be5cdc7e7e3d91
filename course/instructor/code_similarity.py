"""Solution code two submissions share beyond the instructor's solution, for the instructor to read.

Short exercises have few right answers, so two students writing the same calls says nothing; what
two students cannot both have written alone is the same code where it differs from the solution.
copydetect compares it: it turns every name into one symbol and every string into another (renaming
hides nothing), fingerprints the code by winnowing runs of `NOISE` such characters, leaves out
every fingerprint of the boilerplate (the solution's and the release's code, of every edition, as
MOSS does with a base file), and writes an HTML report that highlights the passages two students
share. A pair is listed when one's own code is at least `THRESHOLD` shared with the other's over at
least `MIN_SHARED` characters. It is a list to read, never a deduction.

Before copydetect reads it, the kit puts the code in a canonical form (copydetect compares text in
the order written: docs/instructors.md has the measurement): the statements of each block in one
order, each comparison, sum and product one way round (`len(x) > 0` as `0 < len(x)`, `17 + s` as
`s + 17`), so that a copy whose lines were reordered or whose comparisons were turned round reads
as the original. The editions' code cells are the same (only comments and strings are
translated), so a copy across editions is found as within one.
"""

from __future__ import annotations

import ast
import builtins
import itertools
import json
import keyword
import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from copydetect import CopyDetector

from course.fileio import atomic_file
from course.instructor import nbgrader_cells

NOISE = 15  # characters of copydetect's normalised code in a fingerprint
GUARANTEE = 20  # a shared run this long is always found (winnowing's window: 6 fingerprints)
THRESHOLD = 0.8
MIN_SHARED = 60  # characters of normalised code: a few lines
_WORD = re.compile(r"[A-Za-z_]\w*")
_KEPT = set(keyword.kwlist) | set(dir(builtins))  # words copydetect's filter keeps, as the kit's
_TURNED = {
    ast.Lt: ast.Gt,
    ast.Gt: ast.Lt,
    ast.LtE: ast.GtE,
    ast.GtE: ast.LtE,
    ast.Eq: ast.Eq,
    ast.NotEq: ast.NotEq,
    ast.Is: ast.Is,
    ast.IsNot: ast.IsNot,
}

# Operators whose operands a copier may swap (`17 + s`): for numbers the same value.
_SWAPPABLE = (ast.Add, ast.Mult, ast.BitAnd, ast.BitOr, ast.BitXor)


@dataclass(frozen=True)
class Pair:
    notebook: str
    students: tuple[str, str]
    similarity: float  # the larger share of one's own code found in the other's
    shared: int  # characters of normalised code both have


def _shape(node: ast.AST) -> str:
    """The node's code with every name one word: the same for a renamed copy."""
    return _WORD.sub(lambda word: word[0] if word[0] in _KEPT else "V", ast.unparse(node))


class _Canonical(ast.NodeTransformer):
    """Each block's statements sorted by their shape; each comparison of two operands, and each sum
    or product, written with the smaller shape first."""

    def visit_Compare(self, node: ast.Compare) -> ast.AST:
        self.generic_visit(node)
        if len(node.ops) != 1 or type(node.ops[0]) not in _TURNED:
            return node  # a chain (a < b < c) reads one way only
        [right] = node.comparators
        if _shape(right) < _shape(node.left):
            return ast.Compare(right, [_TURNED[type(node.ops[0])]()], [node.left])
        return node

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.op, _SWAPPABLE) and _shape(node.right) < _shape(node.left):
            node.left, node.right = node.right, node.left
        return node

    def generic_visit(self, node: ast.AST) -> ast.AST:
        super().generic_visit(node)
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if isinstance(block, list) and all(isinstance(s, ast.stmt) for s in block):
                block.sort(key=_shape)
        return node


def canonical(source: str) -> str:
    """`source` with its blocks' statements in one order and its comparisons one way round;
    as written when it is not Python."""
    try:
        return ast.unparse(_Canonical().visit(ast.parse(source)))
    except (SyntaxError, ValueError, RecursionError):
        return source


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


def _write_code(notebook: Path, file: Path) -> bool:
    """The notebook's solution cells, each in canonical form, as one Python file; False (nothing
    written) when it has none."""
    cells = solution_code(notebook)
    if not cells:
        return False
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(
        "".join(f"# {cell_id}\n{canonical(source)}\n\n" for cell_id, source in cells.items())
    )
    return True


def _pairs(detector: CopyDetector, owners: dict[str, tuple[str, str]]) -> list[Pair]:
    """Run `detector` over its files ({file: (notebook, student)}): the pairs to list."""
    detector.run()
    pairs = []
    for i, j in itertools.combinations(range(len(detector.test_files)), 2):
        (notebook, a), (other, b) = owners[detector.test_files[i]], owners[detector.ref_files[j]]
        if notebook != other:
            continue  # not compared (same_name_only)
        similarity = float(max(detector.similarity_matrix[i, j]))
        shared = int(detector.token_overlap_matrix[i, j])
        if shared >= MIN_SHARED and similarity >= THRESHOLD:
            pairs.append(Pair(notebook, (a, b), round(similarity, 3), shared))
    return pairs


def similar_pairs(
    submissions: dict[str, Path], bases: Sequence[Path], report: Path | None = None
) -> list[Pair]:
    """Pairs of `submissions` ({student: assignment folder, of any edition}) whose own solution
    code is alike, per notebook; `bases` are the folders of the notebooks every student was given
    or expected to write (each edition's solution and release). copydetect's HTML report of the
    pairs listed goes to `report`, when given and there is one."""
    notebooks = sorted({path.name for base in bases for path in base.glob("*.ipynb")})
    with tempfile.TemporaryDirectory(prefix="course-similarity-") as work:
        folder = Path(work)
        detector = CopyDetector(
            noise_t=NOISE,
            guarantee_t=GUARANTEE,
            display_t=THRESHOLD,
            same_name_only=True,  # a notebook against the same notebook only
            force_language="python",
            autoopen=False,
            silent=True,
        )
        owners: dict[str, tuple[str, str]] = {}  # {file: (notebook, student)}
        for notebook, (index, base) in itertools.product(notebooks, enumerate(bases)):
            file = folder / "boilerplate" / str(index) / f"{Path(notebook).stem}.py"
            if _write_code(base / notebook, file):
                detector.add_file(str(file), type="boilerplate")
        for student, submitted in sorted(submissions.items()):
            for notebook in notebooks:
                file = folder / "students" / student / f"{Path(notebook).stem}.py"
                if _write_code(submitted / notebook, file):
                    detector.add_file(str(file))
                    owners[str(file)] = (notebook, student)
        pairs = _pairs(detector, owners) if len(owners) > 1 else []
        if report is not None:
            report.unlink(missing_ok=True)  # an earlier run's report must not stand for this one
            if pairs:
                with atomic_file(report, "w") as out:
                    out.write(detector.generate_html_report(output_mode="return"))
    return sorted(pairs, key=lambda pair: (pair.notebook, pair.students))

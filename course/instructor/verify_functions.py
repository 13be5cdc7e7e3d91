"""The student's code the verifier takes: the `def`s of a notebook's solution cells, nothing else.

The functions are compiled without running anything the student wrote (decorators and computed
defaults are refused); everything else in those cells, such as code that patches the checks or
the IPython shell, is left out and reported. What a solution never does (writing to objects it did
not create, reaching them by reflection, names no exercise needs) is flagged for the instructor
(course.instructor.verify_flags): code that runs inside a test can reach what the sandbox cannot
take away.
"""

from __future__ import annotations

import ast
import hashlib
import json
from collections.abc import Mapping
from typing import Any

from course.instructor import nbgrader_cells, verify_flags


def solution_sources(notebook: Mapping[str, Any], solution_ids: list[str]) -> dict[str, str]:
    """{grade_id: source} of a submitted notebook's solution cells (those the source notebook
    has)."""
    found = {}
    for cell in notebook.get("cells", []):
        cell_id = nbgrader_cells.grade_id(cell)
        if cell.get("cell_type") == "code" and cell_id in solution_ids:
            found[cell_id] = (
                "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            )
    return found


def digest(sources: dict[str, str]) -> str:
    """What identifies the solution cells verified (nbgrader's copy of them must have the same)."""
    return hashlib.sha256(json.dumps(sources, sort_keys=True).encode()).hexdigest()


def functions(sources: dict[str, str]) -> tuple[str, list[str]]:
    """(the source of the student's defs, notes on what was left out or looks wrong)."""
    kept: list[str] = []
    notes: list[str] = []
    submitted = _defined(sources)
    for grade_id, source in sources.items():
        try:
            tree = ast.parse(source)
        except SyntaxError as e:
            notes.append(
                f"{grade_id}: a syntax error at line {e.lineno} ({e.msg}): its functions are "
                "missing"
            )
            continue
        for node in tree.body:
            if not isinstance(node, ast.FunctionDef):
                if not isinstance(node, (ast.Import, ast.ImportFrom, ast.Pass)) and not (
                    isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
                ):
                    notes.append(
                        f"{grade_id}: line {node.lineno} runs code outside a function (left out: "
                        "only "
                        f"the functions are graded){_uses(node)}"
                    )
                continue
            if node.decorator_list:
                notes.append(
                    f"{grade_id}: {node.name} has a decorator, which would run code of its own: "
                    "left out"
                )
                continue
            defaults = [d for d in [*node.args.defaults, *node.args.kw_defaults] if d is not None]
            if not all(_literal(d) for d in defaults):
                notes.append(
                    f"{grade_id}: {node.name} computes a default value, which would run code: left "
                    "out"
                )
                continue
            found = verify_flags.flags(node, submitted)
            if found:
                said = "; ".join(f"line {line}: {what}" for line, what in found)
                notes.append(
                    f"{grade_id}: {node.name} does what the exercise never needs ({said}): read it"
                )
            # The def as the parser read it, written out again from its syntax tree: never a slice
            # of the cell's lines, which other line breaks (form feeds, U+2028...) would shift
            # onto code the parser saw inside a string.
            kept.append(ast.unparse(node))
    return "\n\n".join(kept) + "\n", notes


def _defined(sources: dict[str, str]) -> set[str]:
    """The names of every function the submission defines (a helper of its own is its to call)."""
    names: set[str] = set()
    for source in sources.values():
        try:
            names |= {n.name for n in ast.parse(source).body if isinstance(n, ast.FunctionDef)}
        except SyntaxError:  # said where the cell's functions are taken
            pass
    return names


def _literal(node: ast.AST) -> bool:
    try:
        ast.literal_eval(node)
    except Exception:  # not a literal, or one that fails to build ({[]: 1}): not a plain default
        return False
    return True


def _uses(node: ast.AST) -> str:
    """What code left out of the functions names that no solution needs."""
    suspicious = sorted(
        {name for _line, name in verify_flags._names(node) if name in verify_flags.SUSPICIOUS}
    )
    return f"; it uses {', '.join(suspicious)}" if suspicious else ""

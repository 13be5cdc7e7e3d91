"""The student's code the verifier takes: the `def`s of a notebook's solution cells, nothing else.

The functions are compiled without running anything the student wrote (decorators and computed
defaults are refused); everything else in those cells, such as code that patches the checks or
the IPython shell, is left out and reported. Names a solution never needs are flagged for the
instructor: code that runs inside a test can reach what the sandbox cannot take away.
"""

from __future__ import annotations

import ast
import hashlib
import json
from collections.abc import Mapping
from typing import Any

from course.instructor import nbgrader_cells

IMPORTED_KIT = "import course"  # how an import of the kit from a def is named (see _names)
# Names a solution never needs; where one appears the instructor is told (not a penalty by itself).
SUSPICIOUS = {
    "get_ipython",
    "sys",
    "gc",
    "inspect",
    "ctypes",
    "builtins",
    "__builtins__",
    "importlib",
    "runpy",
    "run_path",
    "__file__",
    "os",
    "subprocess",
    "signal",
    "socket",
    "setattr",
    "delattr",
    "globals",
    "locals",
    "vars",
    "exec",
    "eval",
    "compile",
    "__import__",
    "open",
    "__globals__",
    "__code__",
    "__dict__",
    "_getframe",
    "modules",
    # the grader's own package, the kit's references, and what forging a test's answer takes
    "instructor",
    "mn_reference",
    "pathlib",
    "json",
    "threading",
    "atexit",
    "weakref",
    # what reading the student's own runs takes (a prediction needs only its arguments); the
    # notebooks' global `course` is theirs to use, an import of the kit inside a def is not
    IMPORTED_KIT,
    "evidence",
    "runs",
    "glob",
    "iglob",
    "rglob",
    "listdir",
    "scandir",
    "iterdir",
    "walk",
    "getcwd",
    "cwd",
    "chdir",
    "home",
    "expanduser",
    "read_text",
    "read_bytes",
    "load",
    "loadtxt",
    "genfromtxt",
    "fromfile",
    "io",
    "shutil",
}


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


def _names(node: ast.AST) -> set[str]:
    found: set[str] = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            found.add(sub.id)
        elif isinstance(sub, ast.Attribute):
            found.add(sub.attr)
        elif isinstance(sub, (ast.Import, ast.ImportFrom)):
            found |= {part for alias in sub.names for part in alias.name.split(".")}
            modules = [alias.name for alias in sub.names] if isinstance(sub, ast.Import) else []
            if isinstance(sub, ast.ImportFrom) and sub.module:
                found |= set(sub.module.split("."))
                modules = [sub.module] if sub.level == 0 else []
            found |= {"import " + module.split(".")[0] for module in modules}
    return found


def functions(sources: dict[str, str]) -> tuple[str, list[str]]:
    """(the source of the student's defs, notes on what was left out or looks wrong)."""
    kept: list[str] = []
    notes: list[str] = []
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
            suspicious = _suspicious(node)
            if suspicious:
                notes.append(
                    f"{grade_id}: {node.name} uses {', '.join(sorted(suspicious))}, which the "
                    "exercise "
                    "never needs: read it"
                )
            # The def as the parser read it, written out again from its syntax tree: never a slice
            # of the cell's lines, which other line breaks (form feeds, U+2028...) would shift
            # onto code the parser saw inside a string.
            kept.append(ast.unparse(node))
    return "\n\n".join(kept) + "\n", notes


def _literal(node: ast.AST) -> bool:
    try:
        ast.literal_eval(node)
    except Exception:  # not a literal, or one that fails to build ({[]: 1}): not a plain default
        return False
    return True


def _suspicious(node: ast.AST) -> set[str]:
    """The names of `node` that no exercise needs: SUSPICIOUS, and the private ones (a single
    leading underscore) of the kit and its libraries."""
    return {
        name
        for name in _names(node)
        if name in SUSPICIOUS or (name[:1] == "_" and name[:2] != "__" and name != "_")
    }


def _uses(node: ast.AST) -> str:
    suspicious = _suspicious(node)
    return f"; it uses {', '.join(sorted(suspicious))}" if suspicious else ""

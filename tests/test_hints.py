"""The checks' failure messages diagnose, never dictate: no text a failing check can print holds a
call, a keyword argument or an expression of the solutions.

The solutions' pieces come from the solution cells (tests.solutions), read with ast: every call
with an argument (its source, whitespace removed), every dotted call's name with its "(" (e.g.
`extensions.snapshot(`), every keyword argument (`n_retains=2`), every arithmetic of names
(`base_lr*n_workers`) and every dotted value an f-string formats (`comm.intra_rank`). The checks'
texts are every string of course/notebook/checks/*.py but docstrings and what `passed` prints
(it says what was verified, after the student wrote it): messages, hints and the helpers' parts of
them, with each f-string's placeholders as "{}". The resource request's messages are read there too,
from course/lessons/run_part/directives.py.
"""

from __future__ import annotations

import ast
import functools
import json
import re
from pathlib import Path

import pytest

from course.contracts import stages
from tests.solutions import SOLUTIONS, notebook_of, solution_source

KIT = Path(__file__).resolve().parent.parent / "course"
# Where the checks' messages are made: the checks' engine and every lesson's modules
# (course/lessons/<lesson>/) but its reports, which show results and give no hint.
CHECKS = [
    *(KIT / "notebook" / "checks").glob("*.py"),
    *(p for p in (KIT / "lessons").glob("*/*.py") if not p.name.endswith("_report.py")),
]


def _normal(text: str) -> str:
    """`text` without whitespace, its quotes all single: how a hint and a solution are compared."""
    return "".join(text.split()).replace('"', "'")


def _pieces(source: str) -> set[str]:
    """The calls, dotted call names, keywords, arithmetic and f-string values of `source`."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        segment = ast.get_source_segment(source, node) or ""
        if isinstance(node, ast.Call):
            if node.args or node.keywords:
                found.add(segment)
            name = ast.get_source_segment(source, node.func) or ""
            if "." in name:
                found.add(f"{name}(")
        elif isinstance(node, ast.keyword) and node.arg is not None:
            found.add(segment)
        elif isinstance(node, ast.BinOp) and not isinstance(node.op, ast.Mod):
            if any(isinstance(side, (ast.Name, ast.Attribute)) for side in (node.left, node.right)):
                found.add(segment)
        elif isinstance(node, ast.FormattedValue):
            value = ast.get_source_segment(source, node.value) or ""
            if "." in value:
                found.add(value)
    return {_normal(piece) for piece in found}


# Whose solutions a hint must not hold: every stage's, and every lesson notebook's (by file name).
SOURCES = (*stages.STAGES, *stages.LESSON_NOTEBOOKS)


@functools.cache
def solution_pieces() -> dict[str, str]:
    """{normalised piece: the stage or notebook it comes from} of every solution cell."""
    return {
        piece: source
        for source in SOURCES
        for piece in _pieces(solution_source(source))
        if len(piece) >= 6
    }


def _docstrings(tree: ast.AST) -> set[int]:
    nodes = (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    return {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, nodes)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }


def _passed_args(tree: ast.AST) -> set[int]:
    """The nodes inside passed(...) calls: what a check prints when it passes."""
    return {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "passed"
        for argument in node.args
        for inner in ast.walk(argument)
    }


def _text(node: ast.AST) -> str:
    if isinstance(node, ast.Constant):
        return str(node.value)
    assert isinstance(node, ast.JoinedStr)
    return "".join(_text(part) if isinstance(part, ast.Constant) else "{}" for part in node.values)


def check_texts(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every string of the checks' module `path` that a failing check may print."""
    tree = ast.parse(path.read_text())
    skipped = _docstrings(tree) | _passed_args(tree)
    parts = {
        id(part)
        for node in ast.walk(tree)
        if isinstance(node, ast.JoinedStr)
        for part in node.values
    }
    return [
        (node.lineno, _text(node))
        for node in ast.walk(tree)
        if id(node) not in skipped | parts
        and (
            isinstance(node, ast.JoinedStr)
            or (isinstance(node, ast.Constant) and isinstance(node.value, str))
        )
    ]


def dictations(path: Path) -> list[str]:
    """Where the module's texts hold a solution piece: 'file:line: piece (stage) in text'."""
    pieces = solution_pieces()
    return [
        f"{path.name}:{line}: {piece!r} ({pieces[piece]}) in {text!r}"
        for line, text in check_texts(path)
        for piece in pieces
        if piece in _normal(text)
    ]


def test_the_solutions_give_the_pieces_a_hint_must_not_hold():
    pieces = solution_pieces()
    for piece in (
        "extensions.snapshot(",
        "extensions.snapshot(n_retains=2)",
        "n_retains=2",
        "shuffle=True",
        "out=args.out",
        "comm.intra_rank",
        "base_lr*n_workers",
        "chainermn.scatter_dataset(train,comm,shuffle=True,seed=seed)",
        "course.Throughput(",
        "alpha+message_bytes*beta",
        "max(ready,link_free)+send",
        "micro_batches+stages",  # notebook 05's, a lesson notebook
    ):
        assert piece in pieces, piece


def test_a_dictating_hint_is_found(tmp_path):
    module = tmp_path / "planted.py"
    module.write_text(
        'def f(n):\n    """Keep extensions.snapshot(n_retains=2) here: a docstring."""\n'
        '    passed("extensions.snapshot(n_retains=2)")\n'
        '    fail(f"{n} snapshots", "keep the newest: extensions.snapshot(n_retains=2)")\n'
    )
    found = dictations(module)
    assert found and all(line.startswith("planted.py:4: ") for line in found), found


# The resource request's messages come from the module that reads the lines, beside the checks.
DIRECTIVES = KIT / "lessons" / "run_part" / "directives.py"


@pytest.mark.parametrize("module", sorted(CHECKS), ids=lambda path: str(path.relative_to(KIT)))
def test_no_hint_holds_a_solution_call(module):
    found = dictations(module)
    assert not found, "\n".join(found)


# The scaffolding fades: stage 1 shows every call; stages 2 and 3 and the lesson notebooks after
# them name what to use, at most.
FADED = (stages.MULTI_GPU.name, stages.MULTI_NODE.name, *stages.LESSON_NOTEBOOKS)


def lesson_texts(stage_name: str) -> list[tuple[int, str]]:
    """(cell index, text) of the markdown students read in the stage's notebook (no answers)."""
    notebook = json.loads((SOLUTIONS / notebook_of(stage_name)).read_text())
    return [
        (index, "".join(cell["source"]))
        for index, cell in enumerate(notebook["cells"])
        if cell["cell_type"] == "markdown"
        and not cell["metadata"].get("nbgrader", {}).get("solution")
    ]


@pytest.mark.parametrize("stage_name", FADED)
def test_stages_2_and_3_name_what_to_use_but_never_write_the_call(stage_name):
    """No call, keyword, argument list or arithmetic of the stage's solutions in its lesson text;
    a plain name (`MultiprocessParallelUpdater`, `site.queue`) may stand there."""
    pieces = [
        piece
        for piece in _pieces(solution_source(stage_name))
        if len(piece) >= 6 and not re.fullmatch(r"[\w.]+", piece)
    ]
    found = [
        f"cell {index}: {piece}"
        for index, text in lesson_texts(stage_name)
        for piece in pieces
        if piece in _normal(text)
    ]
    assert not found, "\n".join(found)

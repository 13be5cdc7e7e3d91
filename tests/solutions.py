"""The students' solution functions, read from solutions/distributed_training/*.ipynb for the tests.

A solution cell is a code cell whose nbgrader metadata has `solution: true`; it holds one or more
top-level defs whose bodies are wrapped in `### BEGIN SOLUTION` / `### END SOLUTION` lines. The
tests take the code from here rather than keeping copies that drift from the notebooks.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import nbformat

from course.contracts import stages

SOLUTIONS = Path(__file__).resolve().parent.parent / "solutions" / "distributed_training"
MARKERS = ("### BEGIN SOLUTION", "### END SOLUTION")


def notebook_of(name: str) -> str:
    """The notebook file of a stage's name, or `name` itself when it is a notebook's file name
    (a lesson notebook of stages.LESSON_NOTEBOOKS has no stage)."""
    return name if name.endswith(".ipynb") else stages.get(name).notebook


@functools.cache
def solution_cells(stage_name: str) -> tuple[str, ...]:
    """The solution code cells of a stage's notebook (or of a notebook by file name) in notebook
    order, without their marker lines."""
    return tuple(
        "\n".join(line for line in cell.source.splitlines() if line.strip() not in MARKERS).strip()
        + "\n"
        for name in notebooks_of(stage_name)
        for cell in nbformat.read(SOLUTIONS / name, as_version=4).cells
        if cell.cell_type == "code" and cell.metadata.get("nbgrader", {}).get("solution")
    )


def notebooks_of(name: str, kinds: tuple[str, ...] | None = None) -> tuple[str, ...]:
    """The notebook of a stage (or `name` itself, a notebook's file name), then the deep-dive
    lessons where the student writes the stage's other functions (stages.LESSON_FUNCTIONS); with
    `kinds`, only those holding functions of those Stage fields (e.g. "job_functions")."""
    if name.endswith(".ipynb"):
        return (name,)
    stage = stages.get(name)
    kinds = kinds or (
        "job_functions",
        "model_functions",
        "prediction_functions",
        "derivation_functions",
    )
    wanted = {function for kind in kinds for function in getattr(stage, kind)}
    return (stage.notebook,) + tuple(
        notebook
        for notebook, functions in stages.LESSON_FUNCTIONS.items()
        if wanted & set(functions)
    )


def solution_source(stage_name: str) -> str:
    """All the stage's solution cells, in notebook order, as one module's source."""
    return "\n\n".join(solution_cells(stage_name))


def solution_functions(stage_name: str) -> dict[str, str]:
    """{function name: its source} of every def in the stage's solution cells, in notebook order."""
    found = {}
    for cell in solution_cells(stage_name):
        lines = cell.splitlines(keepends=True)
        for node in ast.parse(cell).body:
            if not isinstance(node, ast.FunctionDef):
                raise ValueError(
                    f"a solution cell of {stage_name} holds {ast.dump(node)[:60]}, not only defs"
                )
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            found[node.name] = "".join(lines[first - 1 : node.end_lineno])
    return found

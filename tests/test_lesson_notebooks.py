"""The course's notebooks as lessons: each at most 35 cells, opening with what it teaches, how long
it takes and what it needs, and holding exactly the functions course.contracts.stages says."""

from __future__ import annotations

import ast

import nbformat
import pytest

from course.contracts import stages
from tests.helpers import SOLUTIONS

MOST_CELLS = 35


@pytest.mark.parametrize("name", stages.NOTEBOOKS)
def test_a_lesson_is_at_most_35_cells_and_says_what_it_teaches_takes_and_needs(name):
    notebook = nbformat.read(SOLUTIONS / name, as_version=4)
    assert len(notebook.cells) <= MOST_CELLS, (name, len(notebook.cells))
    opening = notebook.cells[0].source
    for mark in ("**In this lesson**", "**Time:** about ", "**It needs**"):
        assert mark in opening, (name, mark)


@pytest.mark.parametrize("name", stages.NOTEBOOKS)
def test_a_notebook_holds_the_functions_stages_names(name):
    notebook = nbformat.read(SOLUTIONS / name, as_version=4)
    written = [
        node.name
        for cell in notebook.cells
        if cell.cell_type == "code" and cell.metadata.get("nbgrader", {}).get("solution")
        for node in ast.parse(cell.source).body
        if isinstance(node, ast.FunctionDef)
    ]
    assert sorted(written) == sorted(stages.notebook_functions(name)), name


def test_the_notebooks_on_disk_are_the_ones_stages_names():
    assert sorted(p.name for p in SOLUTIONS.glob("*.ipynb")) == sorted(stages.NOTEBOOKS)

"""The training scripts of the solutions: what a student who solved every exercise would run.

A solution cell of solutions/<assignment>/*.ipynb is a code cell whose nbgrader metadata has
`solution: true`; its top-level defs are the student's functions. The scripts are written by the
notebooks' own writer (course.notebook.scripts.script_text), so that `course site verify` runs the
very code a class runs, with no copy of it.
"""

from __future__ import annotations

import ast
from pathlib import Path

from course.contracts import stages
from course.errors import CourseError
from course.fileio import atomic_file
from course.notebook import scripts


def functions(notebook: Path) -> dict[str, str]:
    """{name: source} of every top-level def in the notebook's solution cells."""
    import nbformat

    if not notebook.is_file():
        raise CourseError(
            f"{notebook} does not exist", "run this in the kit's checkout: it has solutions/"
        )
    found = {}
    for cell in nbformat.read(notebook, as_version=4).cells:
        if cell.cell_type != "code" or not cell.metadata.get("nbgrader", {}).get("solution"):
            continue
        source = "\n".join(
            line for line in cell.source.splitlines() if not line.strip().startswith("### ")
        )
        lines = source.splitlines(keepends=True)
        for node in ast.parse(source).body:
            if isinstance(node, ast.FunctionDef):
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                found[node.name] = "".join(lines[first - 1 : node.end_lineno])
    return found


def write(solutions: Path, folder: Path) -> list[Path]:
    """Each stage's training script from `solutions`, into `folder`; their paths."""
    written = []
    for stage in stages.STAGES.values():
        sources = functions(solutions / stage.notebook)
        missing = [name for name in stage.functions if name not in sources]
        if missing:
            raise CourseError(
                f"{solutions / stage.notebook} has no solution for {', '.join(missing)}",
                "restore the solutions from the kit's repository (git checkout solutions/)",
            )
        path = folder / stage.script
        with atomic_file(path, "w") as f:
            f.write(scripts.script_text(stage.name, sources))
        written.append(path)
    return written

"""A notebook executed in its folder as JupyterLab would (nbclient), its outputs kept, its errors
returned, its slow cells told as they end: how the demo's students and the tests run notebooks."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from course.errors import CourseError
from course.instructor import nbgrader_cells

# A cell that runs at least this long (a job, a stage-3 check) is said as it ends, with the time;
# one still running is said every HEARTBEAT seconds (a stage-3 comparison takes many minutes).
SLOW_CELL = 5.0
HEARTBEAT = 60.0


def run_notebook(
    path: Path,
    timeout: int | None = None,
    env: dict[str, str] | None = None,
    echo: Callable[[str], None] | None = None,
) -> list[str]:
    """Execute a notebook in its folder as JupyterLab would, keep its outputs; return its errors.

    env: the kernel's environment (default: this process's); echo: told of each graded or slow cell
    as it ends, so that a long notebook shows its progress. timeout: seconds a cell may take (None:
    no limit, the default, since a cell that runs jobs is bounded by their walltimes and the
    training's watchdog, and takes three times as long on a busy machine: a stage-3 comparison
    took 829 s on an idle one and over 1800 s at load 16).
    """
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellTimeoutError

    notebook = nbformat.read(path, as_version=4)
    started = time.monotonic()
    running: list[Any] = [None, 0, started]  # the cell under way, its index, when it started
    finished = threading.Event()

    def where(cell: Any, cell_index: int) -> str:
        name = nbgrader_cells.grade_id(cell)
        return f"    {path.name} cell {cell_index + 1}/{len(notebook.cells)}" + (
            f" ({name})" if name else ""
        )

    def cell_started(cell: Any, cell_index: int, **_: Any) -> None:
        running[:] = [cell, cell_index, time.monotonic()]

    def cell_ended(cell: Any, cell_index: int, **_: Any) -> None:
        now = time.monotonic()
        took = now - running[2]
        running[0] = None
        if echo is not None and (nbgrader_cells.grade_id(cell) or took >= SLOW_CELL):
            echo(f"{where(cell, cell_index)}: {took:.0f} s, {now - started:.0f} s in")

    def heartbeat() -> None:
        while not finished.wait(HEARTBEAT):
            cell, cell_index, since = running
            if echo is not None and cell is not None and time.monotonic() - since >= HEARTBEAT:
                echo(f"{where(cell, cell_index)}: still running, {time.monotonic() - since:.0f} s")

    client = NotebookClient(
        notebook,
        timeout=timeout,
        allow_errors=True,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
        extra_arguments=["--IPKernelApp.log_level=ERROR"],
        on_cell_start=cell_started,
        on_cell_executed=cell_ended,
    )  # as nbgrader_config.py
    beating = threading.Thread(target=heartbeat, daemon=True)
    beating.start()
    try:
        client.execute(**({"env": env} if env is not None else {}))
    except CellTimeoutError as e:  # a TimeoutError, which is an OSError: not a disk's problem
        _, cell_index, since = running
        raise CourseError(
            f"{path.name} cell {cell_index + 1}/{len(notebook.cells)} ran longer than its limit of "
            f"{timeout} s ({time.monotonic() - since:.0f} s)",
            "if its jobs were still running, the machine is busier than the limit allows: run "
            "again with a larger timeout, or none",
        ) from e
    finally:
        finished.set()
        beating.join()
    nbformat.write(notebook, path)
    errors = []
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            if output.output_type == "error":
                grade_id = nbgrader_cells.grade_id(cell) or "?"
                errors.append(
                    f"{grade_id}: {output.ename}: "
                    f"{output.evalue.splitlines()[0] if output.evalue else ''}"
                )
    return errors

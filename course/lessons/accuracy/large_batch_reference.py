"""Notebook 06's reference runs of large batches, shown only once the prediction is recorded.

Question 2a asks for a prediction (graded by hand) that the reference table answers. So the table is
not in the notebook's text: `show()` prints it only when the notebook as saved holds an answer in
that cell, and records that answer first, once (`runs/large_batch_prediction.json`: the text, its
SHA-256, the time), so that the instructor grades the prediction as it stood before the table was
seen. A later edit of the answer does not move the record; `show()` says so when they differ.

The numbers are the kit's own 4-rank runs of 2026-11-26 (the maintainers' accuracy study).
"""

from __future__ import annotations

import hashlib
import html
import json
from datetime import UTC, datetime
from pathlib import Path

from course.fileio import atomic_file
from course.i18n import _
from course.notebook.report import html_table

NOTEBOOK = "06_accuracy_at_scale.ipynb"
ANSWER = "answer_large_batch_predict"
RECORD = Path("runs") / "large_batch_prediction.json"

# Validation accuracy at the end of epochs 1, 2 and 3, per seed: one rank, then 4 ranks by rule.
RUNS = {
    0: ((0.377, 0.762, 0.940), (0.089, 0.302, 0.694), (0.095, 0.106, 0.448), (0.142, 0.701, 0.944)),
    1: ((0.369, 0.499, 0.936), (0.097, 0.484, 0.949), (0.095, 0.557, 0.932), (0.141, 0.341, 0.949)),
}


def _placeholder() -> str:
    """nbgrader's text in a written answer's cell before the student writes one (its default,
    which nbgrader_config.py keeps)."""
    from nbgrader.preprocessors import ClearSolutions

    return str(ClearSolutions.class_traits()["text_stub"].default_value)


def saved_answer(notebook: Path) -> str | None:
    """The answer in the saved `notebook`'s prediction cell, or None where there is none yet."""
    try:
        cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    for cell in cells:
        if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") == ANSWER:
            source = cell.get("source", "")
            text = ("".join(source) if isinstance(source, list) else str(source)).strip()
            return text if text and text != _placeholder() else None
    return None


def record(folder: Path, answer: str) -> dict:
    """The recorded prediction of `folder`: the one already there, else `answer`, written now."""
    path = folder / RECORD
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        pass  # none yet (or unreadable): this answer is the record
    made = {
        "answer": answer,
        "sha256": hashlib.sha256(answer.encode("utf-8")).hexdigest(),
        "recorded_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    with atomic_file(path) as f:
        f.write(json.dumps(made, ensure_ascii=False, indent=1).encode("utf-8"))
    return made


def table() -> str:
    """The reference runs as an HTML table, in the student's language."""
    columns = ["seed", "one", "warmup", "sqrt", "lars"]
    headings = {
        "seed": _("seed"),
        "one": _("1 rank (to 0.05)"),
        "warmup": _("4 ranks, warmup (to 0.2)"),
        "sqrt": _("4 ranks, sqrt (to 0.1)"),
        "lars": _("4 ranks, lars (to 0.01, per layer)"),
    }
    rows = [dict(zip(columns, (seed, *runs), strict=True)) for seed, runs in RUNS.items()]

    def cell(value: object) -> str:
        if isinstance(value, tuple):
            *early, last = (f"{v:.3f}" for v in value)
            return ", ".join(early + [f"<b>{last}</b>"])
        return html.escape(str(value))

    return html_table(rows, columns, cell, headings)


def show(folder: Path = Path(".")) -> dict | None:
    """Record the saved prediction and show the reference runs; without a saved prediction, say
    what to do and show nothing."""
    from IPython.display import HTML, display

    answer = saved_answer(folder / NOTEBOOK)
    if answer is None:
        print(
            _(
                "No prediction yet in {notebook} as saved: write your answer to Question 2a in its "
                "cell, save the notebook (Ctrl+S), and run this cell again. The reference runs are "
                "shown once your prediction is recorded."
            ).format(notebook=NOTEBOOK)
        )
        return None
    try:
        made = record(folder, answer)
    except OSError as error:
        print(
            _(
                "Your prediction could not be recorded in {file} ({error}), so the reference runs "
                "are not shown: make the folder writable and run this cell again."
            ).format(file=RECORD, error=error)
        )
        return None
    print(
        _("Your prediction was recorded at {time} in {file}; it is the one graded.").format(
            time=made.get("recorded_at", "?"), file=RECORD
        )
    )
    if made.get("answer") != answer:
        print(
            _(
                "Your answer in the notebook has changed since: the recorded one is graded, and "
                "the change is for your own notes."
            )
        )
    display(HTML(table()))
    return made

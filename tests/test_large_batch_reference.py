"""Notebook 05's reference table of large batches answers Question 2a, so it is shown only once the
student's prediction, as saved in the released notebook, is recorded; the first record stays."""

from __future__ import annotations

import json

from course.lessons.accuracy import large_batch_reference as reference
from tests.helpers import ROOT

RELEASED = ROOT / "notebooks" / "distributed_training" / reference.NOTEBOOK


def student_folder(tmp_path, answer: str | None):
    """A copy of the released notebook 05, its prediction cell answered with `answer` (None: as
    released, nbgrader's placeholder)."""
    notebook = json.loads(RELEASED.read_text())
    if answer is not None:
        for cell in notebook["cells"]:
            if cell["metadata"].get("nbgrader", {}).get("grade_id") == reference.ANSWER:
                cell["source"] = answer
    (tmp_path / reference.NOTEBOOK).write_text(json.dumps(notebook))
    return tmp_path


def test_the_released_notebook_shows_no_reference_table_in_its_text():
    text = RELEASED.read_text()
    assert "0.694" not in text and "0.944" not in text
    cells = json.loads(text)["cells"]
    ids = [c["metadata"].get("nbgrader", {}).get("grade_id") for c in cells]
    assert ids.index(reference.ANSWER) < ids.index("large_batch_table")


def test_without_a_saved_prediction_nothing_is_shown_nor_recorded(tmp_path, capsys):
    folder = student_folder(tmp_path, None)
    assert reference.show(folder) is None
    assert "No prediction yet" in capsys.readouterr().out
    assert not (folder / reference.RECORD).exists()


def test_a_saved_prediction_is_recorded_before_the_table_and_the_first_record_stays(
    tmp_path, capsys
):
    folder = student_folder(tmp_path, "warmup first: 4 times the step for 4 times fewer updates")
    made = reference.show(folder)
    out = capsys.readouterr().out
    assert made["answer"].startswith("warmup first") and "recorded at" in out
    assert json.loads((folder / reference.RECORD).read_text()) == made
    student_folder(tmp_path, "lars first, now that I have seen the table")
    again = reference.show(folder)
    assert again == made
    assert "has changed since" in capsys.readouterr().out


def test_the_table_holds_every_reference_run():
    html = reference.table()
    assert html.count("<tr>") == 1 + len(reference.RUNS)
    for runs in reference.RUNS.values():
        for accuracies in runs:
            assert f"<b>{accuracies[-1]:.3f}</b>" in html


def test_a_record_it_cannot_write_shows_nothing_and_says_why(tmp_path, capsys):
    folder = student_folder(tmp_path, "sqrt last")
    (folder / reference.RECORD).mkdir(parents=True)  # a folder where the record's file goes
    assert reference.show(folder) is None
    assert "could not be recorded" in capsys.readouterr().out


def test_the_table_is_the_runs_docs_accuracy_md_reports():
    text = (ROOT / "docs" / "accuracy.md").read_text()
    for seed, runs in reference.RUNS.items():
        row = f"| {seed} | " + " | ".join(
            ", ".join(f"{v:.3f}" for v in acc[:-1]) + f", **{acc[-1]:.3f}**" for acc in runs
        )
        assert row + " |" in text, f"seed {seed}: {row}"

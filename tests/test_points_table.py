"""The points table of docs/instructors.md (and its translation in docs/grading.ja.md) recomputed
from the notebooks' nbgrader metadata: every graded cell in exactly one row, each row's points the
sum of its cells', each written answer counted as reasoning, and the totals sentence the sums."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import pytest

from tests.helpers import ROOT, SOLUTIONS

MARKER = "<!-- points table: tests/test_points_table.py -->"
KINDS = {"reasoning": "reasoning", "transcription": "transcription", "a run": "a run"}
KINDS_JA = {"推論": "reasoning", "書き写し": "transcription", "実行": "a run"}
HARVEST_JA = {"未測定": "to be measured"}
HARVEST = re.compile(r"^(?P<earned>\d+) (?:of|/) (?P<of>\d+)$")


@dataclass(frozen=True)
class Row:
    notebook: str
    cells: tuple[str, ...]
    points: int
    kind: str
    harvested: str


def graded_cells() -> dict[tuple[str, str], tuple[int, str]]:
    """(notebook number, grade_id) -> (points, nbgrader cell type) of every graded cell."""
    found = {}
    for path in sorted(SOLUTIONS.glob("*.ipynb")):
        for cell in json.loads(path.read_text())["cells"]:
            marks = cell["metadata"].get("nbgrader", {})
            if marks.get("grade"):
                found[(path.name[:2], marks["grade_id"])] = (marks["points"], cell["cell_type"])
    return found


def table(document: str, kinds: dict[str, str]) -> list[Row]:
    text = (ROOT / document).read_text(encoding="utf-8")
    assert text.count(MARKER) == 1, f"{document} must hold the points table once, after {MARKER}"
    lines = text.split(MARKER, 1)[1].strip().splitlines()
    rows = []
    for line in lines[2:]:
        if not line.startswith("|"):
            break
        _kind, notebook, cells, points, kind, harvested = (
            c.strip() for c in line.strip().strip("|").split("|")
        )
        assert kind in kinds, f"{document}: {kind!r} is not one of {sorted(kinds)}"
        rows.append(
            Row(
                notebook,
                tuple(re.findall(r"`([a-z0-9_]+)`", cells)),
                int(points),
                kinds[kind],
                HARVEST_JA.get(harvested, harvested),
            )
        )
    return rows


def totals_sentence(document: str, pattern: str) -> tuple[int, ...]:
    text = (ROOT / document).read_text(encoding="utf-8")
    found = re.search(pattern, text)
    assert found, f"{document} must sum the table up ({pattern})"
    return tuple(int(g) for g in found.groups())


EN_TOTALS = (
    r"In all: reasoning (\d+) of (\d+) points \((\d+)%\), transcription (\d+), a run (\d+)\."
)
JA_TOTALS = r"合計: (\d+) 点中、推論 (\d+) 点（(\d+)%）、書き写し (\d+) 点、実行 (\d+) 点。"


def test_every_graded_cell_is_in_one_row_with_its_points():
    cells = graded_cells()
    rows = table("docs/instructors.md", KINDS)
    listed = [(row.notebook, cell) for row in rows for cell in row.cells]
    assert len(listed) == len(set(listed)), "a cell is in two rows"
    assert set(listed) == set(cells), (
        f"not in the table: {sorted(set(cells) - set(listed))}; "
        f"not graded: {sorted(set(listed) - set(cells))}"
    )
    for row in rows:
        assert row.points == sum(cells[(row.notebook, c)][0] for c in row.cells), row


def test_written_answers_are_reasoning_and_the_harvest_column_fits_each_row():
    cells = graded_cells()
    for row in table("docs/instructors.md", KINDS):
        by_hand = {cells[(row.notebook, c)][1] == "markdown" for c in row.cells}
        assert len(by_hand) == 1, f"{row}: a row is all automatic or all by hand"
        if by_hand == {True}:
            assert row.kind == "reasoning", row
        if row.kind != "reasoning" or by_hand == {True}:
            assert row.harvested == "-", f"{row}: nothing to harvest"
        elif row.harvested != "to be measured":
            earned = HARVEST.match(row.harvested)
            assert earned, f"{row}: 'N of {row.points}', 'to be measured' or '-'"
            assert int(earned["of"]) == row.points and int(earned["earned"]) <= row.points


def test_the_totals_sentence_is_the_sum_of_the_table():
    rows = table("docs/instructors.md", KINDS)
    total = sum(r.points for r in rows)
    assert total == sum(points for points, _ in graded_cells().values())
    by_kind = {k: sum(r.points for r in rows if r.kind == k) for k in KINDS.values()}
    reasoning = by_kind["reasoning"]
    assert totals_sentence("docs/instructors.md", EN_TOTALS) == (
        reasoning,
        total,
        round(100 * reasoning / total),
        by_kind["transcription"],
        by_kind["a run"],
    )
    assert totals_sentence("docs/grading.ja.md", JA_TOTALS) == (
        total,
        reasoning,
        round(100 * reasoning / total),
        by_kind["transcription"],
        by_kind["a run"],
    )


@pytest.mark.parametrize("document", ["docs/grading.ja.md"])
def test_the_translation_holds_the_same_rows(document):
    english = table("docs/instructors.md", KINDS)
    assert table(document, KINDS_JA) == english

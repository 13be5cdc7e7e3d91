"""The committed reference logs (docs/reference-logs) still pass the grader's checks, and `course
report`."""

from __future__ import annotations

import json
import shutil

import pytest

from course import cli, comparison, evidence
from tests.helpers import ROOT

REFERENCE = ROOT / "docs" / "reference-logs" / "cpu-2core"


def test_every_reference_run_is_traced_to_its_log():
    for stage in ("single_gpu", "multi_node"):
        found = evidence.runs(stage, REFERENCE)
        assert found, f"no {stage} run in {REFERENCE}"
        for run in found:
            assert run.traced, f"{run.path}: {run.problems}"


def test_report_prints_the_scaling_table(capsys):
    assert cli.main(["report", str(REFERENCE)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:3] == ["run", "stage", "workers"]
    base = comparison.baseline(REFERENCE)
    for run in evidence.runs("multi_node", REFERENCE):
        row = next(line for line in lines if line.startswith(run.path.parent.name))
        assert f" {run.workers} " in row and f" {comparison.efficiency(run, base):.3f} " in row, row


def test_a_run_whose_results_were_edited_does_not_count(tmp_path, capsys):
    folder = tmp_path / "student"
    shutil.copytree(REFERENCE, folder)
    # a 2-rank run, whichever job numbers the reference logs have
    edited = next(run for run in evidence.runs("multi_node", folder) if run.workers == 2)
    results = edited.path
    record = json.loads(results.read_text())
    record["throughput"]["images_per_sec"] *= 1.2
    results.write_text(json.dumps(record))
    assert cli.main(["report", str(folder)]) == 0
    name = results.parent.name
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith(name))
    assert "no:" in row


@pytest.mark.parametrize("make", [lambda p: None, lambda p: (p / "runs").mkdir()])
def test_report_without_runs_says_where_to_look(tmp_path, capsys, make):
    make(tmp_path)
    assert cli.main(["report", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "no runs in" in err and "submit the jobs from" in err

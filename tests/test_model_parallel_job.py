"""The model-parallel job (jobs/run_model_parallel.sh) under the embedded scheduler, as notebook
05's cell submits it: ChainerMN's MultiNodeChainList and the data-parallel optimizer on 2 CPU
ranks with the `naive` communicator, one sealed file traced by its log line, bytes counted as the
kit models them, and the notebook's check passing on the solutions, with the grader's accounting.
"""

from __future__ import annotations

import shutil

import pytest

from course.cluster.accounting import Accounting
from course.lessons.beyond import model_parallel as checks
from course.lessons.beyond import model_parallel_report, parallelism
from tests import model_parallel_students as students
from tests.helpers import ROOT, python_ok

pytestmark = pytest.mark.slow


def test_the_job_trains_both_ways_and_its_file_is_traced(tmp_path, quick_env, capsys):
    folder = tmp_path / "student"
    shutil.copytree(ROOT / "jobs", folder / "jobs")
    env = {**quick_env, "STEPS": "2", "ROUNDS": "1"}  # the smallest run that times both
    python_ok(
        "-m", "course", "submit", "jobs/run_model_parallel.sh", cwd=folder, env=env, timeout=300
    )
    run = model_parallel_report.newest(folder)
    assert run is not None, capsys.readouterr().out
    assert (run.ranks, run.batch, run.width, run.cut_after) == (2, 32, 8, 2)
    assert run.cut_shape == (16, 8, 8)  # 2 x width channels, 32 px halved twice
    assert run.parameters == 235_970 and run.gradient_bytes_per_rank == 4 * run.parameters
    assert run.activation_bytes == parallelism.activation_bytes(32, run.cut_shape)
    assert len(run.data_seconds) == len(run.model_seconds) == 2
    assert all(seconds > 0 for seconds in run.data_seconds + run.model_seconds)
    solved = students.load(tmp_path)
    checks.measured_run(solved.activation_bytes, solved.gradient_bytes, folder)
    assert "OK: your counts are" in capsys.readouterr().out
    # The hidden test's accounting: the embedded scheduler keeps none, which the check says.
    checked = Accounting("alice", "root")
    checks.measured_run(solved.activation_bytes, solved.gradient_bytes, folder, checked=checked)
    said = capsys.readouterr().out
    assert "OK: your counts are" in said
    assert "was not checked against the scheduler's records: the local scheduler keeps no" in said

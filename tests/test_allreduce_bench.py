"""The allreduce micro-benchmark job under the embedded scheduler, as `course submit` runs it: ranks,
algorithms taking turns, sealed files traced by their log lines, and the notebook's reader on them.
tests/test_slurm.py submits the same job to real Slurm."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from course import allreduce, costmodel, joblog
from course.fileio import sha256_file
from course.notebook import allreduce_report
from tests.conftest import PYTHON, ROOT

pytestmark = pytest.mark.slow
JOB = "jobs/run_allreduce_benchmark.sh"


def check_benchmark_job(folder: Path, ranks: int, log: Path) -> list[allreduce_report.Series]:
    """What every benchmark job leaves, here or under Slurm: a file per burst (2 rounds of ring and recursive
    doubling, in turn), each sealed, named by a log line with its digest, and with the algorithm Open MPI was
    told to use; the reader's table and fits from them."""
    text = log.read_text()
    said = joblog.launches(text)
    assert [launch["slots"] for launch in said] == [ranks] * 4, text
    lines = allreduce.logged(text)
    assert [line["algorithm"] for line in lines] == ["ring", "recursive_doubling"] * 2, text
    for line in lines:
        record = allreduce.load(folder / line["path"])
        assert sha256_file(folder / line["path"]) == line["sha256"]
        assert (record["ranks"], len(record["hosts"])) == (ranks, ranks)
        assert record["mca"]["OMPI_MCA_coll_tuned_allreduce_algorithm"] == str(
            {"ring": 4, "recursive_doubling": 3}[record["algorithm"]]
        )
        assert [size["bytes"] for size in record["sizes"]] == [1024 * 4**k for k in range(1, 9)]
        assert all(size["repeats"] >= 3 and min(size["seconds"]) > 0 for size in record["sizes"])
    table = allreduce_report.measured_table(folder)
    assert [(s.ranks, s.algorithm, s.bursts) for s in table] == [
        (ranks, "recursive_doubling", 2),
        (ranks, "ring", 2),
    ]
    fitted = allreduce_report.fits(table)
    assert set(fitted) == {(ranks, "ring"), (ranks, "recursive_doubling")}
    assert all(beta > 0 for _, beta in fitted.values())
    return table


def test_the_benchmark_job_under_the_embedded_scheduler(tmp_path, quick_env):
    folder = tmp_path / "student"
    shutil.copytree(ROOT / "jobs", folder / "jobs")
    env = {
        **quick_env,
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "ROUNDS": "2",
    }  # the algorithms take turns
    run = subprocess.run(
        [PYTHON, "-m", "course", "submit", JOB, "-l", "select=1:mpiprocs=2"],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    [log] = folder.glob("run_allreduce_benchmark.sh.o*")
    table = check_benchmark_job(folder, 2, log)
    # The fitted model is within a factor of 3 of the median where the messages fit in the caches.
    for s in table:
        alpha, beta = allreduce_report.fits(table)[(s.ranks, s.algorithm)]
        i = s.sizes.index(64 * 1024)
        assert (
            1 / 3
            < costmodel.allreduce_seconds(s.algorithm, s.ranks, s.sizes[i], alpha, beta)
            / s.median[i]
            < 3
        )

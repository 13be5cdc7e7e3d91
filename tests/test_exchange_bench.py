"""Notebook 04's benchmark job: jobs/run_allreduce_benchmark.sh with ALGORITHMS="ring
parameter_server", under the kit's local scheduler as `course submit` runs it, at the smallest
settings (2 ranks, one round, two sizes). The two patterns take turns, each burst's sealed file is
traced by its log line, the files stay out of notebook 03's table, and notebook 04's reader pairs
them."""

from __future__ import annotations

import shutil

import pytest

from course.contracts import benchmark
from course.lessons.exchange import exchange_report
from course.lessons.step_time import allreduce_report
from course.runtime import allreduce_bench
from tests.helpers import ROOT, python_ok
from tests.mpi_helpers import measured

pytestmark = pytest.mark.integration
SIZES = (4096, 1048576)


def test_the_server_and_the_ring_take_turns_in_one_job(tmp_path, quick_env, capsys):
    folder = tmp_path / "student"
    shutil.copytree(ROOT / "jobs", folder / "jobs")
    env = {
        **quick_env,
        "XDG_STATE_HOME": str(tmp_path / "state"),
        **exchange_report.JOB_ENV,
        "SIZES": " ".join(str(n) for n in SIZES),
    }
    python_ok(
        "-m", "course", "submit", "jobs/run_allreduce_benchmark.sh", "-l", "select=1:mpiprocs=2",
        cwd=folder, env=env, timeout=300,
    )  # fmt: skip
    [log] = folder.glob("run_allreduce_benchmark.sh.o*")
    lines = benchmark.logged(log.read_text())
    assert [line["algorithm"] for line in lines] == ["ring", benchmark.PARAMETER_SERVER]
    for line in lines:
        assert line["path"].startswith(f"runs/{benchmark.EXCHANGE_PREFIX}-"), line
        record = benchmark.load(folder / line["path"])
        assert [size["bytes"] for size in record["sizes"]] == list(SIZES)
        # the server's bursts ask Open MPI for no allreduce algorithm: they run none
        assert bool(record["mca"]) == (record["algorithm"] == "ring"), record["mca"]
    # notebook 03's table reads runs/allreduce-* only; notebook 04's pairs the two patterns
    assert allreduce_report.measured_table(folder) == []
    table = exchange_report.server_table(folder)
    assert [(s.ranks, s.algorithm) for s in table] == [
        (2, benchmark.PARAMETER_SERVER),
        (2, "ring"),
    ]
    # with notebook 03's fit beside it, the report sets the measurement beside the model
    measured(folder, ranks=2)
    said = exchange_report.server_lines(table, checks_model, folder)
    assert said[0].startswith("2 ranks (alpha ") and "from your notebook-04 benchmark" in said[0]
    assert len(said) == 1 + len(SIZES) and all("measured ratio" in line for line in said[1:])
    # the demo's lines: the same with the kit's model, and what is missing for the rest
    demo = exchange_report.summary(folder)
    assert demo[: len(said)] == [line.replace("your model", "the kit's model") for line in said]
    assert demo[len(said) :] == [exchange_report.no_profile()] * 2


def checks_model(n_ranks, message_bytes, alpha, beta):
    """The kit's model in the student's place (the report calls the student's function)."""
    from course.lessons.exchange import exchangemodel

    return exchangemodel.parameter_server_seconds(n_ranks, message_bytes, alpha, beta)


def test_the_pattern_and_the_folder_are_choices_the_runtime_checks():
    assert allreduce_bench.parse_args(["--pattern", "parameter_server"]).pattern == (
        benchmark.PARAMETER_SERVER
    )
    with pytest.raises(SystemExit):
        allreduce_bench.parse_args(["--prefix", "elsewhere"])

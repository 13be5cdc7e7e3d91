"""The allreduce cost model (course.lessons.step_time.costmodel), its results file, reader and
scoring (its notebook
checks: tests/test_allreduce_checks.py)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from course.contracts import benchmark
from course.errors import ResultsError
from course.instructor import scoring
from course.lessons.step_time import allreduce_report, costmodel
from course.notebook.checks import CheckFailed
from tests.mpi_helpers import SIZES, measured

GRADING = """
[allreduce]
prediction_factor = 4.0
"""


def test_known_values_of_both_formulas():
    # ring: 2(p-1) alpha + 2(p-1)/p n beta; recursive doubling: log2(p) (alpha + n beta)
    assert costmodel.allreduce_seconds("ring", 4, 2**20, 5e-6, 1e-9) == pytest.approx(
        6 * 5e-6 + 1.5 * 2**20 * 1e-9
    )
    assert costmodel.allreduce_seconds("recursive_doubling", 4, 2**20, 5e-6, 1e-9) == pytest.approx(
        2 * (5e-6 + 2**20 * 1e-9)
    )
    assert costmodel.allreduce_seconds("recursive_doubling", 8, 100, 1.0, 0.0) == pytest.approx(3.0)
    assert costmodel.allreduce_seconds("ring", 8, 0, 1.0, 0.0) == 14
    assert (
        costmodel.allreduce_seconds("ring", 1, 2**20, 5e-6, 1e-9) == 0
    )  # one rank exchanges nothing
    with pytest.raises(ValueError, match="no cost model"):
        costmodel.allreduce_seconds("rabenseifner", 4, 1, 1, 1)


@pytest.mark.parametrize(
    "algorithm, ranks",
    [("ring", 2), ("ring", 4), ("recursive_doubling", 4), ("recursive_doubling", 16)],
)
def test_the_fit_recovers_alpha_and_beta_from_exact_times(algorithm, ranks):
    seconds = [costmodel.allreduce_seconds(algorithm, ranks, n, 4e-6, 3e-10) for n in SIZES]
    assert costmodel.fit(SIZES, seconds, algorithm, ranks) == pytest.approx((4e-6, 3e-10), rel=1e-9)


def test_the_fit_weighs_every_size_alike():
    """With 10% noise on every time, the relative-error fit still finds the latency; an unweighted
    fit is set by the largest messages alone and gets it wrong by far more."""
    rng = np.random.default_rng(0)
    exact = np.array([costmodel.allreduce_seconds("ring", 4, n, 5e-6, 5e-10) for n in SIZES])
    noisy = exact * (1 + 0.1 * rng.standard_normal(len(SIZES)))
    alpha, beta = costmodel.fit(SIZES, noisy, "ring", 4)
    a, b = costmodel.coefficients("ring", 4)
    (plain_alpha, _), *_ = np.linalg.lstsq(
        np.column_stack([np.full(len(SIZES), a), b * np.array(SIZES)]), noisy, rcond=None
    )
    assert abs(alpha / 5e-6 - 1) < 0.2 and abs(beta / 5e-10 - 1) < 0.1
    assert abs(plain_alpha / 5e-6 - 1) > 5 * abs(alpha / 5e-6 - 1)


def test_gradient_prediction_uses_four_bytes_per_parameter():
    one = costmodel.predict_gradient_allreduce(1000, "ring", 2, 1e-6, 1e-9)
    assert one == pytest.approx(2e-6 + 4000e-9)
    per_array = costmodel.predict_gradient_allreduce([400, 600], "ring", 2, 1e-6, 1e-9)
    assert per_array == pytest.approx(4e-6 + 4000e-9)  # the naive communicator pays alpha per array


# --- the results file and its log line ------------------------------------------------------------


def test_the_file_is_sealed_and_its_log_line_reads_back(tmp_path):
    path = benchmark.next_path(benchmark.run_folder(tmp_path, "3.local"), "ring", 2)
    assert path.name == "ring-2r-1.json"
    sha256 = benchmark.write(path, {"ranks": 2, "algorithm": "ring", "sizes": []})
    assert benchmark.next_path(path.parent, "ring", 2).name == "ring-2r-2.json"
    assert benchmark.load(path)["ranks"] == 2
    line = benchmark.log_line("runs/allreduce-3.local/ring-2r-1.json", sha256, "ring", 2)
    assert benchmark.logged(f"noise\n{line}\nmore\n") == [
        {
            "path": "runs/allreduce-3.local/ring-2r-1.json",
            "sha256": sha256,
            "algorithm": "ring",
            "ranks": 2,
        }
    ]
    edited = json.loads(path.read_text())
    edited["ranks"] = 4
    path.write_text(json.dumps(edited))
    with pytest.raises(ResultsError, match="changed after the benchmark wrote it"):
        benchmark.load(path)
    assert benchmark.summarize([3.0, 1.0, 2.0, 100.0]) == pytest.approx((2.5, 1.75, 27.25))


def test_the_reader_pools_rounds_fits_and_says_where_algorithms_differ(tmp_path):
    measured(tmp_path, ranks=4, algorithm="ring")
    table = measured(tmp_path, ranks=4, algorithm="recursive_doubling", seed=1)
    assert [(s.ranks, s.algorithm, s.bursts, s.repeats[0]) for s in table] == [
        (4, "recursive_doubling", 2, 10),
        (4, "ring", 2, 10),
    ]
    fitted = allreduce_report.fits(table)
    assert fitted[(4, "ring")] == pytest.approx((5e-6, 4e-10), rel=0.25)
    text = allreduce_report.table_text(table)
    assert "64 MiB" in text and "4 KiB" in text
    [ring_vs, model_note] = allreduce_report.compare(table)
    assert (
        ring_vs.startswith("4 ranks, ring vs recursive_doubling: beyond the spread at")
        and "64 MiB" in ring_vs
    )
    assert "no term for the sums" in model_note
    notes = allreduce_report.notes(table, fitted)
    assert len(notes) == 2 and all(
        "4 ranks on 2 cores: ranks take turns on a core" in note for note in notes
    )
    import matplotlib

    matplotlib.use("Agg")
    figure = allreduce_report.plot(table, fitted)
    assert figure.axes[0].get_xscale() == "log" and len(figure.axes[0].lines) >= 2


def test_each_series_comes_from_its_newest_job(tmp_path):
    measured(tmp_path, job="9.local", started=2.0, rounds=1)
    table = measured(
        tmp_path, job="10.local", started=1.0
    )  # a lower number, but started before job 9
    assert [(s.job, s.bursts) for s in table] == [("allreduce-9.local", 1)]


def test_a_tampered_file_is_left_out_of_the_table_with_a_note(tmp_path, capsys):
    measured(tmp_path, rounds=1)
    [path] = benchmark.find(tmp_path)
    path.write_text(path.read_text().replace('"cores": 2', '"cores": 8'))
    assert allreduce_report.measured_table(tmp_path) == []
    assert "note: left out" in capsys.readouterr().out


# --- scoring --------------------------------------------------------------------------------------


@pytest.mark.usefixtures("grading_config")
def test_the_prediction_scores_within_the_factor_of_grading_toml(capsys):
    assert scoring.grade_allreduce_prediction(2.0, 0.9e-3, 1.2e-3) == 2.0
    assert "within 4x" in capsys.readouterr().out
    assert scoring.grade_allreduce_prediction(2.0, 4.7e-3, 1.2e-3) == 2.0
    with pytest.raises(CheckFailed, match="more than 4x apart") as failed:
        scoring.grade_allreduce_prediction(2.0, 0.2e-3, 1.2e-3)
    assert "parameters x 4" in str(failed.value)
    with pytest.raises(CheckFailed, match="not a positive number"):
        scoring.grade_allreduce_prediction(2.0, 1e-3, 0.0)


def test_the_report_reads_the_time_of_each_widths_gradient_off_the_same_series(tmp_path):
    table = measured(tmp_path, ranks=2)
    sizes = allreduce_report.gradient_bytes()
    assert (
        sizes[16] == 4 * sum(allreduce_report.parameter_arrays("vgg", 16))
        and sizes[64] > 15 * sizes[16]
    )
    [line] = allreduce_report.by_width(table, sizes)
    assert (
        line.startswith("ring, 2 ranks: the width-16 gradient (3.6 MiB)")
        and "16x the bytes" in line
    )
    ratio = float(line.split(": ")[-1].split("x the time")[0])
    assert 10 < ratio < 17  # the bandwidth term dominates at these sizes, latency adds a little

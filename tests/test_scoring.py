"""Points from job outputs (course.instructor.scoring, course.evidence, the report's self-checks).

Each run is made by hand with the kit's own writers: a results file (course.contracts.results.write)
and the job log with the lines the harness prints (course.contracts.joblog), as a real job leaves
them.
"""

from __future__ import annotations

import json

import pytest

from course import comparison, evidence
from course.contracts import results
from course.instructor import scoring
from course.notebook import report
from course.notebook.checks import CheckFailed
from tests.helpers import make_run

GRADING = """
[efficiency]
suspicious_above = 1.05

[efficiency.multi_gpu]
tiers = [[0.75, 1.0], [0.5, 0.5], [0.25, 0.25]]

[efficiency.multi_node]
tiers = [[0.7, 1.0], [0.5, 0.5], [0.25, 0.25]]

[efficiency.multi_node.cpu]
tiers = [[0.5, 1.0], [0.3, 0.5]]
suspicious_above = 1.25
"""


pytestmark = pytest.mark.usefixtures("grading_config")  # this module's GRADING (tests/conftest.py)


def failure(grade, *args, **kwargs) -> str:
    with pytest.raises(CheckFailed) as raised:
        grade(*args, **kwargs)
    return str(raised.value)


# --- a traced run -----------------------------------------------------------------------------


def test_a_traced_run_gets_its_points(folder, capsys):
    make_run(folder, "single_gpu", 1, 51.123)
    assert scoring.grade_run("single_gpu", 3, folder) == 3
    out = capsys.readouterr().out
    assert out == (
        "note: job 1.local was not checked against the scheduler's records: the local scheduler "
        "keeps no "
        "accounting\nOK: single_gpu-1.local (job 1.local): 51.1 img/s on 1 worker(s), "
        "traced to run_single_gpu_training.sh.o1\n"
    )


def test_an_edited_results_file_breaks_its_seal(folder):
    path, _ = make_run(folder, "single_gpu", 1, 50.0)
    record = json.loads(path.read_text())
    record["throughput"]["images_per_sec"] = 65.0
    path.write_text(json.dumps(record))
    message = failure(scoring.grade_run, "single_gpu", 3, folder)
    assert (
        "no single_gpu run can be traced to its job; the latest, single_gpu-1.local (job 1.local)"
        in message
    )
    assert "edited after the job wrote it (its seal does not match)" in message
    assert "images/sec in the results (65.00) is not what the log shows (50.00)" in message


def test_a_resealed_results_file_differs_from_the_digest_in_the_log(folder):
    path, digest = make_run(folder, "single_gpu", 1, 50.0)
    record = results.load(path)
    record["log"][0]["validation/main/accuracy"] = 0.9
    assert results.write(path, {k: v for k, v in record.items() if not k.startswith("_")}) != digest
    message = failure(scoring.grade_run, "single_gpu", 3, folder)
    assert (
        "the results file differs from the one job 1.local wrote (see its sha256 in "
        "run_single_gpu_training.sh.o1)" in message
    )
    assert "seal" not in message


def test_a_run_without_its_job_log_gets_nothing(folder):
    make_run(folder, "single_gpu", 1, 50.0, log=False)
    message = failure(scoring.grade_run, "single_gpu", 3, folder)
    assert "no job log *.o1 beside the notebooks" in message


def test_a_log_showing_another_throughput_does_not_trace(folder):
    make_run(folder, "single_gpu", 1, 50.0, logged_images_per_sec=50.01)
    message = failure(scoring.grade_run, "single_gpu", 3, folder)
    assert "images/sec in the results (50.00) is not what the log shows (50.01)" in message


def test_a_log_showing_another_worker_count_does_not_trace(folder):
    make_run(folder, "multi_node", 4, 90.0, workers=2, logged_workers=1, communicator="naive")
    message = failure(scoring.grade_run, "multi_node", 3, folder)
    assert "the log does not show a multi_node run of job 4.local with 2 worker(s)" in message


def test_a_log_that_does_not_name_the_results_file_does_not_trace(folder):
    make_run(folder, "single_gpu", 1, 50.0)
    log = folder / "run_single_gpu_training.sh.o1"
    log.write_text(
        "\n".join(line for line in log.read_text().splitlines() if "course: results" not in line)
    )
    message = failure(scoring.grade_run, "single_gpu", 3, folder)
    assert "the log run_single_gpu_training.sh.o1 does not name this results file" in message


def test_an_unfinished_run_gets_nothing(folder):
    make_run(folder, "single_gpu", 1, 50.0, complete=False)
    message = failure(scoring.grade_run, "single_gpu", 3, folder)
    assert "the run did not finish (KeyboardInterrupt: )" in message


def test_no_run_at_all_says_where_it_looked(folder):
    message = failure(scoring.grade_run, "single_gpu", 3, folder)
    assert f"there is no single_gpu run in {folder / 'runs'}/" in message


def test_an_older_traced_run_still_counts_after_an_untraced_one(folder, capsys):
    make_run(folder, "single_gpu", 1, 50.0, age=60)
    make_run(folder, "single_gpu", 2, 52.0, log=False)
    assert scoring.grade_run("single_gpu", 3, folder) == 3
    assert "single_gpu-1.local (job 1.local): 50.0 img/s" in capsys.readouterr().out


def test_a_script_changed_since_its_run_is_noted(folder, capsys):
    make_run(folder, "single_gpu", 1, 50.0)
    (folder / "train_cifar_single.py").write_text("# edited after the job\n")
    assert scoring.grade_run("single_gpu", 3, folder) == 3
    assert (
        "note: train_cifar_single.py has changed since this job ran it" in capsys.readouterr().out
    )


# --- efficiency against stage 1 ----------------------------------------------------------------


@pytest.mark.parametrize(
    "images_per_sec,points",
    [
        (210.0, 3),
        (140.0, 3),  # 1.05 (the ceiling itself) and 0.7
        (139.8, 1.5),
        (100.0, 1.5),  # just below 0.7, and 0.5
        (99.8, 0.75),
        (50.0, 0.75),  # just below 0.5, and 0.25
    ],
)
def test_efficiency_tiers_at_their_boundaries(folder, capsys, images_per_sec, points):
    make_run(folder, "single_gpu", 1, 100.0)
    make_run(folder, "multi_node", 2, images_per_sec, workers=2, communicator="pure_nccl")
    assert scoring.grade_efficiency("multi_node", 3, folder) == points
    assert f"efficiency {images_per_sec / 200:.3f} >= " in capsys.readouterr().out


def test_efficiency_below_the_last_tier_gets_nothing(folder):
    make_run(folder, "single_gpu", 1, 100.0)
    make_run(folder, "multi_node", 2, 49.8, workers=2, communicator="pure_nccl")
    message = failure(scoring.grade_efficiency, "multi_node", 3, folder)
    assert "efficiency 0.249, below 0.25" in message


def test_efficiency_above_the_ceiling_does_not_compare(folder):
    make_run(folder, "single_gpu", 1, 100.0)
    make_run(folder, "multi_node", 2, 212.0, workers=2, communicator="pure_nccl")
    message = failure(scoring.grade_efficiency, "multi_node", 3, folder)
    assert "efficiency 1.060, above 1.05: more than linear speedup" in message


@pytest.mark.parametrize(
    "images_per_sec,points", [(240.0, 3), (100.0, 3), (99.8, 1.5), (60.0, 1.5)]
)
def test_cpu_runs_use_their_own_tiers_and_ceiling(folder, images_per_sec, points):
    make_run(folder, "single_gpu", 1, 100.0, device_kind="cpu")
    make_run(
        folder, "multi_node", 2, images_per_sec, workers=2, device_kind="cpu", communicator="naive"
    )
    assert scoring.grade_efficiency("multi_node", 3, folder) == points


@pytest.mark.parametrize(
    "images_per_sec,words",
    [(59.8, "efficiency 0.299, below 0.3"), (252.0, "efficiency 1.260, above 1.25")],
)
def test_cpu_runs_below_their_last_tier_or_above_their_ceiling_get_nothing(
    folder, images_per_sec, words
):
    make_run(folder, "single_gpu", 1, 100.0, device_kind="cpu")
    make_run(
        folder, "multi_node", 2, images_per_sec, workers=2, device_kind="cpu", communicator="naive"
    )
    assert words in failure(scoring.grade_efficiency, "multi_node", 3, folder)


def test_a_stage_2_run_on_cpus_earns_nothing(folder):
    """Stage 2 is MultiprocessParallelUpdater on GPUs: a CPU run, e.g. one forged with the kit's
    writer, is refused."""
    make_run(folder, "single_gpu", 1, 100.0, device_kind="cpu")
    make_run(folder, "multi_gpu", 2, 140.0, workers=2, device_kind="cpu")
    message = failure(scoring.grade_efficiency, "multi_gpu", 4, folder)
    assert (
        "a multi_gpu run trains on GPUs, and this one shows devices @numpy, @numpy with GPU model "
        "none" in message
    )


def test_the_run_earning_the_most_below_the_ceiling_is_graded(folder, capsys):
    make_run(folder, "single_gpu", 1, 100.0)
    make_run(folder, "multi_node", 2, 190.0, workers=2, communicator="pure_nccl")  # 0.95
    make_run(
        folder, "multi_node", 3, 440.0, workers=4, communicator="pure_nccl"
    )  # 1.1: implausible
    make_run(folder, "multi_node", 4, 240.0, workers=4, communicator="non_cuda_aware")  # 0.6
    assert scoring.grade_efficiency("multi_node", 3, folder) == 3
    assert "multi_node-2.local (job 2.local): 190.0 img/s on 2 workers" in capsys.readouterr().out


def test_an_extra_run_on_more_workers_never_lowers_the_efficiency_points(folder):
    make_run(folder, "single_gpu", 1, 100.0)
    make_run(
        folder, "multi_node", 2, 180.0, workers=2, communicator="pure_nccl"
    )  # 0.9: all the points
    assert scoring.grade_efficiency("multi_node", 3, folder) == 3
    make_run(folder, "multi_node", 3, 220.0, workers=4, communicator="pure_nccl")  # 0.55: half
    assert scoring.grade_efficiency("multi_node", 3, folder) == 3
    make_run(folder, "multi_node", 4, 90.0, workers=8, communicator="pure_nccl")  # 0.11: nothing
    assert scoring.grade_efficiency("multi_node", 3, folder) == 3


def test_efficiency_is_the_best_against_any_comparable_stage_1_run(folder, capsys):
    make_run(folder, "single_gpu", 1, 100.0, age=60)
    make_run(
        folder, "multi_node", 2, 180.0, workers=2, communicator="pure_nccl"
    )  # 0.9 against job 1
    make_run(
        folder, "single_gpu", 3, 100.0, width=8
    )  # newer, and another model width: compares with nothing
    assert scoring.grade_efficiency("multi_node", 3, folder) == 3
    assert "against 100.0 img/s on 1 in single_gpu-1.local (job 1.local)" in capsys.readouterr().out


def test_efficiency_counts_stage_3s_own_one_rank_run_as_a_baseline(folder, capsys):
    """A stage-1 run made while the machine was busy makes every run seem too efficient; the
    one-rank run of stage 3's own comparison gives a baseline measured with it."""
    make_run(folder, "single_gpu", 1, 50.0, age=60)  # 2 x 50 against 180: 1.8, above the ceiling
    make_run(folder, "multi_node", 2, 100.0, workers=1, communicator="pure_nccl")
    make_run(folder, "multi_node", 3, 180.0, workers=2, communicator="pure_nccl")
    assert scoring.grade_efficiency("multi_node", 3, folder) == 3
    assert "against 100.0 img/s on 1 in multi_node-2.local (job 2.local)" in (
        capsys.readouterr().out
    )


@pytest.mark.parametrize(
    "change,difference",
    [
        (dict(width=8), "model width: 8 here, 16 in stage 1"),
        (dict(device_kind="cpu"), "device kind: cpu here, gpu in stage 1"),
    ],
)
def test_runs_that_do_not_compare_with_stage_1_get_nothing(folder, change, difference):
    make_run(folder, "single_gpu", 1, 100.0)
    make_run(folder, "multi_node", 2, 180.0, workers=2, communicator="naive", **change)
    message = failure(scoring.grade_efficiency, "multi_node", 3, folder)
    assert (
        f"no traced multi_node run on 2 or more workers compares with stage 1 ({difference}"
        in message
    )


def test_efficiency_needs_a_traced_stage_1_run(folder):
    make_run(folder, "single_gpu", 1, 100.0, log=False)
    make_run(folder, "multi_node", 2, 180.0, workers=2, communicator="naive")
    assert "no traced stage-1 run to compare with" in failure(
        scoring.grade_efficiency, "multi_node", 3, folder
    )


def test_a_single_rank_run_is_no_scaling_run(folder):
    make_run(folder, "single_gpu", 1, 100.0)
    make_run(folder, "multi_node", 2, 95.0, communicator="naive")
    message = failure(scoring.grade_efficiency, "multi_node", 3, folder)
    assert (
        "no traced multi_node run on 2 or more workers compares with stage 1 (none found)"
        in message
    )


# --- stage 3's comparison ---------------------------------------------------------------------


def comparison_runs(folder, settings):
    for number, (workers, allreduce) in enumerate(settings, start=1):
        make_run(
            folder,
            "multi_node",
            number,
            90.0 * workers,
            workers=workers,
            device_kind="cpu",
            communicator="naive",
            allreduce=allreduce,
        )


def test_two_rank_counts_and_two_settings_pass_the_comparison(folder, capsys):
    comparison_runs(folder, [(1, None), (2, None), (2, "ring")])
    assert scoring.grade_comparisons(1, folder) == 1
    out = capsys.readouterr().out.splitlines()
    assert (
        out[-1]
        == "OK: stage-3 runs compare rank counts [1, 2] and communication settings ['naive', "
        "'naive/ring']"
    )
    assert out[:-1] == [
        f"note: job {n}.local was not checked against the scheduler's records: the local scheduler "
        "keeps no accounting"
        for n in (1, 2, 3)
    ]


def test_an_extra_run_never_lowers_the_comparison(folder):
    comparison_runs(folder, [(1, None), (2, None), (2, "ring"), (4, None)])
    (folder / "run_multi_node_training.sh.o4").write_text(
        "forged\n"
    )  # an extra run that does not count
    assert scoring.grade_comparisons(1, folder) == 1


@pytest.mark.parametrize(
    "settings,covered",
    [
        ([(1, None), (2, None)], "rank counts [1, 2] and communication settings ['naive']"),
        (
            [(2, None), (2, "ring")],
            "rank counts [2] and communication settings ['naive', 'naive/ring']",
        ),
        ([], "rank counts [] and communication settings []"),
    ],
)
def test_fewer_rank_counts_or_settings_fail_the_comparison(folder, settings, covered):
    comparison_runs(folder, settings)
    message = failure(scoring.grade_comparisons, 1, folder)
    assert f"traced stage-3 runs cover {covered}" in message and "at least 2 of each" in message


def test_an_untraced_run_is_left_out_of_the_comparison_and_named(folder):
    comparison_runs(folder, [(1, None), (2, None), (2, "ring")])
    (folder / "run_multi_node_training.sh.o3").unlink()
    message = failure(scoring.grade_comparisons, 1, folder)
    assert (
        "settings ['naive']; multi_node-3.local (job 3.local) does not count: no job log *.o3"
        in message
    )


def test_comparison_coverage_counts_traced_runs_only(folder):
    comparison_runs(folder, [(1, None), (2, None), (4, "ring")])
    log = folder / "run_multi_node_training.sh.o3"
    kept = log.read_text()
    log.unlink()
    coverage = comparison.comparison_coverage(evidence.runs("multi_node", folder))
    assert (coverage.rank_counts, coverage.settings, coverage.complete) == (
        [1, 2],
        ["naive"],
        False,
    )
    log.write_text(kept)
    coverage = comparison.comparison_coverage(evidence.runs("multi_node", folder))
    assert (coverage.rank_counts, coverage.settings, coverage.complete) == (
        [1, 2, 4],
        ["naive", "naive/ring"],
        True,
    )


# --- the notebooks' visible self-checks ---------------------------------------------------------


def test_check_runs_says_ok_for_a_traced_run(folder, capsys):
    make_run(folder, "single_gpu", 1, 51.0)
    [run] = report.check_runs("single_gpu", folder)
    assert run.traced
    assert capsys.readouterr().out == (
        "single_gpu-1.local (job 1.local): 51.0 img/s, 1 worker(s) "
        "[OK, traced to run_single_gpu_training.sh.o1]\n"
    )


def test_check_runs_says_which_run_will_not_count_and_why(folder, capsys):
    make_run(folder, "single_gpu", 1, 51.0, log=False)
    report.check_runs("single_gpu", folder)
    out = capsys.readouterr().out
    assert "[WILL NOT COUNT: no job log *.o1 beside the notebooks" in out and "OK" not in out


def test_check_runs_without_runs_says_to_submit(folder, capsys):
    assert report.check_runs("multi_node", folder) == []
    assert capsys.readouterr().out.startswith("No multi_node run yet in ")


def test_check_comparison_says_ok_or_not_yet(folder, capsys):
    comparison_runs(folder, [(1, None), (2, None)])
    assert not report.check_comparison(folder).complete
    assert capsys.readouterr().out.startswith(
        "NOT YET: traced stage-3 runs cover rank counts [1, 2] and "
        "communication settings ['naive']; the comparison needs at least 2"
    )
    make_run(
        folder,
        "multi_node",
        3,
        170.0,
        workers=2,
        device_kind="cpu",
        communicator="naive",
        allreduce="ring",
    )
    assert report.check_comparison(folder).complete
    assert capsys.readouterr().out.startswith(
        "OK: traced stage-3 runs cover rank counts [1, 2] and communication "
        "settings ['naive', 'naive/ring']."
    )

"""The step profile (`qsub -v PROFILE=1`): a real 2-rank stage-3 job under the kit's local
scheduler, its phases per rank in the log and the results file, and what notebook 03 shows of it."""

from __future__ import annotations

from pathlib import Path

import pytest

from course import evidence
from course.contracts import jobend, joblog, stages
from course.lessons.step_time import allreduce_report, profile_report
from course.runtime import profile
from tests.helpers import student_folder
from tests.mpi_helpers import measured, nsys_job_log, submit_stage_3

pytestmark = pytest.mark.slow
TRAIN_ARGS = "--model vgg --width 8 --batchsize 32 --epoch 2 --warmup 2"


@pytest.fixture(scope="module")
def profiled(quick_env, tmp_path_factory):
    """A student's folder after one profiled 2-rank stage-3 job, its data set staged to node-local
    storage (STAGE_DATA=1: a few milliseconds more)."""
    folder = student_folder(tmp_path_factory.mktemp("profile"), "student", stages.MULTI_NODE.name)
    job = submit_stage_3(folder, quick_env, TRAIN_ARGS, PROFILE="1", STAGE_DATA="1")
    assert job.exit_status() == 0, job.find_log().read_text()
    return folder, job


def test_the_job_trains_from_its_staged_copy_of_the_data_set(profiled, quick_env):
    folder, job = profiled
    [staged] = joblog.staged(joblog.read(job.find_log()))
    shared = data_dir_of(quick_env) / f"{quick_env['COURSE_DATASET']}.npz"
    copy = Path(staged["path"])
    assert staged["name"] == quick_env["COURSE_DATASET"] and copy.name == shared.name
    assert staged["bytes"] == shared.stat().st_size and 0 <= staged["seconds"] < 60
    assert not copy.is_relative_to(quick_env["CHAINER_DATASET_ROOT"]) and not copy.exists()
    [run] = evidence.runs(stages.MULTI_NODE.name, folder)
    assert run.traced and run.record["dataset"]["name"] == quick_env["COURSE_DATASET"]


def data_dir_of(env: dict[str, str]) -> Path:
    return Path(env["CHAINER_DATASET_ROOT"], "pfnet", "chainer", "cifar")


def test_every_rank_reports_its_phases_and_they_make_up_its_step(profiled):
    folder, job = profiled
    log = job.find_log().read_text()
    lines = [line for line in log.splitlines() if line.startswith("course: profile rank ")]
    assert len(lines) == 2 and "| allreduce " in lines[0] and "(median of " in lines[0], log
    assert all(line.endswith(" of a core)") for line in lines), lines
    [run] = evidence.runs(stages.MULTI_NODE.name, folder)
    assert run.traced, run.problems
    ranks = run.record["profile"]["ranks"]
    assert [r["rank"] for r in ranks] == [0, 1] and run.record["profile"]["phases"] == list(
        profile.PHASES
    )
    assert [profile.line(r) for r in ranks] == lines
    for r in ranks:
        ms = r["median_ms"]
        counted = run.record["throughput"]
        steps = (
            counted["counted_iterations"]
            + counted["warmup_iterations"]
            + counted["excluded_iterations"]
        )
        assert r["steps"] == steps - 1 - 2, (
            r
        )  # less the first (it broadcasts the weights) and the warm-up
        # compute and the exchange take time on every rank; the barrier wait may be ~0 on the slower
        # one
        assert all(
            ms[phase] > 0 for phase in ("data", "forward", "backward", "allreduce", "update")
        ), ms
        assert ms["wait"] >= 0 and ms["other"] >= 0
        # the share of a core the rank's process got over its steady steps: one thread per rank
        # (OMP_NUM_THREADS=1), so at most about one core; how much less is the machine's load
        assert 0 < r["cpu_share"] <= 1.1, r
        # where the cuts fall: the network's passes outweigh reading a batch and the optimizer's
        # update
        assert min(ms["forward"], ms["backward"]) > max(ms["data"], ms["update"]), ms
        # a median step is no longer than the mean interval images/sec implies (that one also holds
        # the extensions and every slow step of a shared machine)
        assert sum(ms.values()) < 1.2 * 1000 * 64 / run.images_per_sec, ms


def test_the_notebook_shows_a_bar_per_rank_and_the_measured_allreduce(profiled):
    folder, _ = profiled
    rows = profile_report.rows(folder)
    assert [(row["ranks"], row["rank"]) for row in rows] == [(2, 0), (2, 1)]
    measured = profile_report.measured_allreduce_seconds(folder)
    [run] = evidence.runs(stages.MULTI_NODE.name, folder)
    assert (
        measured["ranks"] == 2
        and measured["gradient_bytes"] == 4 * run.record["model"]["parameters"]
        and measured["device_kind"] == "cpu"  # so the cell grades the step's own exchange
    )
    assert 0 < measured["seconds"] < 1
    # the lowest share of its ranks: below grading.toml's shared_below, the cores were shared and
    # the prediction is compared with the kit's model instead of this measurement
    assert measured["cpu_share"] == min(r["cpu_share"] for r in run.record["profile"]["ranks"])
    figure = profile_report.plot(folder)
    bars = figure.axes[0].patches
    assert len(bars) == 2 * len(profile.PHASES)  # one segment per phase in each rank's bar
    assert [t.get_text() for t in figure.axes[0].get_legend().get_texts()] == list(
        reversed(profile.PHASES)
    )


def test_nsys_where_there_is_none_ends_the_job_saying_so(profiled):
    folder, _ = profiled
    log = nsys_job_log(folder)
    assert "PROFILE=nsys: nsys (Nsight Systems) is not on this node's PATH" in log
    assert jobend.end(log).status == 2


def test_the_demo_prints_the_profiles_the_fits_and_the_prediction_against_the_profile(profiled):
    folder, _ = profiled
    measured(folder, ranks=2, algorithm="ring")  # a benchmark's files, as its job leaves them
    lines = allreduce_report.summary(folder)
    assert [line.split(" on ")[0] for line in lines[:2]] == [
        "step profile, 2 rank(s), rank 0",
        "step profile, 2 rank(s), rank 1",
    ]
    assert lines[2].startswith("allreduce fit, ring on 2 ranks: alpha ")
    [run] = evidence.runs(stages.MULTI_NODE.name, folder)
    assert lines[3].startswith(
        f"gradient allreduce of {run.path.parent.name} "
        f"({run.record['model']['parameters']:,} parameters, ring on 2 ranks): predicted "
    )
    assert "measured " in lines[3] and "(ratio " in lines[3]

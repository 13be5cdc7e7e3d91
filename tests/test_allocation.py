"""`python -m course plan`: the course's node-hours and GPU-hours against hand computations."""

from __future__ import annotations

import json
import shutil

import pytest

from course import cli
from course.cluster import sites
from course.errors import CourseError
from course.instructor import allocation
from tests.helpers import ROOT


@pytest.fixture
def site(tmp_path, monkeypatch):
    """A kit folder with a site profile applied to its jobs/; the site's batch, not the caller's."""
    monkeypatch.delenv("COURSE_TRAIN_ARGS", raising=False)

    def applied(name: str):
        shutil.copytree(ROOT / "jobs", tmp_path / "jobs", dirs_exist_ok=True)
        sites.apply(sites.load_profile(name), tmp_path / "jobs")
        return tmp_path

    return applied


def test_a_gpu_site_budgets_every_job_the_notebooks_submit(site):
    # Reedbush-H: 2 GPUs per node, walltime 20 min per training job, 10 for the benchmark;
    # stage 3 compares 1x2 and 2x2 with pure_nccl, then on 2x2: non_cuda_aware, the constant and
    # linear rules, strong scaling (32 // 4 = 8 per rank); two step profiles (1x1, 2x2); the
    # benchmark on 2 ranks of one node and 4 ranks on two (one rank per GPU), 10 min each, for
    # notebook 03 and again for notebook 04; notebook 05's model-parallel job on 2 CPU ranks of one
    # node, 10 min.
    budget = allocation.budget(site("reedbush-h"), students=30, resubmit=2)
    # stages 1, 2, 3, profiles, the two benchmarks, the model-parallel job
    nodes = [1, 1] + [1, 2, 2, 2, 2, 2] + [1, 2] + [1, 2] + [1, 2] + [1]
    gpus = [1, 2] + [2, 4, 4, 4, 4, 4] + [1, 4] + [0, 0] + [0, 0] + [0]
    minutes = [20] * 10 + [10, 10] * 2 + [10]
    assert [job.nodes for job in budget.jobs] == nodes
    assert [job.gpus for job in budget.jobs] == gpus
    assert [job.seconds for job in budget.jobs] == [60 * m for m in minutes]
    assert {job.source for job in budget.jobs} == {"walltime"}
    # per student: (10 x 20 min on 1 or 2 nodes, twice 10 min on 1 and on 2, 10 min on 1) = 6.5
    # node-hours, 10 GPU-hours; x2
    assert budget.node_hours == pytest.approx(2 * (16 * 20 + 2 * 30 + 10) / 60) == pytest.approx(13)
    assert budget.gpu_hours == pytest.approx(2 * 30 * 20 / 60) == pytest.approx(20.0)
    assert (budget.peak_nodes, budget.peak_gpus) == (60, 120)
    assert budget.reservation_hours == pytest.approx(2 * 250 / 60)
    assert "stage 3: 2 node(s) x 2 rank(s), pure_nccl, lr rule constant, strong scaling (8" in (
        budget.jobs[7].what
    )
    assert budget.jobs[-4].what == "allreduce benchmark: 2 node(s) x 2 ranks"
    assert budget.jobs[-2].what == (
        "allreduce benchmark, ring against parameter server: 2 node(s) x 2 ranks"
    )
    assert (
        budget.jobs[-1].what == "model against data parallelism (notebook 08): 1 node(s) x 2 ranks"
    )
    assert budget.left_out == []
    said = allocation.render(budget)
    assert "class of 30: 390.0 node-hours, 600.0 GPU-hours" in said
    assert "largest simultaneous demand: 60 nodes (120 GPUs)" in said
    assert "We request 390.0 node-hours (600.0 GPU-hours) on reedbush-h" in said
    assert "reservation (or a dedicated queue) of 60 nodes for 8.33 hours" in said


def test_a_cpu_site_leaves_stage_2_out_and_counts_no_gpu(site):
    # slurm-cpu: no GPUs, 30 min per training job; stage 3 on 1x1, 1x2, 2x2 with naive, then on
    # 2x2: naive/ring, constant, linear, strong (64 // 4 = 16); profiles 1x1 and 2x2; benchmark
    # on 2 and 4 ranks of one node, 10 min each, for notebooks 03 and 04, and the model-parallel
    # job on 2, 10 min.
    budget = allocation.budget(site("slurm-cpu"), students=12, resubmit=1.5)
    assert [job.nodes for job in budget.jobs] == [1, 1, 1, 2, 2, 2, 2, 2, 1, 2, 1, 1, 1, 1, 1]
    assert {job.gpus for job in budget.jobs} == {0}
    assert budget.left_out[0].startswith("stage 2: the site profile declares 0 GPU(s) per node")
    node_hours = 1.5 * ((1 + 12 + 3) * 30 + 5 * 10) / 60
    assert budget.node_hours == pytest.approx(node_hours) == pytest.approx(13.25)
    assert (budget.gpu_hours, budget.peak_nodes, budget.peak_gpus) == (0, 24, 0)
    text = allocation.request(budget)
    assert "We request 159.0 node-hours on slurm-cpu" in text and "GPU" not in text


def test_bad_input_is_said_with_its_fix(site, tmp_path, capsys):
    folder = site("reedbush-h")
    assert cli.main(["plan", "--students", "0", "--folder", str(folder)]) == 2
    said = capsys.readouterr().err
    assert "--students 0 and --resubmit 2: a plan needs at least 1 of each" in said
    (tmp_path / "empty").mkdir()
    assert cli.main(["plan", "--students", "3", "--measured", str(tmp_path / "empty")]) == 2
    said = capsys.readouterr().err
    assert "no runs in" in said and "-> give the folder the dry run's jobs were submitted" in said
    assert cli.main(["plan", "--students", "3", "--folder", str(tmp_path / "empty")]) == 2
    assert "jobs/site_env.sh does not exist" in capsys.readouterr().err


@pytest.mark.slow
def test_measured_times_are_the_dry_runs_own(student_run, quick_env, monkeypatch):
    """The solved student's runs (the local profile, CPU) as the dry run: each training job takes
    the wall time its results file recorded."""
    monkeypatch.setenv("COURSE_TRAIN_ARGS", quick_env["COURSE_TRAIN_ARGS"])  # as the jobs ran
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    measured = allocation.measured_runs(student_run)
    budget = allocation.budget(student_run, 2, 1.0, measured)
    # the benchmarks' and notebook 05's jobs take their walltimes (allocation.budget)
    training = [job for job in budget.jobs if job.what.startswith("stage")]
    assert training and all(job.source != "walltime" for job in training), budget.jobs
    assert len({job.source for job in training}) == len(training), "each job its own run"
    for job in training:
        record = json.loads((student_run / "runs" / job.source / "results.json").read_text())
        assert job.seconds == record["wall_seconds"]
        if job.what == "stage 1":
            assert record["stage"] == "single_gpu"
    assert budget.node_hours == pytest.approx(sum(job.node_hours for job in budget.jobs))
    assert "measured in a dry run" in allocation.request(budget)
    with pytest.raises(CourseError, match="no runs in"):
        allocation.measured_runs(student_run / "jobs")

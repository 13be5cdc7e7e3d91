"""`python -m course site verify` on the local profile: the kit's own scheduler runs the course's
jobs on this machine (no GPU here: the GPU checks say so); `course plan` budgets from the run."""

from __future__ import annotations

import json
import subprocess

import pytest

from course.diagnostics import probe
from course.instructor.site_checks import NO_GPU
from course.instructor.site_report import Report
from tests import site_verify_helpers as sv
from tests.helpers import PYTHON

pytestmark = [pytest.mark.slow]


@pytest.fixture(scope="module")
def local_kit(tmp_path_factory):
    folder = tmp_path_factory.mktemp("verify-local")
    return sv.kit(folder / "kit", sv.profile("local", folder))


@pytest.fixture(scope="module")
def verified(local_kit, quick_env):
    out = local_kit.parent / "verify"
    run, report = sv.verify(local_kit, out, quick_env)
    return run, report, out


def test_every_check_passes_on_this_machine_and_the_gpu_ones_say_there_is_no_gpu(verified):
    run, report, out = verified
    assert run.returncode == 0, run.stdout + run.stderr
    found = sv.checks(report)
    assert found["GPUs visible per rank, and their binding"] == ("skipped", NO_GPU, "")
    assert found["cuDNN and NCCL working"] == ("skipped", NO_GPU, "")
    assert found["stage 2: runs, and fits its walltime"][:2] == (
        "skipped",
        "no GPUs on these nodes (gpus_per_node < 2)",
    )
    status, said, _ = found["MPI reaching every node"]
    assert status == "ok" and said.startswith("2 rank(s) on "), said
    for name in ("stage 1: runs, and fits its walltime", "stage 3: runs, and fits its walltime"):
        status, said, _ = found[name]
        assert status == "ok" and "an epoch took" in said and "walltime 00:30:00" in said, said
    assert found["the data set readable from the compute nodes"][0] == "ok"
    assert (
        "(1024 training / 256 test images)"
        in found["the data set readable from the compute nodes"][1]
    )
    assert found["job logs joined"][0] == "ok"
    assert found["allreduce benchmark"][:2] == (
        "ok",
        "2 burst(s) of recursive_doubling, ring on 2 ranks",
    )
    assert found["stage-3 efficiency against grading.toml's tiers"][0] in ("ok", "warn")
    assert (
        "tiers on cpu: 0.5: 100%, 0.3: 50%"
        in found["stage-3 efficiency against grading.toml's tiers"][1]
    )
    versions = report.versions
    assert versions["chainer"] == "7.8.1" and versions["python"].startswith("3.11")
    assert versions["chainermn"] and versions["mpi4py"] and "Open MPI" in versions["mpi"]
    assert versions["cupy"] is None  # not installed here: said, not an error
    # Each job: where it ran and how long, as its log and results say.
    jobs = {job.what: job for job in report.jobs}
    assert jobs["stage 3"].hosts and len(jobs["stage 3"].hosts) == 2
    assert jobs["stage 3"].request == "1 node(s) x 2 rank(s)"
    assert jobs["stage 2"].job_id is None and jobs["stage 1"].exit_status == 0
    assert all(job.seconds and job.seconds > 0 for job in report.jobs if job.job_id)
    # The terminal: a line per change of state, with the time since the start; then the summary.
    assert "stage 1 (job " in run.stdout and ": running" in run.stdout
    assert ": ended with exit status 0" in run.stdout and "every check passed" in run.stdout
    markdown = (out / "report.md").read_text()
    assert "**All 11 checks passed.**" in markdown and "| stage 3 |" in markdown
    assert "## Versions on the compute nodes" in markdown and "- chainer: 7.8.1" in markdown


def test_its_json_holds_the_report_as_the_dataclasses_type_it(verified):
    _, report, out = verified
    text = (out / "report.json").read_text()
    assert Report.from_json(text) == report and json.loads(text)["site"] == "local-verify"
    assert all(check.status in ("ok", "warn", "fail", "skipped") for check in report.checks)


def test_plan_budgets_the_course_from_the_verify_run(verified, local_kit, quick_env):
    _, report, out = verified
    said = sv.plan(local_kit, out, quick_env)
    stage1 = next(line for line in said.splitlines() if line.strip().startswith("stage 1 "))
    [job] = [job for job in report.jobs if job.what == "stage 1"]
    assert stage1.split()[-1] == f"single_gpu-{job.job_id}", said
    assert "measured in a dry run of the course on this system" in said


@pytest.mark.extended  # a failed check: the other tests here
def test_a_data_set_the_nodes_cannot_read_fails_and_says_how_to_fix_it(local_kit, quick_env):
    out = local_kit.parent / "verify-no-data"
    run, report = sv.verify(local_kit, out, {**quick_env, "COURSE_DATASET": "not-prepared"})
    assert run.returncode == 1, run.stdout + run.stderr
    status, said, fix = sv.checks(report)["the data set readable from the compute nodes"]
    assert status == "fail" and "data set 'not-prepared' is not prepared" in said, said
    assert fix.startswith("prepare the data set where the compute nodes read it"), fix
    assert sv.checks(report)["stage 1: runs, and fits its walltime"][0] == "fail"
    assert f"-> {fix}" in run.stdout and "check(s) failed" in run.stdout
    probe_log = out / next(j.log for j in report.jobs if j.what.startswith("environment"))
    assert probe.STDERR_MARK in probe_log.read_text()


def test_jobs_that_outlast_the_timeout_are_named_with_how_to_cancel_them(tmp_path, quick_env):
    # Its jobs take two minutes to set up (the profile's setup sleeps): they outlast a 1-s timeout.
    slow = {"setup": 'setup = ["sleep 120"]'}
    kit = sv.kit(tmp_path / "kit", sv.profile("local", tmp_path, **slow))
    run, report = sv.verify(kit, tmp_path / "verify", quick_env, timeout=1)
    probe_job, *others = [job for job in report.jobs if not job.note.startswith("skipped")]
    # It goes on running: stop it.
    cancel = subprocess.run(
        [PYTHON, "-m", "course", "cancel", probe_job.job_id],
        env=quick_env,
        capture_output=True,
        text=True,
    )
    assert cancel.returncode == 0, cancel.stdout + cancel.stderr
    assert run.returncode == 1, run.stdout + run.stderr
    assert probe_job.exit_status is None, run.stdout
    assert probe_job.note == (
        "had not ended after 1 s: it goes on running; cancel it with "
        f"python -m course cancel {probe_job.job_id}, or give verify a longer --timeout"
    )
    assert probe_job.note in run.stdout
    assert [job.note for job in others] == [
        "not submitted: verify's --timeout of 1 s had passed"
    ] * 3, run.stdout
    assert sv.checks(report)["modules and Python environment on the compute nodes"][0] == "fail"

"""`python -m course site verify` through a real Slurm scheduler, on the one-node cluster of the
tests (tests/slurm_cluster.py), with a profile whose stage walltimes are too short for its epochs:
the failing case, and `course plan` reading the run. The two-node cluster:
test_site_verify_two_nodes.py."""

from __future__ import annotations

import platform

import pytest

from course.instructor.site_checks import NO_GPU
from tests import site_verify_helpers as sv

pytestmark = [pytest.mark.slurm, pytest.mark.slow]
# One run of the one-node profile: 400 epochs of the tests' settings cannot fit 5 minutes.
SHORT = {
    "train_args": 'train_args = "--model vgg --width 8 --batchsize 32 --epoch 400 --warmup 2"',
    "runs": 'runs = ["1x1", "1x2"]',  # one node: stage 3's largest run fits it
}


@pytest.fixture(scope="module")
def one_node(cluster, tmp_path_factory, quick_env):
    folder = tmp_path_factory.mktemp("verify-slurm")
    path = sv.profile("slurm-cpu", folder)
    text = path.read_text()
    for start, line in SHORT.items():  # after profile(): its train_args are the tests' own
        text = "\n".join(line if row.startswith(start) else row for row in text.splitlines())
    text = text.replace('walltime = "00:30:00"', 'walltime = "00:05:00"')
    path.write_text(text + "\n")
    kit = sv.kit(folder / "kit", path)
    run, report = sv.verify(kit, folder / "verify", cluster.env(quick_env))
    return kit, folder / "verify", run, report


def test_a_walltime_too_short_for_the_sites_epochs_fails_and_names_the_walltime_to_ask(one_node):
    _, _, run, report = one_node
    assert run.returncode == 1, run.stdout + run.stderr
    found = sv.checks(report)
    status, said, fix = found["stage 1: runs, and fits its walltime"]
    assert status == "fail" and "the site's 400 epoch(s) need about" in said, said
    # The one-node cluster's node is this machine: its ranks and runs name this host.
    assert "walltime 00:05:00" in said and f"ran on {platform.node()} in " in said, said
    assert fix.startswith(
        "the walltime is too short: set [jobs.run_single_gpu_training] walltime to at least "
    ), fix
    assert f"-> {fix}" in run.stdout
    # The rest works on this cluster: the failure is the walltime's alone.
    for name in (
        "modules and Python environment on the compute nodes",
        "the data set readable from the compute nodes",
        "job logs joined",
        "MPI reaching every node",
        "allreduce benchmark",
    ):
        assert found[name][0] == "ok", (name, found[name])
    assert found["GPUs visible per rank, and their binding"][:2] == ("skipped", NO_GPU)
    assert found["MPI reaching every node"][1] == f"2 rank(s) on {platform.node()} x2"
    jobs = {job.what: job for job in report.jobs}
    assert jobs["stage 1"].log == f"run_single_gpu_training.sh.o{jobs['stage 1'].job_id}"
    assert report.scheduler == "slurm" and "queued" in run.stdout


def test_plan_reads_the_slurm_verify_run(one_node, cluster, quick_env):
    kit, out, _, report = one_node
    said = sv.plan(kit, out, cluster.env(quick_env))
    [stage1] = [job for job in report.jobs if job.what == "stage 1"]
    assert f"single_gpu-{stage1.job_id}" in said, said

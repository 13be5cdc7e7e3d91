"""The course's job scripts under a real Slurm scheduler, submitted with `qsub -j oe` as students do."""
from __future__ import annotations

import shutil
import subprocess

import pytest

from course import evidence, paths
from course.cluster import sites, submit
from tests import slurm_cluster
from tests.conftest import PYTHON, ROOT

pytestmark = [pytest.mark.slurm, pytest.mark.slow]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    try:
        running = slurm_cluster.start(tmp_path_factory.mktemp("slurm"))
    except slurm_cluster.Unavailable as e:
        pytest.skip(f"no Slurm cluster here: {e}")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SLURM_CONF", str(running.conf))  # for qstat, which Job.wait runs from this process
        yield running
    running.stop()


@pytest.fixture
def assignment(student_run, tmp_path):
    """The solved assignment, its job scripts set up for the Slurm cluster, its job outputs removed."""
    folder = tmp_path / paths.ASSIGNMENT
    shutil.copytree(student_run, folder, ignore=shutil.ignore_patterns("runs", "*.o*"))
    sites.apply(sites.load_profile(str(ROOT / "sites" / "slurm-cpu.toml")), folder / "jobs")
    return folder


def test_stage1_job_submitted_with_qsub(cluster, assignment, quick_env):
    env = cluster.env(quick_env)
    run = subprocess.run(["qsub", "-j", "oe", "jobs/run_single_gpu_training.sh"], cwd=assignment, env=env,
                         capture_output=True, text=True, check=True)
    job = submit.Job(run.stdout.strip(), assignment, "qsub")
    assert job.wait(timeout=600, echo=None, poll=2) == 0, job.find_log().read_text()
    assert job.find_log().name == f"run_single_gpu_training.sh.o{job.number}"  # as -j oe names it
    [run_] = evidence.runs("single_gpu", assignment)
    assert run_.traced, run_.problems
    assert run_.record["job"] == {"id": job.id, "scheduler": "slurm", "name": "run_single_gpu_training.sh"}


def test_stage3_job_through_course_submit_with_mpi_ranks(cluster, assignment, quick_env):
    env = cluster.env(quick_env)
    run = subprocess.run([PYTHON, "-m", "course", "submit", "jobs/run_multi_node_training.sh",
                          "-l", "select=1:mpiprocs=2", "-v", "ALLREDUCE=ring"], cwd=assignment, env=env,
                         capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "2 slot(s) on 1 node(s): localhost x2" in run.stdout
    [run_] = evidence.runs("multi_node", assignment)
    assert run_.traced, run_.problems
    assert (run_.workers, run_.setting, run_.record["job"]["scheduler"]) == (2, "naive/ring", "slurm")


def test_a_request_the_cluster_cannot_meet_is_refused_at_submission(cluster, assignment, quick_env):
    run = subprocess.run([PYTHON, "-m", "course", "submit", "jobs/run_multi_gpu_training.sh"], cwd=assignment,
                         env=cluster.env(quick_env), capture_output=True, text=True)
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert "qsub refused" in run.stderr and "Invalid generic resource" in run.stderr

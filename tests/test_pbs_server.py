"""The course's job scripts on a real OpenPBS server with two moms (tests/pbs_cluster.py), set up
with the kit's `reedbush-h` profile and submitted with `qsub -j oe` as students do: one-node jobs on
whichever node PBS picks, and stage 3 across both nodes; the evidence checked against PBS's own
accounting (`qstat -x -f`). tests/test_pbs.py tests the directives without a server."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest

import course
from course import evidence, paths
from course.cluster import accounting, submit
from course.cluster.accounting import Accounting
from course.contracts import jobend, joblog, results
from tests import pbs_cluster, pbs_profile, pbs_ssh
from tests.helpers import PYTHON

# The first test's set-up may build OpenPBS (about 5 min on two idle cores, 10 under load).
pytestmark = [pytest.mark.pbs, pytest.mark.slow, pytest.mark.timeout(2400)]


@pytest.fixture(scope="module")
def pbs(pbs_two_nodes):
    """One cluster for the module: the second mom costs seconds, a second server a minute."""
    return pbs_two_nodes


@pytest.fixture(scope="module")
def assignment(solved_assignment, quick_env, tmp_path_factory):
    """The solved assignment, its job scripts set up with reedbush-h as this cluster needs it, its
    job outputs removed."""
    folder = tmp_path_factory.mktemp("pbs-student") / paths.ASSIGNMENT
    return pbs_profile.assignment(solved_assignment, folder, quick_env)


def fresh_copy(assignment: Path, folder: Path) -> Path:
    """The assignment set up for this cluster, without the runs and logs of earlier tests."""
    shutil.copytree(assignment, folder, ignore=shutil.ignore_patterns("runs", "*.o*"))
    return folder


def qstat_fields(job: submit.Job) -> dict:
    said = subprocess.run(
        ["qstat", "-x", "-f", "-F", "json", job.id], capture_output=True, text=True, check=True
    ).stdout
    return accounting.qstat_job(said)


def exec_hosts(fields: dict[str, str]) -> list[str]:
    """The nodes PBS ran a job on, from `exec_host` (`pnode1/0+pnode2/0`)."""
    return [chunk.split("/")[0] for chunk in fields["exec_host"].split("+")]


def test_stage1_submitted_with_qsub_is_traced_and_matches_pbs_accounting(
    pbs, assignment, quick_env
):
    job = pbs.start_qsub(assignment, quick_env, "jobs/run_single_gpu_training.sh")
    assert job.id.endswith(f".{pbs_cluster.NODE}"), job.id
    code = job.wait(timeout=600, echo=None, poll=1)
    assert code == 0, job.log_text()[-3000:]
    assert job.find_log().name == f"run_single_gpu_training.sh.o{job.number}"  # as -j oe names it
    fields = qstat_fields(job)
    assert (fields["job_state"], fields["Exit_status"]) == ("F", 0)
    assert fields["queue"] == pbs_cluster.QUEUE and fields["Join_Path"] == "oe"
    assert fields["group_list"] == "root"  # the profile's -W group_list
    [run_] = evidence.runs("single_gpu", assignment, Accounting(student="s", user="root"))
    assert run_.traced, run_.problems
    assert run_.record["job"] == {
        "id": job.id,
        "scheduler": "pbs",
        "name": "run_single_gpu_training.sh",
    }
    assert run_.record["hosts"] == exec_hosts(fields)
    assert exec_hosts(fields)[0] in pbs_cluster.NODES
    [checked] = [note for note in run_.notes if note.startswith(f"job {job.id} checked against")]
    account = accounting.lookup("pbs", job.id).account
    assert account is not None and account.source == "qstat -x -f"
    assert (account.user, account.nodes, account.gpus) == ("root", 1, None)  # no ngpus asked
    assert account.elapsed + accounting.ELAPSED_SLACK >= run_.record["wall_seconds"] > 0, checked


def test_the_fixtures_leftover_check_sees_the_running_cluster(pbs):
    """The check the `pbs` fixture makes after stopping the cluster finds it while it runs."""
    found = pbs_cluster.leftovers(pbs)
    assert f"link {pbs_cluster.BRIDGE}" in found, found
    for node in pbs_cluster.NODES:
        space = pbs_cluster.namespace(node)
        assert f"network namespace {space}" in found and f"link crs-{node}" in found, found
        assert f"mount on /run/netns/{space}" in found, found
    assert any(str(pbs.exec_) in line for line in found), found  # PBS's daemons
    if not pbs.ssh:
        assert any(pbs_ssh.MARK in line for line in found), found  # the nodes' sshd
        assert any(line.startswith("ssh file ") and "/id" in line for line in found), found


def test_someone_elses_pbs_job_is_a_problem(pbs, assignment):
    """The same run checked for a student whose cluster user is not the job's owner."""
    [run_] = evidence.runs("single_gpu", assignment, Accounting(student="bob", user="bob"))
    assert any("ran as user root" in p and "someone else's job" in p for p in run_.problems), (
        run_.problems
    )


def test_stage3_submitted_with_qsub_runs_its_mpi_ranks_on_the_node(pbs, assignment, quick_env):
    job = pbs.start_qsub(assignment, quick_env, "jobs/run_multi_node_training.sh")
    code = job.wait(timeout=900, echo=None, poll=1)
    assert code == 0, job.log_text()[-3000:]
    fields = qstat_fields(job)
    assert fields["Resource_List"]["select"] == "1:mpiprocs=2"
    [run_] = evidence.runs("multi_node", assignment, Accounting(student="s", user="root"))
    assert run_.traced, run_.problems
    assert (run_.workers, run_.record["job"]["scheduler"]) == (2, "pbs")
    assert run_.record["hosts"] == exec_hosts(fields) * 2
    assert any(note.startswith(f"job {job.id} checked against qstat") for note in run_.notes)


def test_stage3_submitted_on_two_nodes_runs_a_rank_on_each_mom(pbs, assignment, tmp_path):
    """`course.submit(..., nodes=2, per_node=1)` as a student calls it: `qsub -j oe -l
    select=2:mpiprocs=1`; the job's first node starts the rank on the second over ssh."""
    if pbs.ssh:
        pytest.skip(pbs.ssh)
    folder = fresh_copy(assignment, tmp_path / "two-nodes")
    job = course.submit(
        "jobs/run_multi_node_training.sh", nodes=2, per_node=1, workdir=folder, echo=None
    )
    assert job is not None and job.scheduler == "qsub"
    code = job.wait(timeout=900, echo=None, poll=1)
    log = job.log_text()
    assert code == 0, log[-3000:]
    [launch] = joblog.launches(log)
    assert (launch["slots"], launch["nodes"]) == (2, 2), log[-3000:]
    places = sorted((place.rank, place.host, place.inter_rank) for place in joblog.rank_places(log))
    by_rank = [host for _, host, _ in places]
    assert sorted(by_rank) == list(pbs_cluster.NODES), log[-3000:]  # a rank on each mom
    assert [(rank, inter) for rank, _, inter in places] == [(0, 0), (1, 1)], places
    fields = qstat_fields(job)
    assert (fields["Exit_status"], fields["Resource_List"]["select"]) == (0, "2:mpiprocs=1")
    assert sorted(exec_hosts(fields)) == list(pbs_cluster.NODES), fields["exec_host"]
    [run_] = evidence.runs("multi_node", folder, Accounting(student="s", user="root"))
    assert run_.traced, run_.problems
    assert run_.record["hosts"] == exec_hosts(fields) == by_rank
    assert any(note.startswith(f"job {job.id} checked against qstat") for note in run_.notes)
    account = accounting.lookup("pbs", job.id).account
    assert account is not None and (account.user, account.nodes) == ("root", 2)


def test_a_job_killed_at_its_walltime_is_said_so_and_continued_by_the_next_qsub(
    pbs, assignment, quick_env, tmp_path
):
    """The mom checks walltime every few seconds here ($max_check_poll): a run of about a minute
    (ten epochs of about six seconds on an idle machine) is killed at its 30-second walltime
    part-way, and the student's next qsub resumes it from its snapshot, as often as it takes (every
    job saves at least one epoch's snapshot)."""
    folder = fresh_copy(assignment, tmp_path / "walltime")
    args = "COURSE_TRAIN_ARGS=--model vgg --width 8 --batchsize 32 --epoch 10 --warmup 2"
    jobs: list[submit.Job] = []
    for _ in range(30):
        jobs.append(
            pbs.start_qsub(
                folder,
                quick_env,
                "-l",
                "walltime=00:00:30",
                "-v",
                args,
                "jobs/run_single_gpu_training.sh",
            )
        )
        jobs[-1].wait(timeout=600, echo=None, poll=1)
        if any(results.load(path).get("complete") for path in results.find(folder)):
            break
        text = jobs[-1].log_text()
        assert "=>> PBS: job killed: walltime" in text, text[-2000:]
        end = jobs[-1].ending()
        assert end is not None and end.says == "was killed at its walltime", text[-2000:]
        assert jobs[-1].exit_status() == jobend.WALLTIME_EXIT
        assert qstat_fields(jobs[-1])["Exit_status"] == -29  # OpenPBS: JOB_EXEC_KILL_WALLTIME
    assert len(jobs) >= 2, [job.log_text()[-600:] for job in jobs]
    [run_] = evidence.runs("single_gpu", folder, Accounting(student="s", user="root"))
    assert run_.traced, run_.problems
    assert [segment["job"]["id"] for segment in run_.segments] == [job.id for job in jobs]
    for job in jobs[1:]:
        [said] = joblog.resumptions(job.log_text())
        assert said["folder"].endswith(run_.path.parent.name) and said["iteration"] > 0
    assert [entry["epoch"] for entry in run_.record["log"]] == list(range(1, 11))


def test_course_cancel_points_to_qdel_which_cancels_the_running_job(
    pbs, assignment, quick_env, tmp_path
):
    folder = fresh_copy(assignment, tmp_path / "cancel")
    args = "COURSE_TRAIN_ARGS=--model vgg --width 8 --batchsize 32 --epoch 200"
    job = pbs.start_qsub(folder, quick_env, "-v", args, "jobs/run_single_gpu_training.sh")
    deadline = time.monotonic() + 300
    while not results.find(folder, "single_gpu"):  # the run has begun: its first epoch is saved
        assert time.monotonic() < deadline, qstat_fields(job)
        time.sleep(0.5)
    assert qstat_fields(job)["job_state"] == "R"
    cancel = subprocess.run(
        [PYTHON, "-m", "course", "cancel", job.id], capture_output=True, text=True, timeout=120
    )
    assert cancel.returncode == 2 and "Traceback" not in cancel.stderr, cancel.stderr
    assert f"qdel {job.id}" in cancel.stderr, cancel.stderr
    subprocess.run(["qdel", job.id], check=True, capture_output=True)
    said: list[str] = []
    status = job.wait(timeout=300, echo=said.append, poll=1)
    assert status is not None and status != 0, said
    end = job.ending()
    assert end is not None and end.says == "was killed by SIGTERM", job.log_text()[-2000:]
    assert any(
        line.startswith(f"[job {job.id} was killed by SIGTERM (exit status 143)") for line in said
    ), said
    assert qstat_fields(job)["job_state"] == "F"

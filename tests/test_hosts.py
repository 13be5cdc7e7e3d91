"""Reading the job's scheduler, hosts and slots from PBS, Slurm and nothing at all."""

from __future__ import annotations

import socket

import pytest

from course.cluster import hosts
from course.errors import JobError


def test_pbs_node_file_of_two_nodes_with_two_slots(tmp_path):
    nodefile = tmp_path / "nodes"
    nodefile.write_text("a087\na087\na088\na088\n")
    env = {
        "PBS_JOBID": "12345.reedbush-pbsadmin0",
        "PBS_JOBNAME": "run_multi_node",
        "PBS_O_WORKDIR": str(tmp_path),
        "PBS_NODEFILE": str(nodefile),
    }
    job = hosts.detect(env)
    assert (job.scheduler, job.job_id, job.submit_dir) == (
        "pbs",
        "12345.reedbush-pbsadmin0",
        tmp_path,
    )
    assert job.hosts == [("a087", 2), ("a088", 2)]
    assert (job.nprocs, job.nodes, job.per_node) == (4, 2, 2)


def test_the_local_runner_is_told_apart_from_pbs(tmp_path):
    nodefile = tmp_path / "nodes"
    nodefile.write_text("localhost\n")
    env = {"PBS_JOBID": "7.local", "PBS_NODEFILE": str(nodefile), "COURSE_SCHEDULER": "local"}
    assert hosts.detect(env).scheduler == "local"


@pytest.mark.parametrize(
    "expression,expected",
    [
        ("gpu[01-03,07],login1", ["gpu01", "gpu02", "gpu03", "gpu07", "login1"]),
        ("node7", ["node7"]),
        ("a[8-10]", ["a8", "a9", "a10"]),
        ("gpu[01-02]-ib,x", ["gpu01-ib", "gpu02-ib", "x"]),
        ("rack[1-2]-n[01-02]", ["rack1-n01", "rack1-n02", "rack2-n01", "rack2-n02"]),
    ],
)
def test_slurm_node_lists(expression, expected):
    assert hosts.expand_hostlist(expression) == expected


def test_slurm_tasks_per_node():
    assert hosts.expand_tasks_per_node("2(x3),1") == [2, 2, 2, 1]
    env = {
        "SLURM_JOB_ID": "99",
        "SLURM_JOB_NODELIST": "gpu[1-2]",
        "SLURM_TASKS_PER_NODE": "2(x2)",
        "SLURM_SUBMIT_DIR": "/home/s/course",
    }
    job = hosts.detect(env)
    assert (job.scheduler, job.hosts, job.nprocs) == ("slurm", [("gpu1", 2), ("gpu2", 2)], 4)


def test_broken_inputs_say_what_is_wrong(tmp_path):
    with pytest.raises(JobError, match="cannot read the Slurm node list"):
        hosts.expand_hostlist("gpu[a-b]")
    for broken in ("gpu[01", "gpu01]", "a,,b", ""):
        with pytest.raises(JobError, match="cannot read the Slurm node list"):
            hosts.expand_hostlist(broken)
    empty = tmp_path / "nodes"
    empty.write_text("")
    with pytest.raises(JobError, match="is empty"):
        hosts.read_nodefile(empty)
    with pytest.raises(JobError, match="cannot read the node file"):
        hosts.read_nodefile(tmp_path / "missing")


def test_outside_any_scheduler():
    job = hosts.detect({})
    assert job.scheduler == "none" and job.job_id is None
    assert job.hosts == [(socket.gethostname(), 1)]

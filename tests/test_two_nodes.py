"""Stage 3 across two hosts: a two-node Slurm cluster on this machine (tests/slurm_cluster.py), each
node a network and UTS namespace of its own, so that ranks on the second node have another host
name, another address and comm.rank != comm.intra_rank, as on a real cluster."""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from course import evidence, paths
from course.contracts import joblog
from course.notebook import report
from tests import slurm_cluster
from tests.helpers import PYTHON, ROOT

pytestmark = [pytest.mark.slurm, pytest.mark.slow]
NODES = ["cnode1", "cnode2"]


@pytest.fixture(scope="module")
def cluster(two_node_cluster):
    return two_node_cluster


@pytest.fixture(scope="module")
def assignment(solved_assignment, tmp_path_factory):
    return slurm_cluster.assignment(
        solved_assignment, tmp_path_factory.mktemp("two-nodes") / paths.ASSIGNMENT
    )


def test_the_cluster_has_two_hosts_that_reach_each_other_only_on_its_own_network(cluster):
    for node in NODES:
        namespace = f"/run/netns/course-{node}"
        said = subprocess.run(
            ["nsenter", f"--net={namespace}", "ip", "-4", "-o", "addr", "show", "eth0"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert f"{slurm_cluster.SUBNET}." in said
        routes = subprocess.run(
            ["nsenter", f"--net={namespace}", "ip", "route"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert "default" not in routes, routes  # nothing beyond the cluster's subnet is reachable


@pytest.mark.extended  # across two nodes: test_site_verify_two_nodes.py, test_pbs_server.py
def test_stage3_with_select_2_runs_four_ranks_on_two_hosts_and_joins_the_scaling_table(
    cluster, assignment, quick_env
):
    started = time.monotonic()
    cluster.qsub(assignment, quick_env, "jobs/run_single_gpu_training.sh")  # the baseline: 1 worker
    for select in ("select=1:mpiprocs=2", "select=2:mpiprocs=2"):
        job = cluster.qsub(assignment, quick_env, "-l", select, "jobs/run_multi_node_training.sh")
    log = job.find_log().read_text()
    [launch] = joblog.launches(log)
    assert (launch["slots"], launch["nodes"]) == (4, 2), log
    assert "4 slot(s) on 2 node(s): cnode1 x2, cnode2 x2" in log
    places = joblog.rank_places(log)
    assert [(p.rank, p.host, p.intra_rank, p.inter_rank) for p in places] == [
        (0, "cnode1", 0, 0),
        (1, "cnode1", 1, 0),
        (2, "cnode2", 0, 1),
        (3, "cnode2", 1, 1),
    ], log
    # scatter_dataset: rank 0 read the 1024 training examples and sent every rank its quarter,
    # across hosts
    assert [p.train_examples for p in places] == [256] * 4
    runs = {run.workers: run for run in evidence.runs("multi_node", assignment)}
    assert sorted(runs) == [2, 4]
    assert all(run.traced for run in runs.values()), [run.problems for run in runs.values()]
    assert runs[4].record["hosts"] == ["cnode1", "cnode1", "cnode2", "cnode2"]
    assert runs[2].record["hosts"] == ["cnode1", "cnode1"]
    table = {(row["stage"], row["workers"]): row for row in report.rows(assignment)}
    assert table[("single_gpu", 1)]["baseline"]
    assert table[("multi_node", 2)]["devices"] == "@numpy on 1 node(s)"
    assert table[("multi_node", 4)]["devices"] == "@numpy on 2 node(s)"
    assert (
        table[("multi_node", 4)]["efficiency"] is not None
        and table[("multi_node", 4)]["counts"] == "yes"
    )
    print(
        f"three jobs on the two-node cluster in {time.monotonic() - started:.0f} s"
    )  # shown with -s


CHECKS_ON_THE_NODES = """
import json, sys
from pathlib import Path
from course.lessons.core import mn_ranks
from tests.solutions import solution_functions
from tests.helpers import notebook_module, replaced_once, run_stage_3_checks

folder = Path(sys.argv[1])
device_for_rank = solution_functions("multi_node")["device_for_rank"]
rank_as_gpu = replaced_once(device_for_rank, "comm.intra_rank", "comm.rank")
(folder / "good").mkdir(), (folder / "rank").mkdir()
print(json.dumps({"nodes": mn_ranks.job_nodes(mn_ranks.Layout()),
                  "solutions": run_stage_3_checks(notebook_module(folder / "good", "multi_node")),
                  "rank as GPU": run_stage_3_checks(notebook_module(folder / "rank", "multi_node",
                                                                    device_for_rank=rank_as_gpu))}))
"""


def test_stage3_checks_run_on_the_real_nodes_and_catch_binding_a_gpu_by_rank(cluster, tmp_path):
    """The notebook's stage-3 checks, run inside a 2-node job, run their 4 ranks on the two hosts
    (not on simulated ones): the solutions pass, and `@cupy:{comm.rank}` fails the device check
    there too."""
    script = tmp_path / "checks.py"
    script.write_text(CHECKS_ON_THE_NODES)
    job = tmp_path / "job.sh"
    job.write_text(f"#!/bin/bash\ncd {ROOT}\nexec {PYTHON} {script} {tmp_path}\n")
    run = subprocess.run(
        [
            "sbatch",
            "--parsable",
            "-N",
            "2",
            "--ntasks-per-node",
            "2",
            "-o",
            str(tmp_path / "out"),
            "--wrap",
            f"bash {job}",
        ],
        env=cluster.env(
            {
                "PATH": "/usr/bin:/bin",
                "HOME": str(tmp_path),
                "PYTHONPATH": str(ROOT),
                "OMP_NUM_THREADS": "1",
            }
        ),
        capture_output=True,
        text=True,
        check=True,
    )
    job_id = run.stdout.strip()
    deadline, env = time.monotonic() + 600, cluster.env({"PATH": "/usr/bin:/bin"})
    while (
        time.monotonic() < deadline
        and subprocess.run(
            ["squeue", "-h", "-j", job_id], env=env, capture_output=True, text=True
        ).stdout.strip()
    ):
        time.sleep(2)
    out = (tmp_path / "out").read_text()
    found = json.loads(out.strip().splitlines()[-1])
    assert found["nodes"] == NODES, out
    assert found["solutions"] == {}, out
    assert list(found["rank as GPU"]) == ["check_device_binding"], out
    message = found["rank as GPU"]["check_device_binding"]
    assert "would use ['@cupy:0', '@cupy:1', '@cupy:2', '@cupy:3']" in message, message
    assert "this job's nodes cnode1, cnode2" in message, message

"""`python -m course site verify` on the two-node Slurm cluster of the tests
(tests/slurm_cluster.py): stage 3 and the allreduce benchmark across both nodes, every check
passing."""

from __future__ import annotations

import pytest

from course.instructor.site_checks import NO_GPU
from tests import site_verify_helpers as sv

pytestmark = [pytest.mark.slurm, pytest.mark.slow]


def test_on_two_nodes_stage_3_and_the_benchmark_reach_both_and_every_check_passes(
    two_node_cluster, tmp_path, quick_env
):
    kit = sv.kit(tmp_path / "kit", sv.profile("slurm-cpu", tmp_path))  # runs up to 2x2
    run, report = sv.verify(kit, tmp_path / "verify", two_node_cluster.env(quick_env))
    assert run.returncode == 0, run.stdout + run.stderr
    found = sv.checks(report)
    assert found["MPI reaching every node"] == ("ok", "4 rank(s) on cnode1 x2, cnode2 x2", "")
    jobs = {job.what: job for job in report.jobs}
    assert jobs["stage 3"].hosts == ["cnode1", "cnode1", "cnode2", "cnode2"]
    assert jobs["stage 3"].request == "2 node(s) x 2 rank(s)"
    assert jobs["allreduce benchmark"].hosts == ["cnode1", "cnode2"]
    assert found["allreduce benchmark"][:2] == (
        "ok",
        "2 burst(s) of recursive_doubling, ring on 4 ranks",
    )
    assert found["cuDNN and NCCL working"] == ("skipped", NO_GPU, "")
    assert jobs["environment probe and GPU self-test"].hosts[0] in ("cnode1", "cnode2")

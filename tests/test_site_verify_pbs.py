"""`python -m course site verify` on the real OpenPBS server of the tests (tests/pbs_cluster.py),
with the kit's reedbush-h profile as that one-node, CPU-only cluster needs it."""

from __future__ import annotations

import pytest

from course.instructor.site_checks import NO_GPU
from tests import pbs_cluster, pbs_profile
from tests import site_verify_helpers as sv

# The first set-up may build OpenPBS (about 5 min on two idle cores, 10 under load).
pytestmark = [pytest.mark.pbs, pytest.mark.slow, pytest.mark.timeout(2400)]
# This cluster's one node has CPU cores only: no GPUs, stage 3 and the benchmark on it alone.
CPU_NODE = {
    "gpus_per_node = 2": "gpus_per_node = 0",
    'runs = ["1x2", "2x2"]': 'runs = ["1x1", "1x2"]',
    'communication = ["pure_nccl", "non_cuda_aware"]': 'communication = ["naive"]',
}


def test_every_check_passes_through_qsub_on_pbs(pbs, tmp_path, quick_env):
    profile = pbs_profile.reedbush_profile(tmp_path / "reedbush-h-here.toml", quick_env)
    text = profile.read_text()
    for old, new in CPU_NODE.items():
        assert old in text, old
        text = text.replace(old, new, 1)
    profile.write_text(text)
    kit = sv.kit(tmp_path / "kit", profile)
    run, report = sv.verify(kit, tmp_path / "verify", pbs.env(quick_env))
    assert run.returncode == 0, run.stdout + run.stderr
    found = sv.checks(report)
    assert report.scheduler == "pbs"
    assert found["MPI reaching every node"] == ("ok", f"2 rank(s) on {pbs_cluster.NODE} x2", "")
    assert found["GPUs visible per rank, and their binding"] == ("skipped", NO_GPU, "")
    assert found["stage 2: runs, and fits its walltime"][0] == "skipped"
    jobs = {job.what: job for job in report.jobs}
    assert jobs["stage 1"].job_id.endswith(f".{pbs_cluster.NODE}")
    assert (
        jobs["stage 1"].log == f"run_single_gpu_training.sh.o{jobs['stage 1'].job_id.split('.')[0]}"
    )

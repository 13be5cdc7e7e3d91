"""The three stages on real GPUs, through their job scripts (marked gpu: skipped without GPUs)."""

from __future__ import annotations

import shutil

import pytest

from course import comparison, evidence, gpu, paths
from tests.helpers import python_ok

pytestmark = [pytest.mark.gpu, pytest.mark.slow]


@pytest.fixture
def assignment(student_run, tmp_path):
    folder = tmp_path / paths.ASSIGNMENT
    shutil.copytree(student_run, folder, ignore=shutil.ignore_patterns("runs", "*.o*"))
    return folder


def submit(folder, env, *arguments):
    return python_ok("-m", "course", "submit", *arguments, cwd=folder, env=env, timeout=1800)


def test_stage1_trains_on_the_first_gpu(assignment, quick_env):
    submit(assignment, quick_env, "jobs/run_single_gpu_training.sh")
    [run] = evidence.runs("single_gpu", assignment)
    assert (
        run.traced and run.record["devices"] == ["@cupy:0"] and run.record["device_kind"] == "gpu"
    )
    assert run.record["versions"]["cudnn"], "Chainer should use cuDNN from the gpu extra"


def test_stage2_multiprocess_parallel_updater_on_every_gpu(assignment, quick_env):
    count = gpu.visible_gpus().count
    if count < 2:
        pytest.skip("stage 2 needs two GPUs")
    submit(assignment, quick_env, "jobs/run_single_gpu_training.sh")
    out = submit(assignment, quick_env, "jobs/run_multi_gpu_training.sh", "-l", f"ngpus={count}")
    [run] = evidence.runs("multi_gpu", assignment)
    assert (
        run.traced
        and run.workers == count
        and run.record["updater"] == "MultiprocessParallelUpdater"
    )
    # The record names the GPUs the updater was given, so that it compares with stage 1's GPU run.
    assert (
        run.record["devices"] == [f"@cupy:{i}" for i in range(count)]
        and run.record["device_kind"] == "gpu"
    )
    [base] = evidence.runs("single_gpu", assignment)
    assert run.record["gpu_model"] and not comparison.comparable(run, base)
    assert (
        "optimizer.lr is changed to" in out
    )  # the updater divides the lr by the GPUs, as the notebook says


def test_stage3_pure_nccl_one_rank_per_gpu(assignment, quick_env):
    count = gpu.visible_gpus().count
    submit(
        assignment,
        quick_env,
        "jobs/run_multi_node_training.sh",
        "-l",
        f"select=1:mpiprocs={count}",
        "-v",
        "COMMUNICATOR=pure_nccl",
    )
    [run] = evidence.runs("multi_node", assignment)
    assert run.traced and run.workers == count and run.record["communicator"] == "pure_nccl"
    assert run.record["devices"] == [f"@cupy:{i}" for i in range(count)]

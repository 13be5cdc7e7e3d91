"""Notebook 04's GPU-only features on real GPUs (marked gpu: skipped without them, and never run on
the kit's CPU test machine): ChainerMN's float16 allreduce of the gradients and its double-buffering
optimizer, each training the course network a few steps under mpiexec on one rank per GPU (at most
two)."""

from __future__ import annotations

import subprocess

import pytest

from course import gpu
from tests.helpers import PYTHON

pytestmark = [pytest.mark.gpu, pytest.mark.integration]

SCRIPT = """
import sys

import chainer
import chainer.links as L
import chainermn
import numpy as np

from course.runtime import models

dtype, double_buffering = sys.argv[1], sys.argv[2] == "1"
comm = chainermn.create_communicator(
    "pure_nccl", allreduce_grad_dtype=None if dtype == "float32" else dtype
)
chainer.backends.cuda.get_device_from_id(comm.intra_rank).use()
model = L.Classifier(models.build("vgg", width=8))
model.to_gpu()
optimizer = chainermn.create_multi_node_optimizer(
    chainer.optimizers.MomentumSGD(0.01), comm, double_buffering=double_buffering
)
optimizer.setup(model)
rng = np.random.default_rng(comm.rank)
losses = []
for _ in range(5):
    x = model.xp.asarray(rng.random((16, 3, 32, 32), dtype=np.float32))
    t = model.xp.asarray(rng.integers(0, 10, 16).astype(np.int32))
    optimizer.update(model, x, t)
    losses.append(float(model.loss.array))
assert all(np.isfinite(losses)), losses
if comm.rank == 0:
    print("trained", dtype, double_buffering, losses[-1])
"""


@pytest.mark.parametrize(
    "dtype, double_buffering", [("float16", "0"), ("float32", "1")], ids=["float16", "double"]
)
def test_chainermn_exchange_options_train_on_gpus(tmp_path, dtype, double_buffering):
    ranks = min(2, gpu.visible_gpus().count)
    script = tmp_path / "exchange_gpu.py"
    script.write_text(SCRIPT)
    done = subprocess.run(
        ["mpiexec", "-n", str(ranks), PYTHON, str(script), dtype, double_buffering],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"trained {dtype} {double_buffering == '1'}" in done.stdout, done.stdout

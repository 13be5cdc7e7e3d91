"""The step profile's layers (course.runtime.profile), which notebook 04's overlap model reads: a
real trainer of the course network with ChainerMN's multi-node optimizer on one MPI rank (the
`naive` communicator in this process), profiled for a few steps."""

from __future__ import annotations

import chainer
import chainer.links as L
import chainermn
import numpy as np
import pytest
from chainer import training

from course.runtime import models, profile

pytestmark = pytest.mark.integration  # MPI in this process


def test_every_layer_with_parameters_in_backward_order_with_its_size_and_time():
    comm = chainermn.create_communicator("naive")
    model = L.Classifier(models.build("vgg", width=4))
    optimizer = chainermn.create_multi_node_optimizer(chainer.optimizers.MomentumSGD(0.01), comm)
    optimizer.setup(model)
    rng = np.random.default_rng(0)
    data = chainer.datasets.TupleDataset(
        rng.random((48, 3, 32, 32), dtype=np.float32), rng.integers(0, 10, 48).astype(np.int32)
    )
    iterator = chainer.iterators.SerialIterator(data, 8)
    trainer = training.Trainer(
        training.updaters.StandardUpdater(iterator, optimizer), (5, "iteration")
    )
    profiler = profile.StepProfile(trainer, comm, warmup=1)
    with profiler.hook:
        trainer.run()
    summary = profiler.summary()
    layers = summary["layers"]
    # the first step broadcasts the weights, the next is the warm-up: 3 steady steps
    assert summary["steps"] == len(profiler.layer_steps) == 3
    names = [layer["name"] for layer in layers]
    by_link = {}
    for name, param in model.namedparams():
        link = name.rsplit("/", 1)[0]
        by_link[link] = by_link.get(link, 0) + param.size
    # every link with parameters once, with its parameter count
    assert sorted(names) == sorted(by_link)
    assert {layer["name"]: layer["parameters"] for layer in layers} == by_link
    # the backward pass reaches the classifier's last layer first and the first convolution last
    assert names[0] == "/predictor/fc2" and names[-1] == "/predictor/blocks/0/0/conv", names
    assert all(layer["backward_ms"] >= 0 for layer in layers)
    # the layers' shares fit within the backward phase they cut
    assert sum(layer["backward_ms"] for layer in layers) <= summary["median_ms"]["backward"] * 1.5

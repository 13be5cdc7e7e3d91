"""The throughput extension, on a real Trainer with a fake clock."""

from __future__ import annotations

import chainer
import chainer.links as L
import numpy as np
import pytest
from chainer import training
from chainer.training import extensions

from course.errors import CourseError
from course.runtime.throughput import Throughput


class FakeClock:
    """Each call advances by the next step of a schedule of seconds."""

    def __init__(self, steps):
        self.steps, self.now = list(steps), 100.0

    def __call__(self) -> float:
        self.now += self.steps.pop(0) if self.steps else 0.0
        return self.now


@pytest.fixture(autouse=True)
def in_tmp_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the trainers' LogReport writes result/log in the current folder


def tiny_trainer(n_examples=40, batch=10, epochs=3):
    rng = np.random.default_rng(0)
    dataset = chainer.datasets.TupleDataset(
        rng.normal(size=(n_examples, 4)).astype(np.float32),
        rng.integers(0, 3, n_examples).astype(np.int32),
    )
    model = L.Classifier(L.Linear(4, 3))
    optimizer = chainer.optimizers.SGD(0.1)
    optimizer.setup(model)
    iterator = chainer.iterators.SerialIterator(dataset, batch)
    trainer = training.Trainer(
        training.updaters.StandardUpdater(iterator, optimizer), (epochs, "epoch")
    )
    evaluator_iter = chainer.iterators.SerialIterator(dataset, batch, repeat=False, shuffle=False)
    trainer.extend(extensions.Evaluator(evaluator_iter, model))
    trainer.extend(extensions.LogReport())
    return trainer


def test_counts_steady_iterations_only():
    # 3 epochs of 4 iterations. Call 0 is initialize(); calls 1..12 follow the updates.
    # Every step takes 0.1 s, but the intervals after an epoch end also hold the evaluation (5 s).
    schedule = [0.0] + [0.1] * 4 + [5.1] + [0.1] * 3 + [5.1] + [0.1] * 3
    trainer = tiny_trainer()
    meter = Throughput(batch_size=10, warmup=2, clock=FakeClock(schedule))
    trainer.extend(meter)
    trainer.run()
    stats = meter.stats()
    assert stats.warmup_iterations == 2
    assert stats.excluded_iterations == 2  # iterations 5 and 9 follow the epoch ends
    assert stats.counted_iterations == 12 - 2 - 2
    assert stats.images_per_sec == pytest.approx(100.0)  # 10 images per 0.1 s
    assert stats.std == pytest.approx(0.0, abs=1e-6)
    log = trainer.get_extension("LogReport").log
    assert [round(entry["throughput"]) for entry in log] == [100, 100, 100]


def test_workers_multiply_the_images_of_one_step():
    trainer = tiny_trainer(epochs=1)
    meter = Throughput(batch_size=10, workers=4, warmup=0, clock=FakeClock([0.0] + [0.5] * 4))
    trainer.extend(meter)
    trainer.run()
    assert meter.images_per_iteration == 40
    assert meter.stats().images_per_sec == pytest.approx(80.0)


def test_a_communicator_sets_the_number_of_workers():
    class Comm:  # the only attribute Throughput reads of a ChainerMN communicator
        size = 8

    assert Throughput(batch_size=32, comm=Comm()).images_per_iteration == 256


def test_spread_reports_uneven_steps():
    trainer = tiny_trainer(epochs=1)
    meter = Throughput(batch_size=10, warmup=0, clock=FakeClock([0.0, 0.1, 0.2, 0.1, 0.2]))
    trainer.extend(meter)
    trainer.run()
    stats = meter.stats()
    assert stats.images_per_sec == pytest.approx(40 / 0.6)
    assert stats.median == pytest.approx(75.0)
    assert stats.std > 20


def test_too_short_a_run_has_no_figure():
    trainer = tiny_trainer(epochs=1)
    meter = Throughput(batch_size=10, warmup=5)
    trainer.extend(meter)
    trainer.run()
    assert meter.stats() is None


def test_batch_size_must_match_the_iterator():
    trainer = tiny_trainer()
    trainer.extend(Throughput(batch_size=64))
    with pytest.raises(CourseError, match="draws 10 images per step"):
        trainer.run(show_loop_exception_msg=False)


def test_real_clock_gives_a_positive_rate():
    trainer = tiny_trainer()
    meter = Throughput(batch_size=10, warmup=1)
    trainer.extend(meter)
    trainer.run()
    assert meter.stats().images_per_sec > 0

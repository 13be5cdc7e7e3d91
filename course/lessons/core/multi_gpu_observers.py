"""What the checks of stage 2 (course.lessons.core.multi_gpu) observe of the student's functions,
as plain facts, where the student's code runs. MultiprocessParallelUpdater needs NCCL and GPUs: the
trainer's observer records what build_trainer gives it (a stand-in in its place)."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from typing import Any

import chainer
import chainer.links as L
from chainer import training
from chainer.training import extensions

from course.lessons.core.trainers import described, fact, of_type, ran
from course.notebook.checks.inputs import example_ids, labelled_dataset, small_args
from course.notebook.checks.verdict import call, real
from course.runtime import models


def train_iterators_facts(
    make_train_iterators: Callable[..., Any], n: int, n_devices: int, batchsize: int, first: int
) -> dict[str, Any]:
    """What make_train_iterators returned for n examples (ids from `first`): each iterator's batch
    size and the ids of its part."""
    iterators = call(make_train_iterators, labelled_dataset(n, first=first), batchsize, n_devices)
    facts: dict[str, Any] = {
        "returned": type(iterators).__name__,
        "list": isinstance(iterators, (list, tuple)),
    }
    if not facts["list"]:
        return facts
    facts["kinds"] = sorted({type(it).__name__ for it in iterators})
    facts["iterators"] = [isinstance(it, chainer.dataset.Iterator) for it in iterators]
    if all(facts["iterators"]):
        facts["sizes"] = [fact(getattr(it, "batch_size", None)) for it in iterators]
        facts["parts"] = [example_ids(it.dataset) for it in iterators]
    return facts


def _gpu(value: Any) -> Any:
    """A GPU id as a fact: an integer as one, anything else in words."""
    number = real(value)
    return int(number) if number is not None and number == int(number) else repr(value)


def devices_facts(make_devices: Callable[..., Any], id_lists: list[list[int]]) -> list[Any]:
    """For each list of GPU ids, the [name, id] items of what make_devices returned (None when it
    is no dict, with its type)."""
    found = []
    for ids in id_lists:
        result = call(make_devices, list(ids))
        items = (
            [[fact(key), _gpu(value)] for key, value in result.items()]
            if isinstance(result, dict)
            else None
        )
        found.append({"returned": type(result).__name__, "items": items})
    return found


def learning_rate_facts(
    scaled_learning_rate: Callable[..., Any], cases: list[list[Any]]
) -> list[dict[str, Any]]:
    """scaled_learning_rate(base_lr, base_batch, total_batch) of each case: its real value (read
    by the built-in types, whatever the number says of itself), or its words when it is none."""
    found = []
    for base_lr, base_batch, total_batch in cases:
        got = call(scaled_learning_rate, base_lr, base_batch, total_batch)
        value = real(got)
        found.append({"value": value, "shown": None if value is not None else str(got)})
    return found


class _RecordingUpdater(training.updaters.StandardUpdater):
    """Stands in for MultiprocessParallelUpdater while the observer builds a trainer.

    The real one refuses to start without NCCL and GPUs, which this machine (and a grader's) may not
    have, and would fork workers from the notebook's kernel: this one takes the same arguments,
    keeps them for the check, and trains on the CPU from the first iterator, as the real one's main
    process does on devices['main']. The job runs the real one."""

    def __init__(
        self,
        iterators,
        optimizer,
        converter=chainer.dataset.concat_examples,
        devices=None,
        auto_new_epoch=True,
    ):
        self.iterators, self.devices = iterators, devices
        first = iterators[0] if isinstance(iterators, (list, tuple)) and iterators else iterators
        super().__init__(first, optimizer, converter=converter, auto_new_epoch=auto_new_epoch)


@contextlib.contextmanager
def _recording_updater(namespace: dict) -> Iterator[None]:
    """MultiprocessParallelUpdater is _RecordingUpdater wherever build_trainer can find it:
    Chainer's modules and the names the notebook bound it to (from ... import
    MultiprocessParallelUpdater)."""
    updaters: Any = training.updaters  # chainer exports the class only where it imports
    real_class = updaters.MultiprocessParallelUpdater
    modules: tuple[Any, ...] = (updaters, sys.modules[real_class.__module__])
    names = [name for name, value in namespace.items() if value is real_class]
    for module in modules:
        module.MultiprocessParallelUpdater = _RecordingUpdater
    namespace.update(dict.fromkeys(names, _RecordingUpdater))
    try:
        yield
    finally:
        for module in modules:
            module.MultiprocessParallelUpdater = real_class
        namespace.update(dict.fromkeys(names, real_class))


def _main_first(devices: Any) -> list:
    """The devices in MultiprocessParallelUpdater's order: 'main' first, from a dict or a list."""
    if isinstance(devices, dict):
        return [devices.get("main"), *(d for key, d in devices.items() if key != "main")]
    return list(devices) if isinstance(devices, (list, tuple)) else []


def _updater_facts(updater: Any, train_iters: list, optimizer: Any, devices: dict) -> dict:
    """What build_trainer gave MultiprocessParallelUpdater (the stand-in recorded it)."""
    if not isinstance(updater, _RecordingUpdater):
        return {"recording": False, "kind": type(updater).__name__}
    given = updater.iterators
    order = _main_first(updater.devices)
    return {
        "recording": True,
        "iterators": (
            [a is b for a, b in zip(given, train_iters)]
            if isinstance(given, (list, tuple))
            else None
        ),
        "optimizer": updater.get_optimizer("main") is optimizer,
        "devices": updater.devices is not None,
        "device_count": len(order),
        "main_first": bool(order) and order[0] is devices["main"],
        "every_device": {id(d) for d in order} == {id(d) for d in devices.values()},
    }


def trainer_facts(
    build_trainer: Callable[..., Any], n_devices: int, epochs: int, batchsize: int, run: bool
) -> dict[str, Any]:
    """What build_trainer built for `n_devices` parts of 3 steps each and a test set; with `run`,
    what the trainer did when it ran on the CPU (the stand-in trains from the first part)."""
    args = small_args("multi_gpu", epoch=epochs, batchsize=batchsize, warmup=1)
    parts = chainer.datasets.split_dataset_n_random(
        labelled_dataset(3 * batchsize * n_devices), n_devices, seed=0
    )
    train_iters = [chainer.iterators.SerialIterator(part, batchsize) for part in parts]
    test = labelled_dataset(2 * batchsize, seed=1)
    model = L.Classifier(models.build("vgg", width=4))
    optimizer = chainer.optimizers.MomentumSGD(args.lr)
    optimizer.setup(model)
    # CPU devices stand for the GPU ids (MultiprocessParallelUpdater takes either): the Evaluator
    # can run here
    devices = {
        "main" if i == 0 else f"gpu{i}": chainer.get_device("@numpy") for i in range(n_devices)
    }
    with _recording_updater(build_trainer.__globals__):
        built = call(build_trainer, args, train_iters, test, model, optimizer, devices)
    facts = described(built, args.out)
    if not facts["trainer"]:
        return facts
    facts["updater"] = _updater_facts(built.updater, train_iters, optimizer, devices)
    facts["evaluators"] = [
        {
            "on_test": evaluator.get_iterator("main").dataset is test,
            "repeats": bool(evaluator.get_iterator("main").repeat),
            "on_main": evaluator.device is devices["main"],
            "device": str(evaluator.device),
        }
        for evaluator in of_type(built, extensions.Evaluator)
    ]
    if run:
        facts.update(ran(built), updates=optimizer.t, epochs_drawn=train_iters[0].epoch)
    return facts

"""Checks of stage 2 (MultiprocessParallelUpdater), on a CPU. The updater itself needs NCCL and
GPUs: the trainer's check records what build_trainer gives it (a stand-in in its place), and the GPU
job runs it."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable
from typing import Any

import chainer
import chainer.links as L
from chainer import training
from chainer.training import extensions

from course.notebook.checks.inputs import example_ids, labelled_dataset, small_args
from course.notebook.checks.trainers import (
    built_trainer,
    expect_epochs,
    expect_meters_and_log,
    of_type,
)
from course.notebook.checks.verdict import call, expect, passed, real
from course.runtime import models


def train_iterators(
    make_train_iterators: Callable[..., Any], n: int = 64, n_devices: int = 2, batchsize: int = 8
) -> None:
    __tracebackhide__ = True
    train = labelled_dataset(n)
    iterators = call(make_train_iterators, train, batchsize, n_devices)
    expect(
        isinstance(iterators, (list, tuple)) and len(iterators) == n_devices,
        f"make_train_iterators should return a list of {n_devices} iterators, one per GPU; "
        f"it returned {type(iterators).__name__}",
    )
    expect(
        all(isinstance(it, chainer.dataset.Iterator) for it in iterators),
        "every element should be a Chainer iterator",
        f"found {sorted({type(it).__name__ for it in iterators})}: each GPU's worker draws its "
        "minibatches from an iterator of its own",
    )
    sizes = [it.batch_size for it in iterators]
    expect(
        sizes == [batchsize] * n_devices,
        f"the iterators draw {sizes} examples per step; each GPU should draw batchsize={batchsize}",
        f"the total batch is then {batchsize} x {n_devices}: that is how data parallelism grows it",
    )
    parts = [example_ids(it.dataset) for it in iterators]
    lengths = {len(part) for part in parts}
    expect(
        len(lengths) == 1,
        f"the parts have different sizes {sorted(len(p) for p in parts)}",
        "the GPUs step together, one minibatch each per update: with unequal parts their epochs "
        "end at different updates",
    )
    everything = [i for part in parts for i in part]
    expect(
        len(everything) == len(set(everything)),
        "some training examples are in more than one GPU's part",
        f"{len(everything) - len(set(everything))} examples are held twice or more: data "
        "parallelism gives each GPU a different part, so that one epoch sees every example once",
    )
    expect(
        len(everything) > n - n_devices,
        f"the parts hold {len(everything)} of the {n} training examples",
        "together they must cover the training set "
        "(only the remainder of n / GPUs may be left out)",
    )
    passed(
        f"make_train_iterators: {n_devices} disjoint parts of {lengths.pop()} examples covering "
        "the training set, "
        f"each read {batchsize} per step"
    )


def devices(
    make_devices: Callable[..., Any], id_lists: tuple[list[int], ...] = ([0, 1], [2, 3, 4, 5])
) -> None:
    __tracebackhide__ = True
    for ids in id_lists:
        result = call(make_devices, list(ids))
        expect(
            isinstance(result, dict),
            f"make_devices({ids}) returned {type(result).__name__}, not a dict",
            "MultiprocessParallelUpdater takes its devices as a dict from a name to a GPU id",
        )
        expect(
            result.get("main") == ids[0],
            f"make_devices({ids}) gives 'main' = {result.get('main')!r}",
            f"the first GPU ({ids[0]}) is the main one, under the key 'main'",
        )
        expect(
            sorted(result.values()) == sorted(ids) and len(result) == len(ids),
            f"make_devices({ids}) = {result}: every GPU once",
            "one entry per GPU id",
        )
    passed(f"make_devices: e.g. {call(make_devices, list(id_lists[0]))}")


def learning_rate(
    scaled_learning_rate: Callable[..., Any],
    cases: tuple[tuple[float, int, int, float], ...] = (
        (0.05, 64, 128, 0.1),
        (0.1, 32, 32, 0.1),
        (0.01, 32, 256, 0.08),
    ),
) -> None:
    __tracebackhide__ = True
    for base_lr, base_batch, total_batch, expected in cases:
        got = call(scaled_learning_rate, base_lr, base_batch, total_batch)
        value = real(got)
        expect(
            value is not None and abs(value - expected) < 1e-9 * max(1.0, expected),
            f"scaled_learning_rate({base_lr}, {base_batch}, {total_batch}) = "
            f"{got if value is None else value!r}, expected {expected}",
            "the linear scaling rule: the learning rate grows in proportion to the total batch",
        )
    passed("scaled_learning_rate follows the linear scaling rule (lr x total batch / base batch)")


class _RecordingUpdater(training.updaters.StandardUpdater):
    """Stands in for MultiprocessParallelUpdater while the check builds a trainer.

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
def _recording_updater(namespace: dict):
    """MultiprocessParallelUpdater is _RecordingUpdater wherever build_trainer can find it:
    Chainer's modules and the names the notebook bound it to (from ... import
    MultiprocessParallelUpdater)."""
    updaters: Any = training.updaters  # chainer exports the class only where it imports
    real = updaters.MultiprocessParallelUpdater
    modules: tuple[Any, ...] = (updaters, sys.modules[real.__module__])
    names = [name for name, value in namespace.items() if value is real]
    for module in modules:
        module.MultiprocessParallelUpdater = _RecordingUpdater
    namespace.update(dict.fromkeys(names, _RecordingUpdater))
    try:
        yield
    finally:
        for module in modules:
            module.MultiprocessParallelUpdater = real
        namespace.update(dict.fromkeys(names, real))


def _main_first(devices) -> list:
    """The devices in MultiprocessParallelUpdater's order: 'main' first, from a dict or a list."""
    if isinstance(devices, dict):
        return [devices.get("main"), *(d for key, d in devices.items() if key != "main")]
    return list(devices) if isinstance(devices, (list, tuple)) else []


def trainer(
    build_trainer: Callable[..., Any], n_devices: int = 2, epochs: int = 2, batchsize: int = 8
) -> None:
    """build_trainer's MultiprocessParallelUpdater gets the iterators, optimizer and devices, and
    its extensions are stage 1's with Throughput over every GPU; then the trainer runs on the
    CPU."""
    __tracebackhide__ = True
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
        built = built_trainer(build_trainer, args, train_iters, test, model, optimizer, devices)
    updater = built.updater
    expect(
        isinstance(updater, _RecordingUpdater),
        f"the trainer trains with a {type(updater).__name__}, not a MultiprocessParallelUpdater",
        "stage 2 runs one worker process per GPU; the updater that starts them and exchanges "
        "their gradients is the lesson's MultiprocessParallelUpdater",
    )
    given = updater.iterators
    expect(
        isinstance(given, (list, tuple))
        and len(given) == n_devices
        and all(a is b for a, b in zip(given, train_iters)),
        "MultiprocessParallelUpdater gets "
        f"{len(given) if isinstance(given, (list, tuple)) else 'no list of'} "
        f"iterator(s) for {n_devices} GPUs, not train_iters",
        "one iterator per GPU: pass train_iters as it is",
    )
    expect(
        updater.get_optimizer("main") is optimizer,
        "MultiprocessParallelUpdater is not given the optimizer",
        "the main process's optimizer is the one whose weights the workers copy and update",
    )
    expect(
        updater.devices is not None,
        "MultiprocessParallelUpdater is not given the devices",
        "without them it does not know which GPU each worker uses; note that its third "
        "positional parameter is the converter, not the devices (see its reference page)",
    )
    order = _main_first(updater.devices)
    expect(
        len(order) == n_devices
        and order[0] is devices["main"]
        and {id(d) for d in order} == {id(d) for d in devices.values()},
        f"MultiprocessParallelUpdater is given other devices than the {n_devices} of `devices` "
        "with 'main' first",
        f"it got {len(order)} device(s): every GPU of `devices` runs one worker, and 'main' is "
        "the one the main process trains and evaluates on",
    )
    expect_epochs(built, epochs, args.out, "the job's log and results file go there")
    evaluators = of_type(built, extensions.Evaluator)
    expect(
        len(evaluators) == 1
        and evaluators[0].get_iterator("main").dataset is test
        and not evaluators[0].get_iterator("main").repeat,
        "the trainer needs one Evaluator on one pass over test",
        f"it has {len(evaluators)} Evaluator(s): as in stage 1, evaluation reads an iterator "
        "over the test set until it is exhausted, so it must not repeat",
    )
    expect(
        evaluators[0].device is devices["main"],
        "the Evaluator does not run on devices['main'], the GPU where the updater keeps the model",
        f"it runs on {evaluators[0].device}: the main process holds the model there, and "
        "evaluating on another device would copy every weight first",
    )
    log = expect_meters_and_log(
        built,
        epochs,
        batchsize * n_devices,
        none=(
            "build_trainer adds no course.Throughput",
            "the speedup over stage 1 is computed from the images/sec it reports",
        ),
        moved=f"{n_devices} GPUs x {batchsize} move {batchsize * n_devices}",
        fix="every GPU draws its own minibatch at each step, so one step moves a minibatch per "
        "worker: tell Throughput how many workers there are",
    )
    passed(
        f"build_trainer: MultiprocessParallelUpdater of the {n_devices} iterators, the optimizer "
        "and the devices, "
        f"{epochs} epochs, Evaluator on devices['main'], Throughput over {n_devices} GPUs, "
        "LogReport and "
        f"PrintReport; it trained {len(log)} epochs on the CPU (a stand-in recorded the updater's "
        "arguments; the "
        "job runs the real one on GPUs)"
    )

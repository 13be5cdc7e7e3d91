"""Checks of stage 2 (MultiprocessParallelUpdater). All but the last run on a CPU; the updater
itself needs NCCL and GPUs, so on a CPU its use is checked in the source, and the GPU job runs it."""
from __future__ import annotations

import ast
import inspect
import textwrap

import chainer

from course.notebook.checks import call, example_ids, expect, labelled_dataset, passed
from course.stubs import stubbed_functions


def train_iterators(make_train_iterators, n: int = 64, n_devices: int = 2, batchsize: int = 8) -> None:
    __tracebackhide__ = True
    train = labelled_dataset(n)
    iterators = call(make_train_iterators, train, batchsize, n_devices)
    expect(isinstance(iterators, (list, tuple)) and len(iterators) == n_devices,
           f"make_train_iterators should return a list of {n_devices} iterators, one per GPU; "
           f"it returned {type(iterators).__name__}")
    expect(all(isinstance(it, chainer.dataset.Iterator) for it in iterators),
           "every element should be a Chainer iterator", "chainer.iterators.SerialIterator(part, batchsize)")
    sizes = [it.batch_size for it in iterators]
    expect(sizes == [batchsize] * n_devices,
           f"the iterators draw {sizes} examples per step; each GPU should draw batchsize={batchsize}",
           f"the total batch is then {batchsize} x {n_devices}: that is how data parallelism grows it")
    parts = [example_ids(it.dataset) for it in iterators]
    lengths = {len(part) for part in parts}
    expect(len(lengths) == 1, f"the parts have different sizes {sorted(len(p) for p in parts)}",
           "MultiprocessParallelUpdater needs equal parts: chainer.datasets.split_dataset_n_random(train, n)")
    everything = [i for part in parts for i in part]
    expect(len(everything) == len(set(everything)), "some training examples are in more than one GPU's part",
           "split the data set into disjoint parts: chainer.datasets.split_dataset_n_random(train, n)")
    expect(len(everything) > n - n_devices, f"the parts hold {len(everything)} of the {n} training examples",
           "together they must cover the training set (only the remainder of n / GPUs may be left out)")
    passed(f"make_train_iterators: {n_devices} disjoint parts of {lengths.pop()} examples covering the training set, "
           f"each read {batchsize} per step")


def devices(make_devices, id_lists: tuple[list[int], ...] = ([0, 1], [2, 3, 4, 5])) -> None:
    __tracebackhide__ = True
    for ids in id_lists:
        result = call(make_devices, list(ids))
        expect(isinstance(result, dict), f"make_devices({ids}) returned {type(result).__name__}, not a dict",
               "MultiprocessParallelUpdater takes devices as a dict of name -> GPU id")
        expect(result.get("main") == ids[0], f"make_devices({ids}) gives 'main' = {result.get('main')!r}",
               f"the first GPU ({ids[0]}) is the main one, under the key 'main'")
        expect(sorted(result.values()) == sorted(ids) and len(result) == len(ids),
               f"make_devices({ids}) = {result}: every GPU once", "one entry per GPU id")
    passed(f"make_devices: e.g. {call(make_devices, list(id_lists[0]))}")


def learning_rate(scaled_learning_rate, cases: tuple[tuple[float, int, int, float], ...] = (
        (0.05, 64, 128, 0.1), (0.1, 32, 32, 0.1), (0.01, 32, 256, 0.08))) -> None:
    __tracebackhide__ = True
    for base_lr, base_batch, total_batch, expected in cases:
        got = call(scaled_learning_rate, base_lr, base_batch, total_batch)
        expect(isinstance(got, (int, float)) and abs(got - expected) < 1e-9 * max(1.0, expected),
               f"scaled_learning_rate({base_lr}, {base_batch}, {total_batch}) = {got!r}, expected {expected}",
               "the linear scaling rule: the learning rate grows in proportion to the total batch")
    passed("scaled_learning_rate follows the linear scaling rule (lr x total batch / base batch)")


def _calls(function) -> dict[str, list[ast.Call]]:
    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    found: dict[str, list[ast.Call]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            found.setdefault(name, []).append(node)
    return found


def _keywords(call_node: ast.Call) -> set[str]:
    return {k.arg for k in call_node.keywords if k.arg}


def trainer_source(build_trainer) -> None:
    """Read build_trainer's code (MultiprocessParallelUpdater cannot be built without NCCL GPUs)."""
    __tracebackhide__ = True
    if stubbed_functions(textwrap.dedent(inspect.getsource(build_trainer))):
        raise NotImplementedError("build_trainer still has its PUT YOUR CODE HERE stub: write it, then run this "
                                  "check again")
    calls = _calls(build_trainer)
    updater = calls.get("MultiprocessParallelUpdater", [])
    expect(bool(updater), "build_trainer does not create a MultiprocessParallelUpdater",
           "training.updaters.MultiprocessParallelUpdater(train_iters, optimizer, devices=devices)")
    expect(len(updater[0].args) >= 3 or "devices" in _keywords(updater[0]),
           "MultiprocessParallelUpdater is not given the devices", "pass devices=devices (the dict with 'main')")
    meters = calls.get("Throughput", [])
    expect(bool(meters), "build_trainer adds no course.Throughput",
           "course.Throughput(args.batchsize, workers=len(devices))")
    expect(len(meters[0].args) >= 2 or "workers" in _keywords(meters[0]),
           "Throughput counts one worker only", "every GPU is a worker: workers=len(devices)")
    expect(bool(calls.get("Evaluator")) and bool(calls.get("Trainer")),
           "build_trainer needs a Trainer and an Evaluator", "as in stage 1; the Evaluator runs on devices['main']")
    passed("build_trainer: MultiprocessParallelUpdater with the devices, Throughput over all GPUs, Trainer and "
           "Evaluator (read from the code here; the GPU job runs it)")

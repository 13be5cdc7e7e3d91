"""Checks of stage 1 (one device): the iterators, the model and optimizer, the trainer."""

from __future__ import annotations

import contextlib
import io
import itertools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import chainer
import chainer.links as L
import numpy as np
from chainer import training
from chainer.training import extensions

from course.notebook.checks.inputs import labelled_dataset, small_args
from course.notebook.checks.trainers import (
    built_trainer,
    expect_epochs,
    expect_meters_and_log,
    of_type,
)
from course.notebook.checks.verdict import call, expect, passed
from course.runtime import models


def _ids(batch) -> list[int]:
    return [int(x[0, 0, 0]) for x, _ in batch]


def _what(value: Any) -> str:
    """What a check found, in words: 'None' or 'a <class>'."""
    return "None" if value is None else f"a {type(value).__name__}"


def _updater_found(updater: Any, train_iter: Any, optimizer: Any) -> str:
    """What is wrong with the trainer's updater, in words."""
    if not isinstance(updater, training.updaters.StandardUpdater):
        return f"it is {_what(updater)}"
    if updater.get_iterator("main") is not train_iter:
        return "it draws from another iterator than train_iter"
    return "it updates with another optimizer than the one given"


def iterators(
    make_iterators: Callable[..., Any], n_train: int = 40, n_test: int = 20, batchsize: int = 8
) -> None:
    __tracebackhide__ = True
    train, test = labelled_dataset(n_train), labelled_dataset(n_test, seed=1)
    result = call(make_iterators, train, test, batchsize)
    expect(
        isinstance(result, tuple) and len(result) == 2,
        f"make_iterators returned {type(result).__name__}, not the pair (train_iter, test_iter)",
    )
    train_iter, test_iter = result
    for name, it in (("train_iter", train_iter), ("test_iter", test_iter)):
        expect(
            isinstance(it, chainer.dataset.Iterator),
            f"{name} is a {type(it).__name__}, not a Chainer iterator",
            "the updater and the Evaluator draw their minibatches from a chainer.dataset.Iterator "
            "(see the chainer.iterators page of Chainer's reference)",
        )
    expect(
        train_iter.batch_size == batchsize,
        f"the training iterator draws {train_iter.batch_size} examples per step, not "
        f"batchsize={batchsize}",
    )
    seen = []
    for _ in range(n_train // batchsize + 2):
        seen += _ids(train_iter.next())
        if train_iter.is_new_epoch:
            break
    expect(
        sorted(seen) == list(range(n_train)),
        "one epoch of the training iterator should visit every training example exactly once",
        f"in one epoch it drew {len(seen)} examples, {len(set(seen))} of them distinct, of the "
        f"{n_train} in train: an epoch is one pass over the whole training set",
    )
    expect(
        seen != sorted(seen),
        "the training iterator returns the examples in their stored order",
        "SGD expects every minibatch to be a random sample: in stored order (e.g. sorted by class) "
        "the batches are biased and every epoch repeats the same ones",
    )
    try:
        train_iter.next()
    except StopIteration:
        expect(
            False,
            "the training iterator stops after one epoch",
            "the trainer counts the epochs itself and draws batches until args.epoch epochs: "
            "an iterator that raises StopIteration ends the training after the first",
        )
    batches = list(itertools.islice(iter(test_iter), n_test // batchsize + 3))
    expect(
        len(batches) <= -(-n_test // batchsize),
        "the test iterator does not stop after one pass, so evaluation would never end",
        f"it gave more than {len(batches) - 1} batches of {batchsize} from {n_test} test examples: "
        "the Evaluator reads its iterator until it is exhausted (see SerialIterator in Chainer's "
        "reference for how an iterator ends after one pass)",
    )
    tested = [i for batch in batches for i in _ids(batch)]
    expect(
        sorted(tested) == list(range(n_test)),
        "one pass of the test iterator should see every test example once",
    )
    passed(
        f"make_iterators: training batches of {batchsize}, shuffled and repeating; the test "
        "iterator makes "
        "one pass over the test set"
    )


def model_and_optimizer(
    make_model_and_optimizer: Callable[..., Any],
    model_name: str = "vgg",
    width: int = 4,
    lr: float = 0.02,
) -> None:
    __tracebackhide__ = True
    args = small_args(model=model_name, width=width, lr=lr)
    device = chainer.get_device("@numpy")
    result = call(make_model_and_optimizer, args, device)
    expect(
        isinstance(result, tuple) and len(result) == 2,
        f"make_model_and_optimizer returned {type(result).__name__}, not the pair (model, "
        "optimizer)",
    )
    model, optimizer = result
    expect(
        isinstance(model, chainer.Link), f"model is a {type(model).__name__}, not a Chainer link"
    )
    expect(
        isinstance(optimizer, chainer.Optimizer),
        f"optimizer is a {type(optimizer).__name__}, not an optimizer",
        "the updater needs a chainer.Optimizer to change the weights (the lesson uses momentum "
        "SGD, from chainer.optimizers)",
    )
    expect(
        optimizer.target is model,
        "the optimizer is not set up on the model",
        f"its target is {_what(optimizer.target)}: an optimizer updates only the link it was set "
        "up on",
    )
    expect(
        getattr(optimizer, "lr", None) == lr,
        f"the optimizer's learning rate is {getattr(optimizer, 'lr', None)}, not args.lr ({lr})",
        "stage 1 trains at the single-worker rate from the command line; the later stages "
        "scale it from there",
    )
    predictor: Any = getattr(model, "predictor", None)
    expect(
        isinstance(model, L.Classifier) and isinstance(predictor, models.MODELS[model_name]),
        f"the model should be L.Classifier around the network args.model names ({model_name!r} "
        f"here); it is {_what(model)}",
        "L.Classifier adds the softmax cross-entropy loss and the accuracy the trainer reports",
    )
    expect(
        model.device == device,
        f"the model is on {model.device}, not on {device}",
        "the updater sends each minibatch to `device`: the parameters must be there too, or "
        "every update mixes arrays of two devices",
    )
    x, t = chainer.dataset.concat_examples(labelled_dataset(16))
    before = {
        name: param.array.copy() for name, param in model.namedparams() if param.array is not None
    }
    optimizer.update(model, x, t)
    loss = float(model.loss.array)
    changed = sum(
        not np.array_equal(before[name], param.array)
        for name, param in model.namedparams()
        if name in before
    )
    expect(
        np.isfinite(loss) and changed == len(before) > 0,
        f"one update changed {changed} of the model's {len(before)} initialised parameters",
        "an update moves every parameter of the link the optimizer was set up on: the ones it "
        "left alone belong to another link than this model",
    )
    reference = models.build(model_name, width=width)
    with chainer.using_config("train", False):
        reference(x[:1])  # sizes its lazily initialised layers
    expect(
        models.count_parameters(predictor) == models.count_parameters(reference),
        f"the network has {models.count_parameters(predictor)} parameters; the course's "
        f"{model_name!r} network at width {width} has {models.count_parameters(reference)}",
        f"it was built with other settings than those in args (model {model_name!r}, width "
        f"{width})",
    )
    passed(
        f"make_model_and_optimizer: {type(predictor).__name__} (width {width}) in L.Classifier on "
        f"{device}, "
        f"{type(optimizer).__name__} at lr {lr}; an update moves every weight (loss {loss:.2f})"
    )


def trainer(build_trainer: Callable[..., Any], epochs: int = 2, batchsize: int = 8) -> None:
    __tracebackhide__ = True
    args = small_args(epoch=epochs, batchsize=batchsize, warmup=1)
    device = chainer.get_device("@numpy")
    train, test = labelled_dataset(6 * batchsize), labelled_dataset(2 * batchsize, seed=1)
    model = L.Classifier(models.build("vgg", width=4))
    optimizer = chainer.optimizers.MomentumSGD(args.lr)
    optimizer.setup(model)
    train_iter = chainer.iterators.SerialIterator(train, batchsize)
    test_iter = chainer.iterators.SerialIterator(test, batchsize, repeat=False, shuffle=False)
    built = built_trainer(build_trainer, args, train_iter, test_iter, model, optimizer, device)
    updater = built.updater
    expect(
        isinstance(updater, training.updaters.StandardUpdater)
        and updater.get_iterator("main") is train_iter
        and updater.get_optimizer("main") is optimizer,
        "the trainer's updater should be a StandardUpdater of train_iter and optimizer",
        f"{_updater_found(updater, train_iter, optimizer)}: on one device the standard updater "
        "draws from the training iterator and updates with the optimizer it is given",
    )
    expect_epochs(built, epochs, args.out, "the job's log and results file go there")
    evaluators = of_type(built, extensions.Evaluator)
    expect(
        len(evaluators) == 1 and evaluators[0].get_iterator("main") is test_iter,
        "the trainer needs one Evaluator on test_iter",
        f"it has {len(evaluators)} Evaluator(s)"
        f"{'' if len(evaluators) != 1 else ', on another iterator'}: the log's validation/main/* "
        "columns come from one pass over test_iter at every epoch end",
    )
    log = expect_meters_and_log(
        built,
        epochs,
        batchsize,
        none=(
            "the trainer has no course.Throughput",
            "the results file takes its images/sec from course.Throughput: the later stages' "
            "speedups are measured against this run",
        ),
        moved=f"one device draws {batchsize}",
        fix="Throughput multiplies the steps per second by the images one step moves: on one "
        "device, one minibatch",
    )
    passed(
        f"build_trainer: StandardUpdater, {epochs} epochs, Evaluator, Throughput, LogReport and "
        "PrintReport; "
        f"it trained {len(log)} epochs on a small set (loss {log[-1]['main/loss']:.2f})"
    )


def _tiny_trainer(out: str, epochs: int, batchsize: int, seed: int = 0) -> training.Trainer:
    """A small trainer of the kit's own, so that what the check finds is add_snapshots' doing
    alone."""
    np.random.seed(seed)
    train, test = labelled_dataset(4 * batchsize), labelled_dataset(batchsize, seed=1)
    model = L.Classifier(models.build("vgg", width=4))
    optimizer = chainer.optimizers.MomentumSGD(0.05)
    optimizer.setup(model)
    updater = training.updaters.StandardUpdater(
        chainer.iterators.SerialIterator(train, batchsize), optimizer
    )
    built = training.Trainer(updater, (epochs, "epoch"), out=out)
    built.extend(
        extensions.Evaluator(
            chainer.iterators.SerialIterator(test, batchsize, repeat=False, shuffle=False), model
        )
    )
    built.extend(extensions.LogReport())
    return built


def _train(built: training.Trainer) -> dict:
    with contextlib.redirect_stdout(io.StringIO()):
        call(built.run)
    return {
        name: param.array.copy()
        for name, param in built.updater.get_optimizer("main").target.namedparams()
    }


def snapshots(add_snapshots: Callable[..., Any], epochs: int = 3, batchsize: int = 4) -> None:
    """add_snapshots(trainer) snapshots the whole trainer every epoch, keeping a few, and a run
    stopped early then resumed from its snapshot ends with the weights of a run that was never
    stopped."""
    __tracebackhide__ = True
    import tempfile

    from chainer.training.extensions import _snapshot

    from course.runtime import checkpoint

    with tempfile.TemporaryDirectory() as tmp:
        whole = _tiny_trainer(f"{tmp}/whole", epochs, batchsize)
        call(add_snapshots, whole)
        found = [
            (entry.extension, entry.trigger)
            for entry in whole._extensions.values()
            if isinstance(entry.extension, _snapshot._Snapshot)
        ]
        expect(
            len(found) == 1,
            f"add_snapshots added {len(found)} snapshot extensions; one is needed",
            "a job killed at its walltime would start over from epoch 0"
            if not found
            else "each would write its own files into the same run folder",
        )
        snapshot, trigger = found[0]
        expect(
            snapshot._target is None,
            "the snapshot saves one object, not the trainer: a resumed run would lose the "
            "optimizer's momentum, "
            "the iterator's place in the epoch and the log",
            "resuming needs the trainer's whole state: Chainer's reference tells snapshot "
            "(the trainer) from snapshot_object (one object)",
        )
        expect(
            snapshot.filename == "snapshot_iter_{.updater.iteration}",
            f"the snapshots are named {snapshot.filename!r}; the next job looks for "
            "snapshot_iter_<iteration>",
            "a file under another name is never found, and the job starts over",
        )
        expect(
            snapshot.n_retains >= 1,
            "every snapshot is kept, so a long run fills the disk",
            "a resumed run needs only the newest snapshot (and one spare, in case a job dies "
            "while writing one); each holds the model and the optimizer's state",
        )
        expect(
            (getattr(trigger, "period", None), getattr(trigger, "unit", None)) == (1, "epoch"),
            f"the snapshot runs every {getattr(trigger, 'period', '?')} "
            f"{getattr(trigger, 'unit', '?')}(s); "
            "take one at every epoch end",
            "a job resumes from the last snapshot: taken less often, the work since then is lost "
            "when the walltime ends the job",
        )
        checkpoint.attach(
            whole, add=False
        )  # as the job does: the random generators go into the snapshots
        expected = _train(whole)
        written = checkpoint.snapshot_files(Path(tmp, "whole"))
        expect(
            0 < len(written) <= snapshot.n_retains,
            f"after {epochs} epochs the run folder holds {len(written)} snapshots "
            f"(n_retains={snapshot.n_retains})",
        )

        stopped = _tiny_trainer(f"{tmp}/resumed", epochs - 1, batchsize)
        call(add_snapshots, stopped)
        checkpoint.attach(stopped, add=False)
        _train(stopped)
        resumed = _tiny_trainer(
            f"{tmp}/resumed", epochs, batchsize, seed=99
        )  # other weights until it loads
        call(add_snapshots, resumed)
        checkpoint.attach(resumed, add=False)
        at = checkpoint.resume(resumed)
        expect(
            at == stopped.updater.iteration,
            f"the resumed trainer starts at iteration {at}, not at {stopped.updater.iteration} "
            "where the "
            "snapshot was taken",
        )
        got = _train(resumed)
        differ = [name for name in expected if not np.array_equal(expected[name], got[name])]
        expect(
            not differ,
            f"resumed from its snapshot, the run ends with other weights ({differ[:2]}) than the "
            "run that was never stopped",
        )
    passed(
        f"add_snapshots: the whole trainer at every epoch end, the newest {snapshot.n_retains} "
        "kept; a run "
        f"stopped after {epochs - 1} epochs and resumed from its snapshot ended with the same "
        "weights as a "
        f"{epochs}-epoch run that was never stopped"
    )

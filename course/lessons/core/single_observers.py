"""What the checks of stage 1 (course.lessons.core.single) observe of the student's functions:
each observer runs one function on the check's inputs and returns what it did as plain facts. They
run where the student's code runs (the notebook's kernel, or the grader's test child); the checks
judge the facts elsewhere."""

from __future__ import annotations

import contextlib
import io
import itertools
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import chainer
import chainer.links as L
import numpy as np
from chainer import training
from chainer.training import extensions

from course.lessons.core.trainers import described, fact, of_type, ran, weights
from course.notebook.checks.inputs import labelled_dataset, small_args
from course.notebook.checks.verdict import call, real
from course.runtime import models


def _ids(batch: Any) -> list[int]:
    return [int(x[0, 0, 0]) for x, _ in batch]


def what(value: Any) -> str:
    """What a check found, in words: 'None' or 'a <class>'."""
    return "None" if value is None else f"a {type(value).__name__}"


def iterators_facts(
    make_iterators: Callable[..., Any], n_train: int, n_test: int, batchsize: int, first: int
) -> dict[str, Any]:
    """The ids of one epoch of the training iterator, whether it goes on after it, and the ids of
    the batches of the test iterator (the examples' ids start at `first`)."""
    train = labelled_dataset(n_train, first=first)
    test = labelled_dataset(n_test, seed=1, first=first + n_train)
    result = call(make_iterators, train, test, batchsize)
    facts: dict[str, Any] = {
        "returned": type(result).__name__,
        "pair": isinstance(result, tuple) and len(result) == 2,
    }
    if not facts["pair"]:
        return facts
    facts["kinds"] = [type(it).__name__ for it in result]
    facts["iterators"] = [isinstance(it, chainer.dataset.Iterator) for it in result]
    if not all(facts["iterators"]):
        return facts
    train_iter, test_iter = result
    facts["batch_size"] = fact(getattr(train_iter, "batch_size", None))
    seen: list[int] = []
    for _ in range(n_train // batchsize + 2):
        seen += _ids(train_iter.next())
        if train_iter.is_new_epoch:
            break
    facts["epoch"] = seen
    try:
        train_iter.next()
        facts["stops"] = False
    except StopIteration:  # a finding, not an error: the check says what it means
        facts["stops"] = True
    batches = itertools.islice(iter(test_iter), n_test // batchsize + 3)
    facts["test"] = [_ids(batch) for batch in batches]
    return facts


def model_facts(
    make_model_and_optimizer: Callable[..., Any],
    model_name: str,
    width: int,
    lr: float,
    seed: int,
    update: bool,
) -> dict[str, Any]:
    """What make_model_and_optimizer returned, and the shapes of its model's parameters once a
    first example sized them; with `update`, the model's weights before and after one update on 16
    examples drawn with `seed` (in test mode: no dropout, so the step is a function of the weights
    and the examples alone) and its loss."""
    args = small_args(model=model_name, width=width, lr=lr)
    result = call(make_model_and_optimizer, args, chainer.get_device("@numpy"))
    facts: dict[str, Any] = {
        "returned": type(result).__name__,
        "pair": isinstance(result, tuple) and len(result) == 2,
    }
    if not facts["pair"]:
        return facts
    model, optimizer = result
    facts.update(
        model=type(model).__name__,
        link=isinstance(model, chainer.Link),
        optimizer=type(optimizer).__name__,
        is_optimizer=isinstance(optimizer, chainer.Optimizer),
    )
    if not (facts["link"] and facts["is_optimizer"]):
        return facts
    predictor: Any = getattr(model, "predictor", None)
    facts.update(
        set_up=optimizer.target is model,
        target=what(optimizer.target),
        lr=real(getattr(optimizer, "lr", None)),
        classifier=isinstance(model, L.Classifier),
        network=isinstance(predictor, models.MODELS[model_name]),
        network_kind=type(predictor).__name__,
        device=str(model.device),
    )
    if not (facts["classifier"] and facts["network"] and facts["device"] == "@numpy"):
        return facts  # a model the check does not step: it says why from the facts above
    x, t = chainer.dataset.concat_examples(labelled_dataset(16, seed=seed))
    with chainer.using_config("train", False), chainer.no_backprop_mode():
        predictor(x[:1])  # sizes its lazily initialised layers
    facts["shapes"] = {name: list(param.shape) for name, param in model.namedparams()}
    if update:
        facts["before"] = weights(model)
        with chainer.using_config("train", False):
            optimizer.update(model, x, t)
        facts["after"] = weights(model)
        loss = getattr(model, "loss", None)
        facts["loss"] = (
            real(np.asarray(loss.array)[()]) if isinstance(loss, chainer.Variable) else None
        )
    return facts


def trainer_facts(
    build_trainer: Callable[..., Any], epochs: int, batchsize: int, run: bool
) -> dict[str, Any]:
    """What build_trainer built on 6 steps of training and 2 of test data; with `run`, what the
    trainer did when it ran (the updates of the given optimizer, the epochs of train_iter)."""
    args = small_args(epoch=epochs, batchsize=batchsize, warmup=1)
    device = chainer.get_device("@numpy")
    train, test = labelled_dataset(6 * batchsize), labelled_dataset(2 * batchsize, seed=1)
    model = L.Classifier(models.build("vgg", width=4))
    optimizer = chainer.optimizers.MomentumSGD(args.lr)
    optimizer.setup(model)
    train_iter = chainer.iterators.SerialIterator(train, batchsize)
    test_iter = chainer.iterators.SerialIterator(test, batchsize, repeat=False, shuffle=False)
    built = call(build_trainer, args, train_iter, test_iter, model, optimizer, device)
    facts = described(built, args.out)
    if not facts["trainer"]:
        return facts
    updater = built.updater
    standard = isinstance(updater, training.updaters.StandardUpdater)
    facts["updater"] = {
        "kind": what(updater),
        "standard": standard,
        "train_iter": standard and updater.get_iterator("main") is train_iter,
        "optimizer": standard and updater.get_optimizer("main") is optimizer,
    }
    facts["evaluators"] = [
        evaluator.get_iterator("main") is test_iter
        for evaluator in of_type(built, extensions.Evaluator)
    ]
    if run:
        facts.update(ran(built), updates=optimizer.t, epochs_drawn=train_iter.epoch)
    return facts


def tiny_trainer(out: str, epochs: int, batchsize: int, seed: int) -> training.Trainer:
    """A small trainer of the kit's own (4 steps an epoch), so that what the snapshot check finds
    is add_snapshots' doing alone. The same `seed` gives the same run."""
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


def trained_weights(built: training.Trainer) -> dict[str, list]:
    """Run a tiny_trainer quietly; its model's weights after."""
    with contextlib.redirect_stdout(io.StringIO()):
        call(built.run)
    return weights(built.updater.get_optimizer("main").target)


def snapshot_facts(
    add_snapshots: Callable[..., Any], epochs: int, batchsize: int, seed: int, run: bool
) -> dict[str, Any]:
    """The snapshot extensions add_snapshots adds to a tiny_trainer; with `run`, that trainer
    stopped after epochs - 1 epochs and a new one (other weights until it loads) resumed from its
    snapshot for the last epoch: the iteration it resumed at, the snapshot files left, its final
    weights."""
    from chainer.training.extensions import _snapshot

    from course.runtime import checkpoint

    with tempfile.TemporaryDirectory() as tmp:
        stopped = tiny_trainer(tmp, epochs - 1, batchsize, seed)
        call(add_snapshots, stopped)
        facts: dict[str, Any] = {
            "snapshots": [
                {
                    "whole": entry.extension._target is None,
                    "filename": fact(entry.extension.filename),
                    "n_retains": fact(entry.extension.n_retains),
                    "trigger": [
                        fact(getattr(entry.trigger, "period", None)),
                        fact(getattr(entry.trigger, "unit", None)),
                    ],
                }
                for entry in stopped._extensions.values()
                if isinstance(entry.extension, _snapshot._Snapshot)
            ]
        }
        if not run:
            return facts
        checkpoint.attach(stopped, add=False)  # as the job does: the random generators go in
        trained_weights(stopped)
        resumed = tiny_trainer(tmp, epochs, batchsize, seed + 1)
        call(add_snapshots, resumed)
        checkpoint.attach(resumed, add=False)
        facts["resumed_at"] = checkpoint.resume(resumed)
        facts["weights"] = trained_weights(resumed)
        facts["files"] = [path.name for path in checkpoint.snapshot_files(Path(tmp))]
    return facts

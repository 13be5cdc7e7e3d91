"""Checks of stage 1 (one device): the iterators, the model and optimizer, the trainer, the
snapshots. Each check has its observer (course.lessons.core.single_observers) run the student's
function and judges the facts it returns against references of its own."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import chainer
import chainer.links as L
import numpy as np

import course.lessons.core.single_observers as seen
from course.i18n import _

# Stage 1's snapshot check lives beside this module; the notebooks call it as single.snapshots.
from course.lessons.core.single_snapshots import snapshots as snapshots
from course.lessons.core.trainers import (
    expect_epochs,
    expect_reports,
    expect_throughput,
    expect_trained,
    expect_trainer,
)
from course.notebook.checks.inputs import hidden_seed, labelled_dataset
from course.notebook.checks.observe import finite, number, observe
from course.notebook.checks.verdict import expect, passed
from course.runtime import models


def _updater_found(updater: Any) -> str:
    """What is wrong with the trainer's updater, in words."""
    if updater["standard"] is not True:
        return _("it is {kind}").format(kind=updater["kind"])
    if updater["train_iter"] is not True:
        return _("it draws from another iterator than train_iter")
    return _("it updates with another optimizer than the one given")


def iterators(
    make_iterators: Callable[..., Any], n_train: int = 40, n_test: int = 20, batchsize: int = 8
) -> None:
    __tracebackhide__ = True
    first = hidden_seed()  # the examples' ids: no one knows them before the check asks
    facts = observe(
        seen.iterators_facts,
        make_iterators,
        n_train=n_train,
        n_test=n_test,
        batchsize=batchsize,
        first=first,
    )
    expect(
        facts["pair"] is True,
        _("make_iterators returned {returned}, not the pair (train_iter, test_iter)").format(
            returned=facts["returned"]
        ),
    )
    for name, kind, iterator in zip(
        ("train_iter", "test_iter"), facts["kinds"], facts["iterators"], strict=True
    ):
        expect(
            iterator is True,
            _("{name} is a {kind}, not a Chainer iterator").format(name=name, kind=kind),
            _(
                "the updater and the Evaluator draw their minibatches from a "
                "chainer.dataset.Iterator (see the chainer.iterators page of Chainer's reference)"
            ),
        )
    expect(
        facts["batch_size"] == batchsize and number(facts["batch_size"]) is not None,
        _(
            "the training iterator draws {drawn} examples per step, not batchsize={batchsize}"
        ).format(drawn=facts["batch_size"], batchsize=batchsize),
    )
    epoch = facts["epoch"]
    expect(
        sorted(epoch) == list(range(first, first + n_train)),
        _("one epoch of the training iterator should visit every training example exactly once"),
        _(
            "in one epoch it drew {drawn} examples, {distinct} of them distinct, of the "
            "{n_train} in train: an epoch is one pass over the whole training set"
        ).format(drawn=len(epoch), distinct=len(set(epoch)), n_train=n_train),
    )
    expect(
        epoch != sorted(epoch),
        _("the training iterator returns the examples in their stored order"),
        _(
            "SGD expects every minibatch to be a random sample: in stored order (e.g. sorted by "
            "class) the batches are biased and every epoch repeats the same ones"
        ),
    )
    expect(
        facts["stops"] is False,
        _("the training iterator stops after one epoch"),
        _(
            "the trainer counts the epochs itself and draws batches until args.epoch epochs: "
            "an iterator that raises StopIteration ends the training after the first"
        ),
    )
    batches = facts["test"]
    expect(
        len(batches) <= -(-n_test // batchsize),
        _("the test iterator does not stop after one pass, so evaluation would never end"),
        _(
            "it gave more than {batches} batches of {batchsize} from {n_test} test examples: "
            "the Evaluator reads its iterator until it is exhausted (see SerialIterator in "
            "Chainer's reference for how an iterator ends after one pass)"
        ).format(batches=len(batches) - 1, batchsize=batchsize, n_test=n_test),
    )
    tested = [i for batch in batches for i in batch]
    expect(
        sorted(tested) == list(range(first + n_train, first + n_train + n_test)),
        _("one pass of the test iterator should see every test example once"),
    )
    passed(
        _(
            "make_iterators: training batches of {batchsize}, shuffled and repeating; the test "
            "iterator makes one pass over the test set"
        ).format(batchsize=batchsize)
    )


def _stepped(reference: Any, lr: float, x: Any, t: Any, before: Any) -> dict[str, np.ndarray]:
    """The weights one momentum SGD step at `lr` on (x, t) gives the course's network (in
    L.Classifier, sized) from the weights `before`, in test mode as the observer stepped."""
    for name, param in reference.namedparams():
        start = np.asarray(before[name], dtype=np.float32)
        expect(
            start.shape == param.array.shape,
            _("the parameter {name} is not the network's").format(name=name),
        )
        param.array[...] = start
    optimizer = chainer.optimizers.MomentumSGD(lr)
    optimizer.setup(reference)
    with chainer.using_config("train", False):
        optimizer.update(reference, x, t)
    return {name: param.array.copy() for name, param in reference.namedparams()}


def model_and_optimizer(
    make_model_and_optimizer: Callable[..., Any],
    model_name: str = "vgg",
    width: int = 4,
    lr: float = 0.02,
) -> None:
    __tracebackhide__ = True
    device = str(chainer.get_device("@numpy"))
    seed = hidden_seed()
    inputs = dict(model_name=model_name, width=width, lr=lr, seed=seed)
    facts = observe(seen.model_facts, make_model_and_optimizer, update=False, **inputs)
    expect(
        facts["pair"] is True,
        _("make_model_and_optimizer returned {returned}, not the pair (model, optimizer)").format(
            returned=facts["returned"]
        ),
    )
    expect(
        facts["link"] is True,
        _("model is a {model}, not a Chainer link").format(model=facts["model"]),
    )
    expect(
        facts["is_optimizer"] is True,
        _("optimizer is a {optimizer}, not an optimizer").format(optimizer=facts["optimizer"]),
        _(
            "the updater needs a chainer.Optimizer to change the weights (the lesson uses "
            "momentum SGD, from chainer.optimizers)"
        ),
    )
    expect(
        facts["set_up"] is True,
        _("the optimizer is not set up on the model"),
        _("its target is {target}: an optimizer updates only the link it was set up on").format(
            target=facts["target"]
        ),
    )
    expect(
        facts["lr"] == lr and number(facts["lr"]) is not None,
        _("the optimizer's learning rate is {found}, not args.lr ({lr})").format(
            found=facts["lr"], lr=lr
        ),
        _(
            "stage 1 trains at the single-worker rate from the command line; the later stages "
            "scale it from there"
        ),
    )
    expect(
        facts["classifier"] is True and facts["network"] is True,
        _(
            "the model should be L.Classifier around the network args.model names ({name} "
            "here); it is a {model}"
        ).format(name=repr(model_name), model=facts["model"]),
        _("L.Classifier adds the softmax cross-entropy loss and the accuracy the trainer reports"),
    )
    expect(
        facts["device"] == device,
        _("the model is on {found}, not on {device}").format(found=facts["device"], device=device),
        _(
            "the updater sends each minibatch to `device`: the parameters must be there too, or "
            "every update mixes arrays of two devices"
        ),
    )
    x, t = chainer.dataset.concat_examples(labelled_dataset(16, seed=seed))
    reference = L.Classifier(models.build(model_name, width=width))
    with chainer.using_config("train", False), chainer.no_backprop_mode():
        reference.predictor(x[:1])  # sizes its lazily initialised layers
    counted = sum(int(np.prod(shape)) for shape in facts["shapes"].values())
    expected = models.count_parameters(reference.predictor)
    expect(
        counted == expected
        and facts["shapes"] == {name: list(param.shape) for name, param in reference.namedparams()},
        _(
            "the network has {counted} parameters; the course's {name} network at width "
            "{width} has {expected}"
        ).format(counted=counted, name=repr(model_name), width=width, expected=expected),
        _(
            "it was built with other settings than those in args (model {name}, width {width})"
        ).format(name=repr(model_name), width=width),
    )
    facts = observe(seen.model_facts, make_model_and_optimizer, update=True, **inputs)
    before, after = facts["before"], facts["after"]
    changed = sum(not np.array_equal(before[name], after.get(name)) for name in before)
    expect(
        finite(facts["loss"]) and changed == len(before) > 0,
        _("one update changed {changed} of the model's {total} initialised parameters").format(
            changed=changed, total=len(before)
        ),
        _(
            "an update moves every parameter of the link the optimizer was set up on: the ones "
            "it left alone belong to another link than this model"
        ),
    )
    stepped = _stepped(reference, lr, x, t, before)
    start = {name: np.asarray(before[name], np.float32) for name in stepped}
    moved = np.concatenate(
        [
            (np.asarray(after[n], np.float32).reshape(start[n].shape) - start[n]).ravel()
            for n in start
        ]
    )
    wanted = np.concatenate([(stepped[n] - start[n]).ravel() for n in start])
    expect(
        bool(np.allclose(moved, wanted, rtol=1e-4, atol=1e-6)),
        _(
            "one update moved the weights as a learning rate of {rate} would, not as args.lr "
            "({lr}) does"
        ).format(
            rate=f"{lr * float(moved @ wanted) / max(float(wanted @ wanted), 1e-30):.3g}", lr=lr
        ),
        _(
            "the check compares the step with one of momentum SGD at args.lr from the same "
            "weights on the same examples: another rate, another optimizer or a hook of your own "
            "moves the weights elsewhere"
        ),
    )
    passed(
        _(
            "make_model_and_optimizer: {network} (width {width}) in L.Classifier on {device}, "
            "{optimizer} at lr {lr}; an update moves every weight (loss {loss})"
        ).format(
            network=facts["network_kind"],
            width=width,
            device=device,
            optimizer=facts["optimizer"],
            lr=lr,
            loss=f"{facts['loss']:.2f}",
        )
    )


def trainer(build_trainer: Callable[..., Any], epochs: int = 2, batchsize: int = 8) -> None:
    __tracebackhide__ = True
    inputs = dict(epochs=epochs, batchsize=batchsize)
    facts = observe(seen.trainer_facts, build_trainer, run=False, **inputs)
    expect_trainer(facts)
    updater = facts["updater"]
    expect(
        [updater["standard"], updater["train_iter"], updater["optimizer"]] == [True] * 3,
        _("the trainer's updater should be a StandardUpdater of train_iter and optimizer"),
        _(
            "{found}: on one device the standard updater draws from the training iterator and "
            "updates with the optimizer it is given"
        ).format(found=_updater_found(updater)),
    )
    expect_epochs(facts, epochs, _("the job's log and results file go there"))
    evaluators = facts["evaluators"]
    expect(
        evaluators == [True],
        _("the trainer needs one Evaluator on test_iter"),
        (
            _(
                "it has {count} Evaluator(s): the log's validation/main/* columns come from one "
                "pass over test_iter at every epoch end"
            )
            if len(evaluators) != 1
            else _(
                "it has one Evaluator, on another iterator: the log's validation/main/* columns "
                "come from one pass over test_iter at every epoch end"
            )
        ).format(count=len(evaluators)),
    )
    expect_throughput(
        facts,
        batchsize,
        none=(
            _("the trainer has no course.Throughput"),
            _(
                "the results file takes its images/sec from course.Throughput: the later stages' "
                "speedups are measured against this run"
            ),
        ),
        moved=_("one device draws {batchsize}").format(batchsize=batchsize),
        fix=_(
            "Throughput multiplies the steps per second by the images one step moves: on one "
            "device, one minibatch"
        ),
    )
    expect_reports(facts)
    facts = observe(seen.trainer_facts, build_trainer, run=True, **inputs)
    log = expect_trained(facts, epochs, steps=6)  # the observer's 6 batches of training data
    expect(
        [facts["updates"], facts["epochs_drawn"]] == [epochs * 6, epochs],
        _(
            "the optimizer made {updates} updates and train_iter went through {drawn} epochs; "
            "the trainer ran {ran} updates over {epochs} epochs"
        ).format(
            updates=facts["updates"], drawn=facts["epochs_drawn"], ran=epochs * 6, epochs=epochs
        ),
        _("the updater trains with the optimizer and the iterator build_trainer is given"),
    )
    passed(
        _(
            "build_trainer: StandardUpdater, {epochs} epochs, Evaluator, Throughput, LogReport "
            "and PrintReport; it trained {trained} epochs on a small set (loss {loss})"
        ).format(epochs=epochs, trained=len(log), loss=f"{log[-1]['main/loss']:.2f}")
    )

"""Checks of stage 1 (one device): the iterators, the model and optimizer, the trainer, the
snapshots. Each check has its observer (course.notebook.checks.single_observers) run the student's
function and judges the facts it returns against references of its own."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from typing import Any

import chainer
import chainer.links as L
import numpy as np

import course.notebook.checks.single_observers as seen
from course.notebook.checks.inputs import hidden_seed, labelled_dataset
from course.notebook.checks.observe import finite, number, observe
from course.notebook.checks.trainers import (
    expect_epochs,
    expect_reports,
    expect_throughput,
    expect_trained,
    expect_trainer,
)
from course.notebook.checks.verdict import expect, passed
from course.runtime import models


def _updater_found(updater: Any) -> str:
    """What is wrong with the trainer's updater, in words."""
    if updater["standard"] is not True:
        return f"it is {updater['kind']}"
    if updater["train_iter"] is not True:
        return "it draws from another iterator than train_iter"
    return "it updates with another optimizer than the one given"


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
        f"make_iterators returned {facts['returned']}, not the pair (train_iter, test_iter)",
    )
    for name, kind, iterator in zip(
        ("train_iter", "test_iter"), facts["kinds"], facts["iterators"], strict=True
    ):
        expect(
            iterator is True,
            f"{name} is a {kind}, not a Chainer iterator",
            "the updater and the Evaluator draw their minibatches from a chainer.dataset.Iterator "
            "(see the chainer.iterators page of Chainer's reference)",
        )
    expect(
        facts["batch_size"] == batchsize and number(facts["batch_size"]) is not None,
        f"the training iterator draws {facts['batch_size']} examples per step, not "
        f"batchsize={batchsize}",
    )
    epoch = facts["epoch"]
    expect(
        sorted(epoch) == list(range(first, first + n_train)),
        "one epoch of the training iterator should visit every training example exactly once",
        f"in one epoch it drew {len(epoch)} examples, {len(set(epoch))} of them distinct, of the "
        f"{n_train} in train: an epoch is one pass over the whole training set",
    )
    expect(
        epoch != sorted(epoch),
        "the training iterator returns the examples in their stored order",
        "SGD expects every minibatch to be a random sample: in stored order (e.g. sorted by class) "
        "the batches are biased and every epoch repeats the same ones",
    )
    expect(
        facts["stops"] is False,
        "the training iterator stops after one epoch",
        "the trainer counts the epochs itself and draws batches until args.epoch epochs: "
        "an iterator that raises StopIteration ends the training after the first",
    )
    batches = facts["test"]
    expect(
        len(batches) <= -(-n_test // batchsize),
        "the test iterator does not stop after one pass, so evaluation would never end",
        f"it gave more than {len(batches) - 1} batches of {batchsize} from {n_test} test examples: "
        "the Evaluator reads its iterator until it is exhausted (see SerialIterator in Chainer's "
        "reference for how an iterator ends after one pass)",
    )
    tested = [i for batch in batches for i in batch]
    expect(
        sorted(tested) == list(range(first + n_train, first + n_train + n_test)),
        "one pass of the test iterator should see every test example once",
    )
    passed(
        f"make_iterators: training batches of {batchsize}, shuffled and repeating; the test "
        "iterator makes "
        "one pass over the test set"
    )


def _stepped(reference: Any, lr: float, x: Any, t: Any, before: Any) -> dict[str, np.ndarray]:
    """The weights one momentum SGD step at `lr` on (x, t) gives the course's network (in
    L.Classifier, sized) from the weights `before`, in test mode as the observer stepped."""
    for name, param in reference.namedparams():
        start = np.asarray(before[name], dtype=np.float32)
        expect(start.shape == param.array.shape, f"the parameter {name} is not the network's")
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
        f"make_model_and_optimizer returned {facts['returned']}, not the pair (model, optimizer)",
    )
    expect(facts["link"] is True, f"model is a {facts['model']}, not a Chainer link")
    expect(
        facts["is_optimizer"] is True,
        f"optimizer is a {facts['optimizer']}, not an optimizer",
        "the updater needs a chainer.Optimizer to change the weights (the lesson uses momentum "
        "SGD, from chainer.optimizers)",
    )
    expect(
        facts["set_up"] is True,
        "the optimizer is not set up on the model",
        f"its target is {facts['target']}: an optimizer updates only the link it was set up on",
    )
    expect(
        facts["lr"] == lr and number(facts["lr"]) is not None,
        f"the optimizer's learning rate is {facts['lr']}, not args.lr ({lr})",
        "stage 1 trains at the single-worker rate from the command line; the later stages "
        "scale it from there",
    )
    expect(
        facts["classifier"] is True and facts["network"] is True,
        f"the model should be L.Classifier around the network args.model names ({model_name!r} "
        f"here); it is a {facts['model']}",
        "L.Classifier adds the softmax cross-entropy loss and the accuracy the trainer reports",
    )
    expect(
        facts["device"] == device,
        f"the model is on {facts['device']}, not on {device}",
        "the updater sends each minibatch to `device`: the parameters must be there too, or "
        "every update mixes arrays of two devices",
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
        f"the network has {counted} parameters; the course's "
        f"{model_name!r} network at width {width} has {expected}",
        f"it was built with other settings than those in args (model {model_name!r}, width "
        f"{width})",
    )
    facts = observe(seen.model_facts, make_model_and_optimizer, update=True, **inputs)
    before, after = facts["before"], facts["after"]
    changed = sum(not np.array_equal(before[name], after.get(name)) for name in before)
    expect(
        finite(facts["loss"]) and changed == len(before) > 0,
        f"one update changed {changed} of the model's {len(before)} initialised parameters",
        "an update moves every parameter of the link the optimizer was set up on: the ones it "
        "left alone belong to another link than this model",
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
        f"one update moved the weights as a learning rate of "
        f"{lr * float(moved @ wanted) / max(float(wanted @ wanted), 1e-30):.3g} would, not as "
        f"args.lr ({lr}) does",
        "the check compares the step with one of momentum SGD at args.lr from the same weights on "
        "the same examples: another rate, another optimizer or a hook of your own moves the "
        "weights elsewhere",
    )
    passed(
        f"make_model_and_optimizer: {facts['network_kind']} (width {width}) in L.Classifier on "
        f"{device}, "
        f"{facts['optimizer']} at lr {lr}; an update moves every weight (loss {facts['loss']:.2f})"
    )


def trainer(build_trainer: Callable[..., Any], epochs: int = 2, batchsize: int = 8) -> None:
    __tracebackhide__ = True
    inputs = dict(epochs=epochs, batchsize=batchsize)
    facts = observe(seen.trainer_facts, build_trainer, run=False, **inputs)
    expect_trainer(facts)
    updater = facts["updater"]
    expect(
        [updater["standard"], updater["train_iter"], updater["optimizer"]] == [True] * 3,
        "the trainer's updater should be a StandardUpdater of train_iter and optimizer",
        f"{_updater_found(updater)}: on one device the standard updater "
        "draws from the training iterator and updates with the optimizer it is given",
    )
    expect_epochs(facts, epochs, "the job's log and results file go there")
    evaluators = facts["evaluators"]
    expect(
        evaluators == [True],
        "the trainer needs one Evaluator on test_iter",
        f"it has {len(evaluators)} Evaluator(s)"
        f"{'' if len(evaluators) != 1 else ', on another iterator'}: the log's validation/main/* "
        "columns come from one pass over test_iter at every epoch end",
    )
    expect_throughput(
        facts,
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
    expect_reports(facts)
    facts = observe(seen.trainer_facts, build_trainer, run=True, **inputs)
    log = expect_trained(facts, epochs, steps=6)  # the observer's 6 batches of training data
    expect(
        [facts["updates"], facts["epochs_drawn"]] == [epochs * 6, epochs],
        f"the optimizer made {facts['updates']} updates and train_iter went through "
        f"{facts['epochs_drawn']} epochs; the trainer ran {epochs * 6} updates over {epochs} "
        "epochs",
        "the updater trains with the optimizer and the iterator build_trainer is given",
    )
    passed(
        f"build_trainer: StandardUpdater, {epochs} epochs, Evaluator, Throughput, LogReport and "
        "PrintReport; "
        f"it trained {len(log)} epochs on a small set (loss {log[-1]['main/loss']:.2f})"
    )


def _never_stopped(epochs: int, batchsize: int, seed: int) -> dict[str, list]:
    """The weights after a tiny_trainer of `seed` trained `epochs` epochs in one go, with the kit's
    own snapshots (as a job has them): what a resumed run must end with."""
    from course.runtime import checkpoint

    state = np.random.get_state()  # tiny_trainer seeds NumPy's generator: the notebook's is kept
    try:
        with tempfile.TemporaryDirectory() as tmp:
            whole = seen.tiny_trainer(tmp, epochs, batchsize, seed)
            checkpoint.attach(whole)
            return seen.trained_weights(whole)
    finally:
        np.random.set_state(state)


def snapshots(add_snapshots: Callable[..., Any], epochs: int = 3, batchsize: int = 4) -> None:
    """add_snapshots(trainer) snapshots the whole trainer every epoch, keeping a few, and a run
    stopped early then resumed from its snapshot ends with the weights of a run that was never
    stopped (which this check trains itself)."""
    __tracebackhide__ = True
    inputs = dict(epochs=epochs, batchsize=batchsize, seed=hidden_seed())
    facts = observe(seen.snapshot_facts, add_snapshots, run=False, **inputs)
    found = facts["snapshots"]
    expect(
        len(found) == 1,
        f"add_snapshots added {len(found)} snapshot extensions; one is needed",
        "a job killed at its walltime would start over from epoch 0"
        if not found
        else "each would write its own files into the same run folder",
    )
    snapshot = found[0]
    expect(
        snapshot["whole"] is True,
        "the snapshot saves one object, not the trainer: a resumed run would lose the "
        "optimizer's momentum, "
        "the iterator's place in the epoch and the log",
        "resuming needs the trainer's whole state: Chainer's reference tells snapshot "
        "(the trainer) from snapshot_object (one object)",
    )
    expect(
        snapshot["filename"] == "snapshot_iter_{.updater.iteration}",
        f"the snapshots are named {snapshot['filename']!r}; the next job looks for "
        "snapshot_iter_<iteration>",
        "a file under another name is never found, and the job starts over",
    )
    n_retains = snapshot["n_retains"]
    expect(
        number(n_retains) is not None and n_retains >= 1,
        "every snapshot is kept, so a long run fills the disk",
        "a resumed run needs only the newest snapshot (and one spare, in case a job dies "
        "while writing one); each holds the model and the optimizer's state",
    )
    period, unit = snapshot["trigger"]
    expect(
        [period, unit] == [1, "epoch"],
        f"the snapshot runs every {'?' if period is None else period} "
        f"{'?' if unit is None else unit}(s); "
        "take one at every epoch end",
        "a job resumes from the last snapshot: taken less often, the work since then is lost "
        "when the walltime ends the job",
    )
    facts = observe(seen.snapshot_facts, add_snapshots, run=True, **inputs)
    steps = 4  # tiny_trainer's steps per epoch
    written = facts["files"]
    expect(
        isinstance(written, list)
        and 0 < len(written) <= n_retains
        and f"snapshot_iter_{epochs * steps}" in written,
        f"after {epochs} epochs the run folder holds {len(written)} snapshots "
        f"(n_retains={n_retains})",
    )
    expect(
        facts["resumed_at"] == (epochs - 1) * steps,
        f"the resumed trainer starts at iteration {facts['resumed_at']}, not at "
        f"{(epochs - 1) * steps} where the snapshot was taken",
    )
    expected, got = _never_stopped(epochs, batchsize, inputs["seed"]), facts["weights"]
    differ = [
        name
        for name in expected
        if np.shape(got.get(name)) != np.shape(expected[name])
        or not np.allclose(expected[name], np.asarray(got[name], np.float32), 1e-5, 1e-7)
    ]
    expect(
        not differ and sorted(got) == sorted(expected),
        f"resumed from its snapshot, the run ends with other weights ({differ[:2]}) than the "
        "run that was never stopped",
    )
    passed(
        f"add_snapshots: the whole trainer at every epoch end, the newest {n_retains} "
        "kept; a run "
        f"stopped after {epochs - 1} epochs and resumed from its snapshot ended with the same "
        "weights as a "
        f"{epochs}-epoch run that was never stopped"
    )

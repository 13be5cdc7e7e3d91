"""Checks of stage 2 (MultiprocessParallelUpdater), on a CPU. The updater itself needs NCCL and
GPUs: the trainer's observer records what build_trainer gives it (a stand-in in its place), and the
GPU job runs it. The observers (course.lessons.core.multi_gpu_observers) run the student's
functions; the checks here judge the facts they return."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import course.lessons.core.multi_gpu_observers as seen
from course.i18n import _
from course.lessons.core.trainers import (
    expect_epochs,
    expect_reports,
    expect_throughput,
    expect_trained,
    expect_trainer,
)
from course.notebook.checks.inputs import hidden_seed
from course.notebook.checks.observe import number, observe
from course.notebook.checks.verdict import expect, fail, passed


def train_iterators(
    make_train_iterators: Callable[..., Any], n: int = 64, n_devices: int = 2, batchsize: int = 8
) -> None:
    __tracebackhide__ = True
    first = hidden_seed()  # the examples' ids: no one knows them before the check asks
    facts = observe(
        seen.train_iterators_facts,
        make_train_iterators,
        n=n,
        n_devices=n_devices,
        batchsize=batchsize,
        first=first,
    )
    expect(
        facts["list"] is True and len(facts["iterators"]) == n_devices,
        _(
            "make_train_iterators should return a list of {n_devices} iterators, one per GPU; "
            "it returned {returned}"
        ).format(n_devices=n_devices, returned=facts["returned"]),
    )
    expect(
        all(iterator is True for iterator in facts["iterators"]),
        _("every element should be a Chainer iterator"),
        _(
            "found {kinds}: each GPU's worker draws its minibatches from an iterator of its own"
        ).format(kinds=facts["kinds"]),
    )
    sizes = facts["sizes"]
    expect(
        sizes == [batchsize] * n_devices and all(number(size) is not None for size in sizes),
        _(
            "the iterators draw {sizes} examples per step; each GPU should draw "
            "batchsize={batchsize}"
        ).format(sizes=sizes, batchsize=batchsize),
        _(
            "the total batch is then {batchsize} x {n_devices}: that is how data parallelism "
            "grows it"
        ).format(batchsize=batchsize, n_devices=n_devices),
    )
    parts = facts["parts"]
    lengths = {len(part) for part in parts}
    expect(
        len(lengths) == 1,
        _("the parts have different sizes {sizes}").format(sizes=sorted(len(p) for p in parts)),
        _(
            "the GPUs step together, one minibatch each per update: with unequal parts their "
            "epochs end at different updates"
        ),
    )
    everything = [i for part in parts for i in part]
    expect(
        len(everything) == len(set(everything)),
        _("some training examples are in more than one GPU's part"),
        _(
            "{count} examples are held twice or more: data parallelism gives each GPU a "
            "different part, so that one epoch sees every example once"
        ).format(count=len(everything) - len(set(everything))),
    )
    expect(
        len(everything) > n - n_devices and set(everything) <= set(range(first, first + n)),
        _("the parts hold {held} of the {n} training examples").format(held=len(everything), n=n),
        _(
            "together they must cover the training set (only the remainder of n / GPUs may be "
            "left out)"
        ),
    )
    passed(
        _(
            "make_train_iterators: {n_devices} disjoint parts of {size} examples covering the "
            "training set, each read {batchsize} per step"
        ).format(n_devices=n_devices, size=lengths.pop(), batchsize=batchsize)
    )


def devices(
    make_devices: Callable[..., Any], id_lists: tuple[list[int], ...] = ([0, 1], [2, 3, 4, 5])
) -> None:
    __tracebackhide__ = True
    found = observe(seen.devices_facts, make_devices, id_lists=[list(ids) for ids in id_lists])
    expect(len(found) == len(id_lists), _("make_devices was not asked for every list of GPUs"))
    for ids, facts in zip(id_lists, found):
        items = facts["items"]
        expect(
            items is not None,
            _("make_devices({ids}) returned {returned}, not a dict").format(
                ids=ids, returned=facts["returned"]
            ),
            _("MultiprocessParallelUpdater takes its devices as a dict from a name to a GPU id"),
        )
        result = {key: value for key, value in items}
        expect(
            result.get("main") == ids[0] and number(result.get("main")) is not None,
            _("make_devices({ids}) gives 'main' = {main}").format(
                ids=ids, main=repr(result.get("main"))
            ),
            _("the first GPU ({first}) is the main one, under the key 'main'").format(first=ids[0]),
        )
        values = [value for _name, value in items]
        expect(
            sorted(values, key=str) == sorted(ids, key=str)
            and len(result) == len(items) == len(ids),
            _("make_devices({ids}) = {result}: every GPU once").format(ids=ids, result=result),
            _("one entry per GPU id"),
        )
    passed(
        _("make_devices: e.g. {example}").format(
            example=dict((key, value) for key, value in found[0]["items"])
        )
    )


def learning_rate(
    scaled_learning_rate: Callable[..., Any],
    cases: tuple[tuple[float, int, int, float], ...] = (
        (0.05, 64, 128, 0.1),
        (0.1, 32, 32, 0.1),
        (0.01, 32, 256, 0.08),
    ),
) -> None:
    """Each case's rate is right, or the failure names the property of the rule the function
    breaks (issue 41: diagnose, never the number to match nor the formula): a number or not, the
    limit of one worker, how the rate grows with the total batch, the base batch and the base rate.
    Each case is probed at its own inputs with one of them doubled."""
    __tracebackhide__ = True
    probes = []
    for base_lr, base_batch, total, _expected in cases:
        probes += [
            [base_lr, base_batch, total],
            [base_lr, base_batch, base_batch],
            [base_lr, base_batch, 2 * total],
            [base_lr, 2 * base_batch, total],
            [2 * base_lr, base_batch, total],
        ]
    found = observe(seen.learning_rate_facts, scaled_learning_rate, cases=probes)
    expect(len(found) == len(probes), _("scaled_learning_rate was not asked for every case"))
    for at, (base_lr, base_batch, total_batch, expected) in enumerate(cases):
        facts = found[5 * at : 5 * at + 5]
        value, one_worker, total_doubled, base_doubled, lr_doubled = (
            number(fact["value"]) for fact in facts
        )
        if value is not None and abs(value - expected) < 1e-9 * max(1.0, expected):
            continue
        call = _(
            "scaled_learning_rate({base_lr}, {base_batch}, {total_batch}) returned {got}"
        ).format(
            base_lr=base_lr,
            base_batch=base_batch,
            total_batch=total_batch,
            got=repr(facts[0]["shown"] if value is None else value),
        )
        if value is None or value <= 0:
            fail(
                call,
                _("a learning rate is a positive number: the rule scales a positive base rate"),
            )
        _expect_rule_property(
            call, base_lr, value, one_worker, total_doubled, base_doubled, lr_doubled
        )
        expect(
            False,
            call,
            _(
                "which is not the linear scaling rule's rate, though the other cases agree with "
                "it: look for what is special about these inputs"
            ),
        )
    passed(
        _("scaled_learning_rate follows the linear scaling rule (lr x total batch / base batch)")
    )


def _ratio(changed: float | None, value: float) -> float | None:
    return None if changed is None else changed / value


def _expect_rule_property(
    call: str,
    base_lr: float,
    value: float,
    one_worker: float | None,
    total_doubled: float | None,
    base_doubled: float | None,
    lr_doubled: float | None,
) -> None:
    """Fail on the first property of the linear scaling rule that the probes show broken, in the
    words of the property (what doubling one input did), without the rate to match."""
    __tracebackhide__ = True

    def near(ratio: float | None, target: float) -> bool:
        return ratio is not None and abs(ratio - target) < 1e-6 * abs(target)

    by_total = _ratio(total_doubled, value)
    expect(
        near(by_total, 2.0),
        call,
        (
            _(
                "doubling total_batch leaves your rate unchanged: the rule makes it grow with "
                "the batch"
            )
            if near(by_total, 1.0)
            else _(
                "doubling total_batch makes your rate smaller: the rule makes it grow with "
                "the batch"
            )
            if by_total is not None and by_total < 1.0
            else _(
                "doubling total_batch does not double your rate: under the linear rule the rate "
                "is in proportion to the total batch, whatever the other inputs"
            )
        ),
    )
    by_base = _ratio(base_doubled, value)
    expect(
        near(by_base, 0.5),
        call,
        _(
            "doubling base_batch should halve the rate (the same total batch is then fewer base "
            "batches); yours changes it differently"
        ),
    )
    expect(
        near(_ratio(lr_doubled, value), 2.0),
        call,
        _("doubling base_lr should double the rate: the rule scales the base rate, whatever it is"),
    )
    expect(
        near(one_worker, base_lr),
        call,
        _(
            "with total_batch equal to base_batch (one worker) your rate is not the base rate: "
            "one worker's batch is the batch base_lr was chosen for"
        ),
    )


def trainer(
    build_trainer: Callable[..., Any], n_devices: int = 2, epochs: int = 2, batchsize: int = 8
) -> None:
    """build_trainer's MultiprocessParallelUpdater gets the iterators, optimizer and devices, and
    its extensions are stage 1's with Throughput over every GPU; then the trainer runs on the
    CPU."""
    __tracebackhide__ = True
    inputs = dict(n_devices=n_devices, epochs=epochs, batchsize=batchsize)
    facts = observe(seen.trainer_facts, build_trainer, run=False, **inputs)
    expect_trainer(facts)
    updater = facts["updater"]
    expect(
        updater["recording"] is True,
        _("the trainer trains with a {kind}, not a MultiprocessParallelUpdater").format(
            kind=updater.get("kind")
        ),
        _(
            "stage 2 runs one worker process per GPU; the updater that starts them and exchanges "
            "their gradients is the lesson's MultiprocessParallelUpdater"
        ),
    )
    given = updater["iterators"]
    expect(
        isinstance(given, list) and given == [True] * n_devices,
        (
            _(
                "MultiprocessParallelUpdater gets {count} iterator(s) for {n_devices} GPUs, "
                "not train_iters"
            )
            if isinstance(given, list)
            else _(
                "MultiprocessParallelUpdater gets no list of iterator(s) for {n_devices} GPUs, "
                "not train_iters"
            )
        ).format(count=len(given) if isinstance(given, list) else 0, n_devices=n_devices),
        _("one iterator per GPU: pass train_iters as it is"),
    )
    expect(
        updater["optimizer"] is True,
        _("MultiprocessParallelUpdater is not given the optimizer"),
        _("the main process's optimizer is the one whose weights the workers copy and update"),
    )
    expect(
        updater["devices"] is True,
        _("MultiprocessParallelUpdater is not given the devices"),
        _(
            "without them it does not know which GPU each worker uses; note that its third "
            "positional parameter is the converter, not the devices (see its reference page)"
        ),
    )
    expect(
        updater["device_count"] == n_devices
        and updater["main_first"] is True
        and updater["every_device"] is True,
        _(
            "MultiprocessParallelUpdater is given other devices than the {n_devices} of "
            "`devices` with 'main' first"
        ).format(n_devices=n_devices),
        _(
            "it got {count} device(s): every GPU of `devices` runs one worker, and 'main' is "
            "the one the main process trains and evaluates on"
        ).format(count=updater["device_count"]),
    )
    expect_epochs(facts, epochs, _("the job's log and results file go there"))
    evaluators = facts["evaluators"]
    expect(
        len(evaluators) == 1
        and evaluators[0]["on_test"] is True
        and evaluators[0]["repeats"] is False,
        _("the trainer needs one Evaluator on one pass over test"),
        _(
            "it has {count} Evaluator(s): as in stage 1, evaluation reads an iterator over the "
            "test set until it is exhausted, so it must not repeat"
        ).format(count=len(evaluators)),
    )
    expect(
        evaluators[0]["on_main"] is True,
        _(
            "the Evaluator does not run on devices['main'], the GPU where the updater keeps the "
            "model"
        ),
        _(
            "it runs on {device}: the main process holds the model there, and evaluating on "
            "another device would copy every weight first"
        ).format(device=evaluators[0]["device"]),
    )
    expect_throughput(
        facts,
        batchsize * n_devices,
        none=(
            _("build_trainer adds no course.Throughput"),
            _("the speedup over stage 1 is computed from the images/sec it reports"),
        ),
        moved=_("{n_devices} GPUs x {batchsize} move {total}").format(
            n_devices=n_devices, batchsize=batchsize, total=batchsize * n_devices
        ),
        fix=_(
            "every GPU draws its own minibatch at each step, so one step moves a minibatch per "
            "worker: tell Throughput how many workers there are"
        ),
    )
    expect_reports(facts)
    facts = observe(seen.trainer_facts, build_trainer, run=True, **inputs)
    log = expect_trained(facts, epochs, steps=3)  # the observer's parts hold 3 batches each
    expect(
        [facts["updates"], facts["epochs_drawn"]] == [epochs * 3, epochs],
        _(
            "the optimizer made {updates} updates and train_iters[0] went through {drawn} "
            "epochs; the trainer ran {ran} updates over {epochs} epochs"
        ).format(
            updates=facts["updates"], drawn=facts["epochs_drawn"], ran=epochs * 3, epochs=epochs
        ),
        _("the updater trains with the optimizer and the iterators build_trainer is given"),
    )
    passed(
        _(
            "build_trainer: MultiprocessParallelUpdater of the {n_devices} iterators, the "
            "optimizer and the devices, {epochs} epochs, Evaluator on devices['main'], "
            "Throughput over {n_devices} GPUs, LogReport and PrintReport; it trained {trained} "
            "epochs on the CPU (a stand-in recorded the updater's arguments; the job runs the "
            "real one on GPUs)"
        ).format(n_devices=n_devices, epochs=epochs, trained=len(log))
    )

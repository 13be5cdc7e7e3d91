"""The checks of the students' functions (course.notebook.checks), fast: the solutions pass, planted
mistakes fail.

The solutions are the functions of solutions/distributed_training/*.ipynb (tests/solutions.py reads
them), loaded from a real file as a notebook's namespace holds them; a planted mistake is a solution
with one piece of its source replaced. Stages 1 and 2 run in this process on real Chainer objects
(stage 2's MultiprocessParallelUpdater, which needs GPUs, through the check's recording stand-in).
Stage 3's check cells run as the notebook has them, visible and hidden lines: the functions on real
MPI ranks of simulated nodes (4 ranks on 2 nodes, then 6 on 3), once per distinct set of functions
and layout: one case per mistake.
"""

from __future__ import annotations

import inspect
import itertools
import linecache
import os
import textwrap

import chainer
import pytest
from chainer import training

from course.lessons.core import mn_ranks, multi_gpu, multi_node, single
from course.lessons.step_time import allreduce
from course.notebook.checks import CheckFailed
from tests.helpers import (
    STAGE_3_CELLS,
    check_cells,
    core_cases,
    notebook_module,
    replaced_once,
    run_stage_3_checks,
)
from tests.remote import RemoteRaised, remote
from tests.solutions import solution_functions


def planted(function, old: str, new: str = ""):
    """The solution `function` with `old` in its source replaced by `new`: a planted mistake, in a
    copy of its notebook's namespace (where a Remote handle finds it by name) and with its source
    where inspect finds it (a Remote handle carries the sources)."""
    source = replaced_once(textwrap.dedent(inspect.getsource(function)), old, new)
    filename = f"<planted {function.__name__} {next(_PLANTED)}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = dict(function.__globals__)
    exec(compile(source, filename, "exec"), namespace)
    return namespace[function.__name__]


_PLANTED = itertools.count()


@pytest.fixture(params=["here", "remote"])
def handle(request):
    """How a check gets the student's function: as it is (in a notebook), or as a Remote handle
    whose observations run in a forked child (under the grader). Either way, the same verdict."""
    return (lambda function: function) if request.param == "here" else remote


# --- stage 1: 01_single_gpu.ipynb
# ------------------------------------------------------------------


@pytest.fixture(scope="module")
def stage_1(tmp_path_factory):
    return notebook_module(tmp_path_factory.mktemp("stage1"), "single_gpu")


def test_stage_1_solutions_pass_the_visible_and_hidden_checks(stage_1, handle, capsys):
    single.iterators(handle(stage_1.make_iterators))
    single.iterators(handle(stage_1.make_iterators), n_train=50, n_test=13, batchsize=5)
    single.model_and_optimizer(handle(stage_1.make_model_and_optimizer))
    single.model_and_optimizer(
        handle(stage_1.make_model_and_optimizer), model_name="resnet", width=4, lr=0.03
    )
    single.trainer(handle(stage_1.build_trainer))
    single.trainer(handle(stage_1.build_trainer), epochs=3, batchsize=4)
    single.snapshots(handle(stage_1.add_snapshots))
    single.snapshots(handle(stage_1.add_snapshots), epochs=4, batchsize=3)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 8 and all(line.startswith("OK: ") for line in lines), lines
    assert "trained 3 epochs" in lines[-3]
    assert (
        "stopped after 3 epochs and resumed from its snapshot ended with the same weights"
        in lines[-1]
    )


@pytest.mark.parametrize(
    "old,new,words",
    [
        (
            "(train, batchsize)",
            "(train, batchsize, shuffle=False)",
            "returns the examples in their stored order",
        ),
        (
            "(train, batchsize)",
            "(train, batchsize, repeat=False)",
            "the training iterator stops after one epoch",
        ),
        (
            "repeat=False, shuffle=False",
            "shuffle=False",
            "the test iterator does not stop after one pass",
        ),
        (
            "(train, batchsize)",
            "(train, 2 * batchsize)",
            "draws 16 examples per step, not batchsize=8",
        ),
        (
            "(train, batchsize)",
            "(train[:20], batchsize)",
            "should visit every training example exactly once",
        ),
        (
            "return train_iter, test_iter",
            "return train_iter",
            "returned SerialIterator, not the pair",
        ),
    ],
    ids=[
        "not shuffled",
        "not repeating",
        "test repeats",
        "batch size",
        "part of train",
        "one iterator",
    ],
)
def test_make_iterators_mistakes(stage_1, handle, old, new, words):
    with pytest.raises(CheckFailed, match=words):
        single.iterators(handle(planted(stage_1.make_iterators, old, new)))


@pytest.mark.parametrize(
    "old,new,words",
    [
        ("MomentumSGD(args.lr)", "MomentumSGD()", r"learning rate is 0.01, not args.lr \(0.02\)"),
        (
            "    optimizer.setup(model)\n",
            "",
            "the optimizer is not set up on the model",
        ),
        ("width=args.width", "width=8", "the course's 'vgg' network at width 4 has"),
        (
            "L.Classifier(course.models.build(args.model, width=args.width))",
            "course.models.build(args.model, width=args.width)",
            "the model should be L.Classifier around the network",
        ),
        (
            "chainer.optimizers.MomentumSGD(args.lr)",
            'type("MomentumSGD", (chainer.optimizers.MomentumSGD,), {"lr": args.lr})(3 * args.lr)',
            r"moved the weights as a learning rate of 0.06 would, not as args.lr \(0.02\)",
        ),
    ],
    ids=["lr", "not set up", "width", "no classifier", "says one rate, steps at another"],
)
def test_make_model_and_optimizer_mistakes(stage_1, handle, old, new, words):
    with pytest.raises(CheckFailed, match=words):
        single.model_and_optimizer(handle(planted(stage_1.make_model_and_optimizer, old, new)))


@pytest.mark.parametrize(
    "old,new,words",
    [
        (
            "    trainer.extend(extensions.Evaluator(test_iter, model, device=device))\n",
            "",
            "the trainer needs one Evaluator on test_iter",
        ),
        (
            "    trainer.extend(course.Throughput(args.batchsize, warmup=args.warmup))\n",
            "",
            "the trainer has no course.Throughput",
        ),
        (
            "    trainer.extend(extensions.LogReport())\n",
            "",
            "the trainer needs a LogReport and a PrintReport",
        ),
        (
            '(args.epoch, "epoch")',
            '(1, "epoch")',
            r"stops after 1 epoch\(s\), not args.epoch \(2\)",
        ),
        ("out=args.out", 'out="result"', "the trainer writes to another folder than args.out"),
        (
            "StandardUpdater(train_iter, optimizer, device=device)",
            "StandardUpdater(test_iter, optimizer, device=device)",
            "the trainer's updater should be a StandardUpdater of train_iter and optimizer",
        ),
        (
            "trainer.extend(course.Throughput(args.batchsize, warmup=args.warmup))",
            'trainer.extend(course.Throughput(args.batchsize, warmup=1), trigger=(2, "iteration"))',
            r"Throughput timed \[6\] of the 12 steps",
        ),
    ],
    ids=["no Evaluator", "no Throughput", "no LogReport", "epochs", "out", "updater", "half timed"],
)
def test_build_trainer_mistakes(stage_1, handle, old, new, words):
    with pytest.raises(CheckFailed, match=words):
        single.trainer(handle(planted(stage_1.build_trainer, old, new)))


@pytest.mark.parametrize(
    "old,new,words",
    [
        (
            "extensions.snapshot(n_retains=2)",
            "extensions.snapshot_object(trainer.updater, 'updater_{.updater.iteration}', "
            "n_retains=2)",
            "the snapshot saves one object, not the trainer",
        ),
        ("n_retains=2", "", "every snapshot is kept, so a long run fills the disk"),
        (
            'trigger=(1, "epoch")',
            'trigger=(100, "iteration")',
            r"the snapshot runs every 100 iteration\(s\)",
        ),
        (
            "extensions.snapshot(n_retains=2)",
            "extensions.snapshot(filename='snap_{.updater.epoch}', n_retains=2)",
            "the next job looks for snapshot_iter_<iteration>",
        ),
        (
            "    trainer.extend(",
            "    pass  # trainer.extend(",
            "add_snapshots added 0 snapshot extensions",
        ),
    ],
    ids=["not the trainer", "every snapshot kept", "not per epoch", "another name", "none"],
)
def test_add_snapshots_mistakes(stage_1, handle, old, new, words):
    with pytest.raises(CheckFailed, match=words):
        single.snapshots(handle(planted(stage_1.add_snapshots, old, new)))


def test_a_resume_that_loses_the_random_state_is_caught(stage_1, handle, monkeypatch):
    """The check compares weights: a snapshot without the generators' states ends elsewhere
    (dropout, shuffle)."""
    from course.runtime import checkpoint

    monkeypatch.setattr(checkpoint.ResumeState, "serialize", lambda self, serializer: None)
    with pytest.raises(CheckFailed, match="the run ends with other weights"):
        single.snapshots(handle(stage_1.add_snapshots))


def test_the_students_own_errors_pass_through_with_a_note(stage_1):
    bare = planted(
        stage_1.make_iterators, "chainer.iterators.SerialIterator(train", "SerialIterator(train"
    )
    with pytest.raises(NameError) as raised:
        single.iterators(bare)
    assert (
        "(raised inside your make_iterators; the traceback above ends at your line)"
        in raised.value.__notes__
    )
    stub = planted(
        stage_1.make_iterators,
        "    train_iter = ",
        "    raise NotImplementedError()\n    train_iter = ",
    )
    with pytest.raises(NotImplementedError) as raised:
        single.iterators(stub)
    assert "make_iterators still has its PUT YOUR CODE HERE stub" in raised.value.__notes__[0]
    with pytest.raises(RemoteRaised, match="^NameError: name 'SerialIterator' is not defined"):
        single.iterators(remote(bare))  # the grader's child sends what the function raised


# --- stage 2: 02_multi_gpu.ipynb ------------------------------------------------------------------


@pytest.fixture(scope="module")
def stage_2(tmp_path_factory):
    return notebook_module(tmp_path_factory.mktemp("stage2"), "multi_gpu")


def test_stage_2_solutions_pass_the_visible_and_hidden_checks(stage_2, handle, capsys):
    multi_gpu.train_iterators(handle(stage_2.make_train_iterators))
    multi_gpu.train_iterators(handle(stage_2.make_train_iterators), n=65, n_devices=3, batchsize=4)
    multi_gpu.devices(handle(stage_2.make_devices))
    multi_gpu.devices(handle(stage_2.make_devices), id_lists=([7, 3], [0, 1, 2]))
    multi_gpu.learning_rate(handle(stage_2.scaled_learning_rate))
    multi_gpu.learning_rate(
        handle(stage_2.scaled_learning_rate), cases=((0.2, 16, 64, 0.8), (0.05, 100, 50, 0.025))
    )
    multi_gpu.trainer(handle(stage_2.build_trainer))
    multi_gpu.trainer(handle(stage_2.build_trainer), **HIDDEN_TRAINER_2)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 8 and all(line.startswith("OK: ") for line in lines), lines
    assert "{'main': 0, 'gpu1': 1}" in lines[2]
    assert "it trained 3 epochs on the CPU" in lines[-1]


def whole_set_per_gpu(train, batchsize, n_devices):
    return [chainer.iterators.SerialIterator(train, batchsize) for _ in range(n_devices)]


def uneven_parts(train, batchsize, n_devices):
    return [chainer.iterators.SerialIterator(part, batchsize) for part in (train[:40], train[40:])]


def half_the_set(train, batchsize, n_devices):
    parts = chainer.datasets.split_dataset_n_random(train[:32], n_devices)
    return [chainer.iterators.SerialIterator(part, batchsize) for part in parts]


def total_batch_each(train, batchsize, n_devices):
    parts = chainer.datasets.split_dataset_n_random(train, n_devices)
    return [chainer.iterators.SerialIterator(part, batchsize // n_devices) for part in parts]


@pytest.mark.parametrize(
    "mistake,words",
    [
        (whole_set_per_gpu, "some training examples are in more than one GPU's part"),
        (uneven_parts, r"the parts have different sizes \[24, 40\]"),
        (half_the_set, "the parts hold 32 of the 64 training examples"),
        (total_batch_each, r"the iterators draw \[4, 4\] examples per step"),
    ],
)
def test_make_train_iterators_mistakes(handle, mistake, words):
    with pytest.raises(CheckFailed, match=words):
        multi_gpu.train_iterators(handle(mistake))


def no_main(ids):
    return {f"gpu{i}": gpu for i, gpu in enumerate(ids)}


def two_gpus(ids):
    return {"main": ids[0], "gpu1": ids[1]}


def the_list(ids):
    return ids


@pytest.mark.parametrize(
    "mistake,words",
    [
        (no_main, r"make_devices\(\[0, 1\]\) gives 'main' = None"),
        (two_gpus, r"make_devices\(\[2, 3, 4, 5\]\) = \{'main': 2, 'gpu1': 3\}"),
        (the_list, r"make_devices\(\[0, 1\]\) returned list, not a dict"),
    ],
)
def test_make_devices_mistakes(handle, mistake, words):
    with pytest.raises(CheckFailed, match=words):
        multi_gpu.devices(handle(mistake))


def square_root_rule(lr, base, total):
    return lr * (total / base) ** 0.5


def not_scaled(lr, base, total):
    return lr


def inverse_rule(lr, base, total):
    return lr * base / total


def base_batch_ignored(lr, base, total):
    return lr * total / 32


def rate_not_scaled_by_base(lr, base, total):
    return 0.1 * total / base


def twice_the_rule(lr, base, total):
    return 2 * lr * total / base


def negative_rate(lr, base, total):
    return -lr * total / base


# Issue 41: each names the property the mistake breaks, never the rate to match nor the rule's
# formula; every failure names the case it failed on.
@pytest.mark.parametrize(
    "mistake,words",
    [
        (
            square_root_rule,
            r"returned 0.0707\d*\n  -> doubling total_batch does not double your rate",
        ),
        (
            not_scaled,
            r"\(0.05, 64, 128\) returned 0.05\n  -> doubling total_batch leaves your rate",
        ),
        (inverse_rule, r"returned 0.025\n  -> doubling total_batch makes your rate smaller"),
        (base_batch_ignored, r"returned 0.2\n  -> doubling base_batch should halve the rate"),
        (rate_not_scaled_by_base, r"\(0.05, 64, 128\) returned 0.2\n  -> doubling base_lr"),
        (twice_the_rule, r"returned 0.2\n  -> with total_batch equal to base_batch \(one worker\)"),
        (negative_rate, r"returned -0.1\n  -> a learning rate is a positive number"),
    ],
)
def test_scaled_learning_rate_that_is_not_linear(handle, mistake, words):
    with pytest.raises(CheckFailed, match=words) as failed:
        multi_gpu.learning_rate(handle(mistake))
    assert "expected" not in str(failed.value)
    assert "0.1\n" not in str(failed.value) or mistake is negative_rate


MPU = (
    "    updater = training.updaters.MultiprocessParallelUpdater(train_iters, optimizer, "
    "devices=devices)\n"
)
HIDDEN_TRAINER_2 = dict(
    n_devices=3, epochs=3, batchsize=4
)  # notebook 02's hidden test of build_trainer


@pytest.mark.parametrize(
    "old,new,words,hidden",
    [
        (
            MPU,
            "    if False:\n    "
            + MPU
            + "    updater = training.updaters.StandardUpdater(train_iters[0], optimizer)\n",
            "the trainer trains with a StandardUpdater, not a MultiprocessParallelUpdater",
            False,
        ),
        (
            "MultiprocessParallelUpdater(train_iters, optimizer, devices=devices)",
            "StandardUpdater(train_iters[0], optimizer)",
            "not a MultiprocessParallelUpdater",
            False,
        ),
        (", devices=devices)", ")", "MultiprocessParallelUpdater is not given the devices", False),
        (
            "optimizer, devices=devices)",
            "optimizer, devices)",
            "MultiprocessParallelUpdater is not given the devices",
            False,
        ),
        (
            "(train_iters, optimizer",
            "(train_iters[:1], optimizer",
            "gets 1 iterator\\(s\\) for 2 GPUs",
            False,
        ),
        (
            "workers=len(devices), ",
            "",
            "Throughput counts 8 images per step; 2 GPUs x 8 move 16",
            False,
        ),
        (
            "workers=len(devices)",
            "workers=2",
            "Throughput counts 8 images per step; 3 GPUs x 4 move 12",
            True,
        ),
        (
            ', device=devices["main"])',
            ")",
            "the Evaluator does not run on devices\\['main'\\]",
            False,
        ),
        pytest.param(
            "repeat=False, ",
            "",
            "the trainer needs one Evaluator on one pass over test",
            False,
            marks=pytest.mark.filterwarnings("ignore:The `repeat` property:UserWarning"),
        ),  # Chainer's own
        (
            "    trainer.extend(extensions.LogReport())\n",
            "",
            "the trainer needs a LogReport and a PrintReport",
            False,
        ),
    ],
    ids=[
        "MultiprocessParallelUpdater only if False",
        "StandardUpdater",
        "no devices",
        "devices as the converter",
        "one iterator",
        "one-worker Throughput",
        "Throughput of 2 workers",
        "Evaluator off the main GPU",
        "test repeats",
        "no LogReport",
    ],
)
def test_multi_gpu_trainer_mistakes(stage_2, handle, old, new, words, hidden):
    """Each fails the check (`hidden`: only its hidden test, on 3 GPUs)."""
    mistake = handle(planted(stage_2.build_trainer, old, new))
    if hidden:
        multi_gpu.trainer(mistake)  # the visible check, on 2 GPUs, cannot tell
    with pytest.raises(CheckFailed, match=words):
        multi_gpu.trainer(mistake, **(HIDDEN_TRAINER_2 if hidden else {}))


def test_multi_gpu_trainer_finds_the_updater_under_any_name_and_puts_it_back(stage_2, capsys):
    real = training.updaters.MultiprocessParallelUpdater
    source = replaced_once(
        textwrap.dedent(inspect.getsource(stage_2.build_trainer)),
        "training.updaters.MultiprocessParallelUpdater(",
        "MultiprocessParallelUpdater(",
    )
    namespace = {**stage_2.build_trainer.__globals__, "MultiprocessParallelUpdater": real}
    exec(compile(source, "<imported by name>", "exec"), namespace)
    multi_gpu.trainer(namespace["build_trainer"])
    assert capsys.readouterr().out.startswith(
        "OK: build_trainer: MultiprocessParallelUpdater of the 2 iterators"
    )
    assert namespace["MultiprocessParallelUpdater"] is real
    assert training.updaters.MultiprocessParallelUpdater is real
    assert training.updaters.multiprocess_parallel_updater.MultiprocessParallelUpdater is real


def test_multi_gpu_trainer_of_a_stub(stage_2):
    stub = planted(stage_2.build_trainer, MPU, "    raise NotImplementedError()\n" + MPU)
    with pytest.raises(NotImplementedError) as raised:
        multi_gpu.trainer(stub)
    assert "build_trainer still has its PUT YOUR CODE HERE stub" in raised.value.__notes__[0]
    with pytest.raises(RemoteRaised, match="^NotImplementedError"):
        multi_gpu.trainer(remote(stub))


# --- stage 3 on MPI ranks of simulated nodes: the solutions of 03_multi_node.ipynb, one mistake per
# case ---

# case -> (the function planted, old, new in its source), the one check it must fail, with words of
# its message
STAGE_3_MISTAKES = {
    "no scatter": (
        (
            "shard_datasets",
            "    train = chainermn.scatter_dataset(train, comm, shuffle=True, seed=seed)\n"
            "    test = chainermn.scatter_dataset(test, comm)\n",
            "",
        ),
        "check_scatter",
        "rank 1 has no train set",
    ),
    "scatter without shuffle": (
        ("shard_datasets", "(train, comm, shuffle=True, seed=seed)", "(train, comm)"),
        "check_scatter",
        "rank 0's training part is examples 0 to 15, one block of the "
        "stored order: it is not shuffled",
    ),
    "shuffled after the scatter": (
        (
            "shard_datasets",
            "(train, comm, shuffle=True, seed=seed)\n",
            "(train, comm)\n    train = chainer.datasets.split_dataset_random(train, "
            "len(train), seed)[0]\n",
        ),
        "check_scatter",
        "it is not shuffled",
    ),
    "shuffle without the seed": (
        ("shard_datasets", "shuffle=True, seed=seed)", "shuffle=True)"),
        "check_scatter",
        "two calls with the same seed split the training set differently",
    ),
    "plain optimizer": (
        (
            "make_optimizer",
            "    optimizer = chainermn.create_multi_node_optimizer(optimizer, comm)\n",
            "",
        ),
        "check_optimizer",
        "which does not exchange gradients between ranks",
    ),
    "lr scaled in make_optimizer": (
        ("make_optimizer", "MomentumSGD(args.lr)", "MomentumSGD(args.lr * comm.size)"),
        "check_optimizer",
        "with args.lr = 0.1 on 4 ranks the optimizer starts at 0.4",
    ),
    "lr x2 in make_optimizer": (
        ("make_optimizer", "MomentumSGD(args.lr)", "MomentumSGD(args.lr * 2)"),
        "check_optimizer",
        "with args.lr = 0.1 on 4 ranks the optimizer starts at 0.2",
    ),
    "no warm-up": (
        (
            "learning_rate_schedule",
            "(base_lr, base_lr * n_workers)",
            "(base_lr * n_workers, base_lr * n_workers)",
        ),
        "check_learning_rate_schedule",
        "no warm-up",
    ),
    "lr x2 in the schedule": (
        ("learning_rate_schedule", "base_lr * n_workers)", "base_lr * 2)"),
        "check_learning_rate_schedule",
        "after the warm-up the rate is 0.2, not base_lr x n_workers = 0.4",
    ),
    "GPU 0 for every rank": (
        ("device_for_rank", 'f"@cupy:{comm.intra_rank}"', '"@cupy:0"'),
        "check_device_binding",
        "would use ['@cupy:0', '@cupy:0', '@cupy:0', '@cupy:0']",
    ),
    "GPU by rank": (
        ("device_for_rank", "comm.intra_rank", "comm.rank"),
        "check_device_binding",
        "would use ['@cupy:0', '@cupy:1', '@cupy:2', '@cupy:3']; the GPU of each rank's number "
        "within "
        "its node is ['@cupy:0', '@cupy:1', '@cupy:0', '@cupy:1']",
    ),
    "GPU by rank % 2": (
        ("device_for_rank", "comm.intra_rank", "comm.rank % 2"),
        "check_device_binding",
        "ranks 0-5 would use ['@cupy:0', '@cupy:1', '@cupy:0', '@cupy:1', '@cupy:0', '@cupy:1']",
    ),
    # The stage-3 trainer is judged on what it did (issue 29: behaviour, not class names).
    "reports on every rank": (
        ("build_trainer", "if comm.rank == 0:", "if True:"),
        "check_trainer",
        "rank 1 also reports (LogReport, PrintReport)",
    ),
    "evaluates its own test part only": (
        (
            "build_trainer",
            "trainer.extend(chainermn.create_multi_node_evaluator(evaluator, comm))",
            "trainer.extend(evaluator)",
        ),
        "check_trainer",
        "the ranks evaluate only their own test part",
    ),
    "trains with an optimizer of its own": (
        (
            "build_trainer",
            "StandardUpdater(train_iter, optimizer, device=device)",
            "StandardUpdater(train_iter, chainer.optimizers.SGD(args.lr).setup(model), "
            "device=device)",
        ),
        "check_trainer",
        "the optimizer it was given 0 updates after its first",
    ),
    "Throughput of 2 workers": (
        ("build_trainer", "comm=comm", "workers=2"),
        "check_trainer",
        "Throughput counts 16 images per step; 4 ranks x 8 move 32",
    ),
    "Throughput of 4 workers": (
        ("build_trainer", "comm=comm", "workers=4"),
        "check_trainer",
        "Throughput counts 32 images per step; 6 ranks x 8 move 48",
    ),
    "no margin": (
        (
            "resource_request",
            "(training + max(0.2 * training, 600)) / 60",
            "training / 60",
        ),
        "check_resource_request",
        "walltime 00:16:00 leaves too little margin: 10 epoch(s) of 95 s take 00:15:50",
    ),
    "misspelt select": (
        ("resource_request", "select=", "selct="),
        "check_resource_request",
        "unknown resource 'selct'",
    ),
    "a node per rank": (
        ("resource_request", 'f"{nodes}:mpiprocs={ranks // nodes}"', 'f"{ranks}:mpiprocs=1"'),
        "check_resource_request",
        "4 nodes for 4 ranks leave part of each idle: a node of pbs-gpu has 2 GPU",
    ),
    "ranks by cores on a GPU site": (
        ("resource_request", "site.gpus_per_node or ", ""),
        "check_resource_request",
        "4 ranks per node would share what a node has: a node of pbs-gpu has 2 GPU",
    ),
    "threads not asked": (
        (
            "resource_request",
            '    if threads_per_rank > 1:\n        chunk += f":ompthreads={threads_per_rank}"\n',
            "",
        ),
        "check_resource_request",
        "each rank runs 4 thread(s), and the lines ask for no ompthreads",
    ),
    "no group": (
        (
            "resource_request",
            '    if site.group:\n        lines.append(f"#PBS -W group_list={site.group}")\n',
            "",
        ),
        "check_resource_request",
        "runs jobs in group gt00; the lines name no group",
    ),
    "a queue where there is none": (
        ("resource_request", " if site.queue else []", ""),
        "check_resource_request",
        "has no queues, and the lines name queue None",
    ),
}


@pytest.mark.integration
def test_stage_3_solutions_pass_every_check_and_hidden_test(tmp_path, capsys):
    assert tuple(check_cells("multi_node")) == STAGE_3_CELLS
    module = notebook_module(tmp_path, "multi_node")
    assert run_stage_3_checks(module) == {}
    lines = capsys.readouterr().out.splitlines()
    # The grader's Remote handles: the same verdicts, from the same (cached) run of the ranks.
    assert run_stage_3_checks(module, handles=True) == {}
    assert capsys.readouterr().out.splitlines() == lines
    assert len(lines) == 2 * len(STAGE_3_CELLS) and all(
        line.startswith("OK: ") for line in lines
    ), lines
    assert "(@cupy:0, @cupy:1, @cupy:0, @cupy:1; 4 ranks on 2 simulated nodes of 2" in lines[2]
    assert (
        "(@cupy:0, @cupy:0, @cupy:0, @cupy:1, @cupy:1, @cupy:1; 6 ranks on 3 simulated nodes of 2"
        in lines[3]
    )
    assert lines[8].startswith(
        "OK: learning_rate_schedule: the rate ramps linearly from 0.1 to 0.4 over 8 updates"
    )


# One mistake per check in make test (each case runs every stage-3 check's ranks); the others in
# make test-extended.
STAGE_3_CORE = {
    "no scatter",
    "plain optimizer",
    "no warm-up",
    "GPU by rank",
    "trains with an optimizer of its own",
    "misspelt select",
}


@pytest.mark.integration
@pytest.mark.parametrize("case", core_cases(STAGE_3_MISTAKES, STAGE_3_CORE))
def test_a_stage_3_mistake_fails_exactly_its_check(tmp_path, case):
    (name, old, new), check, words = STAGE_3_MISTAKES[case]
    source = replaced_once(solution_functions("multi_node")[name], old, new)
    module = notebook_module(tmp_path, "multi_node", **{name: source})
    failed = run_stage_3_checks(module)
    assert list(failed) == [check], failed
    assert words in failed[check], failed[check]
    assert run_stage_3_checks(module, handles=True) == failed


# --- stage 3's checks judge what the functions did, never the names of their classes (issue 29,
# case 5): each attack passed on the checks of before, with the class name they looked for ---

# case -> (the function planted, its source, the check it must fail, words of its message)
STAGE_3_ATTACKS = {
    "an optimizer named _MultiNodeOptimizer that zeroes the weights": (
        "make_optimizer",
        """
        def make_optimizer(args, comm, model):
            class _MultiNodeOptimizer(chainer.optimizers.MomentumSGD):
                def update(self, lossfun=None, *inputs, **options):
                    super().update(lossfun, *inputs, **options)
                    for param in self.target.params():
                        param.array[...] = 0

            optimizer = _MultiNodeOptimizer(args.lr)
            optimizer.setup(model)
            return optimizer
        """,
        "optimizer",
        "ranks hold the same weights, but not rank 0's moved by args.lr (0.1) along the gradient "
        "averaged over the ranks",
    ),
    "a plain optimizer whose ranks' json.dumps claims a multi-node one": (
        "make_optimizer",
        """
        def make_optimizer(args, comm, model):
            import json

            dumps = json.dumps

            def claimed(facts, *more, **options):
                if isinstance(facts, dict) and "ranks" in facts:
                    first = facts["ranks"][0].get("optimizer", {})
                    for found in facts["ranks"]:
                        found["optimizer"] = {**first, "class": "_MultiNodeOptimizer"}
                return dumps(facts, *more, **options)

            json.dumps = claimed
            optimizer = chainer.optimizers.MomentumSGD(args.lr)
            optimizer.setup(model)
            return optimizer
        """,
        "optimizer",
        # the probe writes its facts with what it bound before the student's module ran: the
        # wrapped json.dumps never sees them, and the real weights differ
        "which does not exchange gradients between ranks",
    ),
    "a communicator named NaiveCommunicator that exchanges nothing": (
        "make_communicator",
        """
        def make_communicator(name):
            from mpi4py import MPI

            class NaiveCommunicator:
                size, rank = MPI.COMM_WORLD.size, MPI.COMM_WORLD.rank

                def bcast_data(self, model):
                    pass

                def multi_node_mean_grad(self, model, zero_fill=False):
                    pass

            return NaiveCommunicator()
        """,
        "communicator",
        "did not get rank 0's weights (bcast_data) or the mean of the ranks' gradients",
    ),
}


@pytest.mark.integration
@pytest.mark.parametrize("attack", STAGE_3_ATTACKS)
def test_a_stage_3_check_is_not_fooled_by_class_names(tmp_path, attack):
    name, source, check, words = STAGE_3_ATTACKS[attack]
    module = notebook_module(tmp_path, "multi_node", **{name: textwrap.dedent(source).lstrip()})
    for function in (getattr(module, name), remote(getattr(module, name))):
        with pytest.raises(CheckFailed) as failed:
            getattr(multi_node, check)(function)
        assert words in str(failed.value)


@pytest.mark.integration
def test_the_probes_cache_carries_to_another_process_through_cached_and_remember(
    tmp_path, monkeypatch
):
    """cached() and remember() carry a submission's probe runs from one test cell's process to
    the next (the grader's own channel): a remembered run is not launched again."""
    function = notebook_module(tmp_path, "multi_node").make_communicator
    first = mn_ranks.probe(function)
    entries = mn_ranks.cached()
    assert [entry["seed"] for entry in entries.values()].count(first["seed"]) == 1

    def launch(*args):
        raise AssertionError("a remembered run was launched again")

    monkeypatch.setattr(mn_ranks, "_facts", {})
    monkeypatch.setattr(mn_ranks, "_launch", launch)
    mn_ranks.remember(entries)
    assert mn_ranks.probe(remote(function)) == first
    with pytest.raises(ValueError, match="not a cached probe run: 'forged'"):
        mn_ranks.remember({"forged": {"seed": "7", "ranks": []}})


def test_a_checks_scratch_folders_are_gone_when_its_process_ends(tmp_path):
    import subprocess

    from tests.helpers import PYTHON

    script = (
        "from course.notebook.checks import inputs\n"
        "print(inputs.small_args().out)\n"
        "print(inputs.scratch_folder())\n"
    )
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    run = subprocess.run([PYTHON, "-c", script], capture_output=True, text=True, env=env)
    assert run.returncode == 0, run.stderr
    folders = run.stdout.split()
    assert len(folders) == 2 and all(folder.startswith(str(tmp_path)) for folder in folders)
    assert list(tmp_path.iterdir()) == []


class _Liar(float):
    """A float that says it equals, and differs by nothing from, whatever it meets."""

    def __eq__(self, other):
        return True

    def __sub__(self, other):
        return 0.0

    def __float__(self):
        return 0.1

    __hash__ = float.__hash__


def test_a_number_that_lies_about_itself_is_read_for_what_it_is():
    """A float subclass whose arithmetic and conversion lie still holds its own value, and that is
    what the checks compare."""
    with pytest.raises(CheckFailed, match=r"returned 0.0\n  -> a learning rate is a positive"):
        multi_gpu.learning_rate(lambda lr, base, total: _Liar(0.0))
    with pytest.raises(CheckFailed, match="returned 0 s, which is not the alpha-beta model's"):
        allreduce.cost_model(lambda *args: _Liar(0.0))


def lying_rate(lr, base, total):
    return _Liar(0.0)


def test_a_learning_rate_that_lies_about_itself_is_read_for_what_it_is(handle):
    """Read where the function ran: what crosses to the check is the number's own value."""
    with pytest.raises(CheckFailed, match=r"returned 0.0\n  -> a learning rate is a positive"):
        multi_gpu.learning_rate(handle(lying_rate))


def test_a_forked_observers_scratch_folders_are_gone_after_it_leaves_by_os_exit(tmp_path):
    """The grader's observing child and the stage-3 probe's ranks leave by os._exit, which skips
    atexit: they remove the folders they made first, and only those (not their parent's)."""
    import subprocess

    from tests.helpers import PYTHON

    script = (
        "import os\n"
        "from course.notebook.checks import inputs\n"
        "parents = inputs.scratch_folder()\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    inputs.small_args()\n"
        "    inputs.remove_scratch()\n"
        "    os._exit(0)\n"
        "os.waitpid(pid, 0)\n"
        "print(sorted(os.listdir(os.path.dirname(parents))) == [os.path.basename(parents)])\n"
    )
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    run = subprocess.run([PYTHON, "-c", script], capture_output=True, text=True, env=env)
    assert (run.returncode, run.stdout.strip()) == (0, "True"), run.stderr
    assert list(tmp_path.iterdir()) == []

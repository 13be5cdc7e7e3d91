"""The checks of the students' functions (course.notebook.checks), fast: the solutions pass, planted mistakes fail.

Stages 1 and 2 run in this process on real Chainer objects. Stage 3's checks run the functions
on two real MPI ranks (mpiexec -n 2, once per distinct set of functions): one case per mistake.
"""
from __future__ import annotations

import importlib.util
import inspect
import textwrap

import chainer
import chainer.links as L
import pytest
from chainer import training
from chainer.training import extensions

import course
from course.notebook.checks import CheckFailed, multi_gpu, multi_node, single

# --- stage 1: the solutions, as in solutions/distributed_training/01_single_gpu.ipynb ----------------


def make_iterators(train, test, batchsize):
    train_iter = chainer.iterators.SerialIterator(train, batchsize)
    test_iter = chainer.iterators.SerialIterator(test, batchsize, repeat=False, shuffle=False)
    return train_iter, test_iter


def make_model_and_optimizer(args, device):
    model = L.Classifier(course.models.build(args.model, width=args.width))
    model.to_device(device)
    optimizer = chainer.optimizers.MomentumSGD(args.lr)
    optimizer.setup(model)
    optimizer.add_hook(chainer.optimizer_hooks.WeightDecay(5e-4))
    return model, optimizer


def build_trainer(args, train_iter, test_iter, model, optimizer, device):
    updater = training.updaters.StandardUpdater(train_iter, optimizer, device=device)
    trainer = training.Trainer(updater, (args.epoch, "epoch"), out=args.out)
    trainer.extend(extensions.Evaluator(test_iter, model, device=device))
    trainer.extend(course.Throughput(args.batchsize, warmup=args.warmup))
    trainer.extend(extensions.LogReport())
    trainer.extend(extensions.PrintReport(
        ["epoch", "main/loss", "validation/main/loss", "main/accuracy", "validation/main/accuracy",
         "throughput", "elapsed_time"]))
    return trainer


def planted(function, old: str, new: str = ""):
    """The solution `function` with `old` in its source replaced by `new`: a planted mistake."""
    source = textwrap.dedent(inspect.getsource(function))
    assert source.count(old) == 1, f"{old!r} is not once in {function.__name__}"
    namespace = {}
    exec(compile(source.replace(old, new), f"<planted {function.__name__}>", "exec"), globals(), namespace)
    return namespace[function.__name__]


def test_stage_1_solutions_pass_the_visible_and_hidden_checks(capsys):
    single.iterators(make_iterators)
    single.iterators(make_iterators, n_train=50, n_test=13, batchsize=5)
    single.model_and_optimizer(make_model_and_optimizer)
    single.model_and_optimizer(make_model_and_optimizer, model_name="resnet", width=4, lr=0.03)
    single.trainer(build_trainer)
    single.trainer(build_trainer, epochs=3, batchsize=4)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 6 and all(line.startswith("OK: ") for line in lines), lines
    assert "trained 3 epochs" in lines[-1]


@pytest.mark.parametrize("old,new,words", [
    ("(train, batchsize)", "(train, batchsize, shuffle=False)", "returns the examples in their stored order"),
    ("(train, batchsize)", "(train, batchsize, repeat=False)", "the training iterator stops after one epoch"),
    ("repeat=False, shuffle=False", "shuffle=False", "the test iterator does not stop after one pass"),
    ("(train, batchsize)", "(train, 2 * batchsize)", "draws 16 examples per step, not batchsize=8"),
    ("(train, batchsize)", "(train[:20], batchsize)", "should visit every training example exactly once"),
    ("return train_iter, test_iter", "return train_iter", "returned SerialIterator, not the pair"),
], ids=["not shuffled", "not repeating", "test repeats", "batch size", "part of train", "one iterator"])
def test_make_iterators_mistakes(old, new, words):
    with pytest.raises(CheckFailed, match=words):
        single.iterators(planted(make_iterators, old, new))


@pytest.mark.parametrize("old,new,words", [
    ("MomentumSGD(args.lr)", "MomentumSGD()", r"learning rate is 0.01, not args.lr \(0.02\)"),
    ("    optimizer.setup(model)\n    optimizer.add_hook(chainer.optimizer_hooks.WeightDecay(5e-4))\n", "",
     "the optimizer is not set up on the model"),
    ("width=args.width", "width=8", r"course.models.build\('vgg', width=4\) has"),
    ("L.Classifier(course.models.build(args.model, width=args.width))",
     "course.models.build(args.model, width=args.width)", "the model should be L.Classifier around the network"),
], ids=["lr", "not set up", "width", "no classifier"])
def test_make_model_and_optimizer_mistakes(old, new, words):
    with pytest.raises(CheckFailed, match=words):
        single.model_and_optimizer(planted(make_model_and_optimizer, old, new))


@pytest.mark.parametrize("old,new,words", [
    ("    trainer.extend(extensions.Evaluator(test_iter, model, device=device))\n", "",
     "the trainer needs one Evaluator on test_iter"),
    ("    trainer.extend(course.Throughput(args.batchsize, warmup=args.warmup))\n", "",
     "the trainer has no course.Throughput"),
    ("    trainer.extend(extensions.LogReport())\n", "", "the trainer needs a LogReport and a PrintReport"),
    ("(args.epoch, \"epoch\")", "(1, \"epoch\")", r"stops after 1 epoch\(s\), not args.epoch \(2\)"),
    ("out=args.out", "out=\"result\"", "the trainer writes to another folder than args.out"),
    ("StandardUpdater(train_iter, optimizer, device=device)", "StandardUpdater(test_iter, optimizer, device=device)",
     "the trainer's updater should be a StandardUpdater of train_iter and optimizer"),
], ids=["no Evaluator", "no Throughput", "no LogReport", "epochs", "out", "updater"])
def test_build_trainer_mistakes(old, new, words):
    with pytest.raises(CheckFailed, match=words):
        single.trainer(planted(build_trainer, old, new))


def test_the_students_own_errors_pass_through_with_a_note():
    with pytest.raises(NameError) as raised:
        single.iterators(planted(make_iterators, "chainer.iterators.SerialIterator(train", "SerialIterator(train"))
    assert "(raised inside your make_iterators; the traceback above ends at your line)" in raised.value.__notes__
    stub = planted(make_iterators, "    train_iter = ", "    raise NotImplementedError()\n    train_iter = ")
    with pytest.raises(NotImplementedError) as raised:
        single.iterators(stub)
    assert "make_iterators still has its PUT YOUR CODE HERE stub" in raised.value.__notes__[0]


# --- stage 2: the solutions, as in 02_multi_gpu.ipynb ---------------------------------------------


def make_train_iterators(train, batchsize, n_devices):
    parts = chainer.datasets.split_dataset_n_random(train, n_devices)
    return [chainer.iterators.SerialIterator(part, batchsize) for part in parts]


def make_devices(gpu_ids):
    devices = {"main": gpu_ids[0]}
    for i, gpu_id in enumerate(gpu_ids[1:], start=1):
        devices[f"gpu{i}"] = gpu_id
    return devices


def scaled_learning_rate(base_lr, base_batch, total_batch):
    return base_lr * total_batch / base_batch


def build_multi_gpu_trainer(args, train_iters, test, model, optimizer, devices):
    updater = training.updaters.MultiprocessParallelUpdater(train_iters, optimizer, devices=devices)
    trainer = training.Trainer(updater, (args.epoch, "epoch"), out=args.out)
    test_iter = chainer.iterators.SerialIterator(test, args.batchsize, repeat=False, shuffle=False)
    trainer.extend(extensions.Evaluator(test_iter, model, device=devices["main"]))
    trainer.extend(course.Throughput(args.batchsize, workers=len(devices), warmup=args.warmup))
    trainer.extend(extensions.LogReport())
    trainer.extend(extensions.PrintReport(
        ["epoch", "main/loss", "validation/main/loss", "main/accuracy", "validation/main/accuracy",
         "throughput", "elapsed_time"]))
    return trainer


def test_stage_2_solutions_pass_the_visible_and_hidden_checks(capsys):
    multi_gpu.train_iterators(make_train_iterators)
    multi_gpu.train_iterators(make_train_iterators, n=65, n_devices=3, batchsize=4)
    multi_gpu.devices(make_devices)
    multi_gpu.devices(make_devices, id_lists=([7, 3], [0, 1, 2]))
    multi_gpu.learning_rate(scaled_learning_rate)
    multi_gpu.learning_rate(scaled_learning_rate, cases=((0.2, 16, 64, 0.8), (0.05, 100, 50, 0.025)))
    multi_gpu.trainer_source(build_multi_gpu_trainer)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 7 and all(line.startswith("OK: ") for line in lines), lines
    assert "{'main': 0, 'gpu1': 1}" in lines[2]


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


@pytest.mark.parametrize("mistake,words", [
    (whole_set_per_gpu, "some training examples are in more than one GPU's part"),
    (uneven_parts, r"the parts have different sizes \[24, 40\]"),
    (half_the_set, "the parts hold 32 of the 64 training examples"),
    (total_batch_each, r"the iterators draw \[4, 4\] examples per step"),
])
def test_make_train_iterators_mistakes(mistake, words):
    with pytest.raises(CheckFailed, match=words):
        multi_gpu.train_iterators(mistake)


@pytest.mark.parametrize("mistake,words", [
    (lambda ids: {f"gpu{i}": gpu for i, gpu in enumerate(ids)}, r"make_devices\(\[0, 1\]\) gives 'main' = None"),
    (lambda ids: {"main": ids[0], "gpu1": ids[1]}, r"make_devices\(\[2, 3, 4, 5\]\) = \{'main': 2, 'gpu1': 3\}"),
    (lambda ids: ids, r"make_devices\(\[0, 1\]\) returned list, not a dict"),
])
def test_make_devices_mistakes(mistake, words):
    with pytest.raises(CheckFailed, match=words):
        multi_gpu.devices(mistake)


@pytest.mark.parametrize("mistake,words", [
    (lambda lr, base, total: lr * (total / base) ** 0.5, r"scaled_learning_rate\(0.05, 64, 128\) = 0.0707"),
    (lambda lr, base, total: lr, r"scaled_learning_rate\(0.05, 64, 128\) = 0.05, expected 0.1"),
    (lambda lr, base, total: lr * base / total, r"= 0.025, expected 0.1"),
])
def test_scaled_learning_rate_that_is_not_linear(mistake, words):
    with pytest.raises(CheckFailed, match=words):
        multi_gpu.learning_rate(mistake)


def standard_updater(args, train_iters, test, model, optimizer, devices):
    updater = training.updaters.StandardUpdater(train_iters[0], optimizer, device=devices["main"])
    trainer = training.Trainer(updater, (args.epoch, "epoch"), out=args.out)
    trainer.extend(extensions.Evaluator(chainer.iterators.SerialIterator(test, 8, repeat=False), model))
    trainer.extend(course.Throughput(args.batchsize, workers=len(devices)))
    return trainer


def no_devices(args, train_iters, test, model, optimizer, devices):
    updater = training.updaters.MultiprocessParallelUpdater(train_iters, optimizer)
    return training.Trainer(updater, (args.epoch, "epoch"), out=args.out)


def one_worker_throughput(args, train_iters, test, model, optimizer, devices):
    updater = training.updaters.MultiprocessParallelUpdater(train_iters, optimizer, devices=devices)
    trainer = training.Trainer(updater, (args.epoch, "epoch"), out=args.out)
    trainer.extend(extensions.Evaluator(chainer.iterators.SerialIterator(test, 8, repeat=False), model))
    trainer.extend(course.Throughput(args.batchsize, warmup=args.warmup))
    return trainer


def stub_trainer(args, train_iters, test, model, optimizer, devices):
    # PUT YOUR CODE HERE
    raise NotImplementedError()


@pytest.mark.parametrize("mistake,words", [
    (standard_updater, "build_trainer does not create a MultiprocessParallelUpdater"),
    (no_devices, "MultiprocessParallelUpdater is not given the devices"),
    (one_worker_throughput, "Throughput counts one worker only"),
])
def test_multi_gpu_trainer_source_mistakes(mistake, words):
    with pytest.raises(CheckFailed, match=words):
        multi_gpu.trainer_source(mistake)


def test_multi_gpu_trainer_source_of_a_stub():
    with pytest.raises(NotImplementedError, match="still has its PUT YOUR CODE HERE stub"):
        multi_gpu.trainer_source(stub_trainer)


# --- stage 3 on two MPI ranks: the solutions of 03_multi_node.ipynb, and one mistake per case -------

STAGE_3_IMPORTS = """\
import chainer
import chainer.links as L
import chainermn
from chainer import training
from chainer.training import extensions

import course
"""

STAGE_3 = {
    "make_communicator": '''
def make_communicator(name):
    return chainermn.create_communicator(name)
''',
    "device_for_rank": '''
def device_for_rank(comm, use_gpu):
    return f"@cupy:{comm.intra_rank}" if use_gpu else "@numpy"
''',
    "shard_datasets": '''
def shard_datasets(train, test, comm, seed):
    train = chainermn.scatter_dataset(train, comm, shuffle=True, seed=seed)
    test = chainermn.scatter_dataset(test, comm)
    return train, test
''',
    "make_optimizer": '''
def make_optimizer(args, comm, model):
    optimizer = chainer.optimizers.MomentumSGD(args.lr * comm.size)
    optimizer = chainermn.create_multi_node_optimizer(optimizer, comm)
    optimizer.setup(model)
    optimizer.add_hook(chainer.optimizer_hooks.WeightDecay(5e-4))
    return optimizer
''',
    "build_trainer": '''
def build_trainer(args, comm, train, test, model, optimizer, device):
    train_iter = chainer.iterators.SerialIterator(train, args.batchsize)
    test_iter = chainer.iterators.SerialIterator(test, args.batchsize, repeat=False, shuffle=False)
    updater = training.updaters.StandardUpdater(train_iter, optimizer, device=device)
    trainer = training.Trainer(updater, (args.epoch, "epoch"), out=args.out)
    evaluator = extensions.Evaluator(test_iter, model, device=device)
    trainer.extend(chainermn.create_multi_node_evaluator(evaluator, comm))
    trainer.extend(course.Throughput(args.batchsize, comm=comm, warmup=args.warmup))
    if comm.rank == 0:
        trainer.extend(extensions.LogReport())
        trainer.extend(extensions.PrintReport(
            ["epoch", "main/loss", "validation/main/loss", "main/accuracy", "validation/main/accuracy",
             "throughput", "elapsed_time"]))
    return trainer
''',
}

# the notebook's grade_id -> (the check, the function it checks)
STAGE_3_CHECKS = {
    "check_communicator": (multi_node.communicator, "make_communicator"),
    "check_device_binding": (multi_node.device_binding, "device_for_rank"),
    "check_scatter": (multi_node.scatter, "shard_datasets"),
    "check_optimizer": (multi_node.optimizer, "make_optimizer"),
    "check_trainer": (multi_node.trainer, "build_trainer"),
}

# (the function replaced, its planted source) -> the one check it must fail, with words of its message
STAGE_3_MISTAKES = {
    "no scatter": ('''
def shard_datasets(train, test, comm, seed):
    return train, test
''', "check_scatter", "rank 1 has no train set"),
    "scatter without shuffle": ('''
def shard_datasets(train, test, comm, seed):
    return chainermn.scatter_dataset(train, comm), chainermn.scatter_dataset(test, comm)
''', "check_scatter", "it is not shuffled"),
    "shuffle without the seed": ('''
def shard_datasets(train, test, comm, seed):
    return chainermn.scatter_dataset(train, comm, shuffle=True), chainermn.scatter_dataset(test, comm)
''', "check_scatter", "two calls with the same seed split the training set differently"),
    "plain optimizer": ('''
def make_optimizer(args, comm, model):
    optimizer = chainer.optimizers.MomentumSGD(args.lr * comm.size)
    optimizer.setup(model)
    return optimizer
''', "check_optimizer", "which does not exchange gradients between ranks"),
    "GPU 0 for every rank": ('''
def device_for_rank(comm, use_gpu):
    return "@cupy:0" if use_gpu else "@numpy"
''', "check_device_binding", "would use ['@cupy:0', '@cupy:0']"),
}


def stage_3_module(folder, **replaced):
    """The five functions in one module of a real file, as a notebook's namespace holds them."""
    sources = {**STAGE_3, **replaced}
    path = folder / "stage3_notebook.py"
    path.write_text(STAGE_3_IMPORTS + "".join("\n" + textwrap.dedent(sources[name]) for name in STAGE_3))
    spec = importlib.util.spec_from_file_location(f"stage3_{folder.name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_stage_3_checks(module) -> dict[str, str]:
    """{check: its CheckFailed message} of the checks that fail."""
    failed = {}
    for name, (check, function) in STAGE_3_CHECKS.items():
        try:
            check(getattr(module, function))
        except CheckFailed as e:
            failed[name] = str(e)
    return failed


def test_stage_3_solutions_pass_every_check_on_two_ranks(tmp_path, capsys):
    assert run_stage_3_checks(stage_3_module(tmp_path)) == {}
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 5 and all(line.startswith("OK: ") for line in lines), lines


@pytest.mark.parametrize("case", STAGE_3_MISTAKES)
def test_a_stage_3_mistake_fails_exactly_its_check(tmp_path, case):
    source, check, words = STAGE_3_MISTAKES[case]
    name = source.split("def ", 1)[1].split("(", 1)[0]
    failed = run_stage_3_checks(stage_3_module(tmp_path, **{name: source}))
    assert list(failed) == [check], failed
    assert words in failed[check], failed[check]

"""The kit's own CIFAR-10 training: one device, or one ChainerMN rank per device under mpiexec.

    python -m course train --device @numpy --width 16 --epoch 2
    mpiexec -n 2 python -m course train --communicator naive --width 16

The benchmark measures the kit with it and the GPU tests run it; students write their own
versions of these pieces in the notebooks.
"""

from __future__ import annotations

import chainer
import chainer.links as L
from chainer import training
from chainer.training import extensions

from course.contracts import stages
from course.runtime import harness, models
from course.runtime.throughput import Throughput

REPORT = [
    "epoch",
    "main/loss",
    "validation/main/loss",
    "main/accuracy",
    "validation/main/accuracy",
    "throughput",
    "elapsed_time",
]


def warmup_schedule(
    base_lr: float, n_workers: int, warmup_iterations: int
) -> extensions.LinearShift:
    """The learning rate from base_lr to n_workers x base_lr, linearly over the first iterations."""
    return extensions.LinearShift("lr", (base_lr, base_lr * n_workers), (0, warmup_iterations))


def build_trainer(args, train, test, device, comm=None) -> training.Trainer:
    model = L.Classifier(models.build(args.model, width=args.width))
    model.to_device(device)
    optimizer = chainer.optimizers.MomentumSGD(args.lr)
    if comm is not None:
        optimizer = chainermn().create_multi_node_optimizer(optimizer, comm)
    optimizer.setup(model)
    harness.add_weight_decay(optimizer)
    train_iter = chainer.iterators.SerialIterator(train, args.batchsize)
    updater = training.updaters.StandardUpdater(train_iter, optimizer, device=device)
    stop = (args.iterations, "iteration") if args.iterations else (args.epoch, "epoch")
    trainer = training.Trainer(updater, stop, out=args.out)
    if args.evaluate:
        test_iter = chainer.iterators.SerialIterator(
            test, args.batchsize, repeat=False, shuffle=False
        )
        evaluator = extensions.Evaluator(test_iter, model, device=device)
        if comm is not None:
            evaluator = chainermn().create_multi_node_evaluator(evaluator, comm)
        trainer.extend(evaluator)
    trainer.extend(Throughput(args.batchsize, comm=comm, warmup=args.warmup))
    harness.apply_lr_rule(trainer, args, comm.size if comm is not None else 1, warmup_schedule)
    if comm is None or comm.rank == 0:
        trainer.extend(extensions.LogReport())
        trainer.extend(extensions.PrintReport(REPORT))
    return trainer


def chainermn():
    import chainermn as mn  # imports mpi4py, which starts MPI: only where ranks are wanted

    return mn


def _own_flags(parser) -> None:
    parser.add_argument(
        "--iterations", type=int, default=0, help="stop after this many steps (not epochs)"
    )
    parser.add_argument(
        "--no-eval", dest="evaluate", action="store_false", help="skip the test-set evaluation"
    )


def main(argv: list[str] | None = None) -> int:
    argv = list(argv or [])
    # With --communicator it is stage 3: one ChainerMN rank per process of mpiexec.
    ranks = any(a == "--communicator" or a.startswith("--communicator=") for a in argv)
    stage = stages.MULTI_NODE if ranks else stages.SINGLE_GPU
    args = harness.parse_args(stage.name, argv, _own_flags)
    comm = None
    if stage is stages.MULTI_NODE:
        on_gpu = harness.use_gpu(args.gpu)
        comm = chainermn().create_communicator(harness.communicator_name(args.communicator, on_gpu))
        device = chainer.get_device(f"@cupy:{comm.intra_rank}" if on_gpu else "@numpy")
        device.use()
        harness.set_seed(args.seed + comm.rank, device)
        train, test = harness.load_data(args) if comm.rank == 0 else (None, None)
        train = chainermn().scatter_dataset(train, comm, shuffle=True, seed=args.seed)
        test = chainermn().scatter_dataset(test, comm)
    else:
        device = chainer.get_device(harness.resolve_device(args.device))
        device.use()
        harness.set_seed(args.seed, device)
        train, test = harness.load_data(args)
    harness.run(build_trainer(args, train, test, device, comm), args, comm=comm)
    return 0

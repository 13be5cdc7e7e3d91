"""`python -m course.runtime.model_parallel_bench`, one rank of the model-parallel job (under
mpiexec, 2 ranks, CPU).

Trains the course's VGG on a few hundred images of the course's data set two ways on the same two
ranks, in turns (ROUNDS of STEPS steps each, so that a busy minute on the machine hits both alike):

- data parallel: each rank the whole network on half of each batch, the gradient averaged by the
  `naive` communicator's allreduce (ChainerMN's multi-node optimizer), as stage 3 trains;
- model parallel: ChainerMN's MultiNodeChainList, rank 0 the blocks before the cut, rank 1 the rest
  and the loss, on the whole batch; the activations go to rank 1 and their gradient comes back.

A step's time is the slowest rank's, each step after a barrier. The bytes are counted, not modelled:
the gradient arrays the allreduce is handed, and the arrays that crossed the cut (what rank 1
received forward and sent back). Rank 0 writes the sealed file (course.contracts.model_parallel)
and prints its log line.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

import numpy as np

from course.cli import command_parser
from course.cluster import hosts, mpi
from course.contracts import model_parallel
from course.i18n import _
from course.runtime.allreduce_bench import _run_tag


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = command_parser("python -m course.runtime.model_parallel_bench", __doc__)
    parser.add_argument("--width", type=int, default=8, help=_("VGG's first-block channels"))
    parser.add_argument("--batch", type=int, default=32, help=_("images per step, over both ranks"))
    parser.add_argument("--steps", type=int, default=6, help=_("timed steps per round and setting"))
    parser.add_argument("--rounds", type=int, default=2, help=_("turns of the two settings"))
    parser.add_argument("--cut", type=int, default=2, help=_("the split is after this VGG block"))
    parser.add_argument("--dataset", default=os.environ.get("COURSE_DATASET", "auto"))
    parser.add_argument("--out", default=".", help=_("the folder whose runs/ gets the file"))
    return parser.parse_args(argv)


def split_vgg(vgg, cut: int, rank: int):
    """The part of `vgg` (course.runtime.models.VGG) that `rank` of 2 holds: rank 0 its blocks
    before `cut`, rank 1 the blocks from `cut` on and the classifier."""
    import chainer
    import chainer.functions as F

    blocks = list(vgg.blocks)

    def pooled(block, x):
        return F.max_pooling_2d(block(x), 2, stride=2, cover_all=False)

    class Front(chainer.Chain):
        def __init__(self) -> None:
            super().__init__()
            with self.init_scope():
                self.blocks = chainer.ChainList(*blocks[:cut])

        def forward(self, x):
            for block in self.blocks:
                x = pooled(block, x)
            return x

    class Back(chainer.Chain):
        def __init__(self) -> None:
            super().__init__()
            self.received = None  # the activations of the last step, to count what crossed
            with self.init_scope():
                self.blocks = chainer.ChainList(*blocks[cut:])
                self.fc1, self.bn1, self.fc2 = vgg.fc1, vgg.bn1, vgg.fc2

        def forward(self, x):
            self.received = x
            for block in self.blocks:
                x = pooled(block, x)
            x = F.dropout(F.relu(self.bn1(self.fc1(F.average(x, axis=(2, 3))))), vgg.dropout)
            return self.fc2(x)

    return Front() if rank == 0 else Back()


class Steps:
    """The two settings' models, optimizers and one step each, on this rank."""

    def __init__(self, comm, width: int, cut: int) -> None:
        import chainer
        import chainermn
        from chainermn.links import MultiNodeChainList

        from course.runtime import models

        self.comm = comm
        self.data_model = models.build("vgg", width=width)
        self.data_optimizer = chainermn.create_multi_node_optimizer(
            chainer.optimizers.MomentumSGD(0.01), comm
        )
        self.data_optimizer.setup(self.data_model)
        self.part = split_vgg(models.build("vgg", width=width), cut, comm.rank)
        self.split = MultiNodeChainList(comm)
        self.split.add_link(
            self.part, rank_in=None if comm.rank == 0 else 0, rank_out=1 if comm.rank == 0 else None
        )
        self.split_optimizer = chainer.optimizers.MomentumSGD(0.01)
        self.split_optimizer.setup(self.split)

    def data_parallel(self, x: np.ndarray, t: np.ndarray) -> None:
        import chainer.functions as F

        half = len(x) // 2
        mine = slice(self.comm.rank * half, (self.comm.rank + 1) * half)
        loss = F.softmax_cross_entropy(self.data_model(x[mine]), t[mine])
        self.data_model.cleargrads()
        loss.backward()
        self.data_optimizer.update()  # allreduces the gradient, then updates

    def model_parallel(self, x: np.ndarray, t: np.ndarray, keep_grad: bool = False) -> None:
        import chainer.functions as F

        y = self.split(x)
        # rank 1 ends in the loss; rank 0's output is the delegate its backward waits on
        loss = F.softmax_cross_entropy(y, t) if self.comm.rank == 1 else y
        self.split.cleargrads()
        loss.backward(retain_grad=keep_grad)
        self.split_optimizer.update()

    def counted(self) -> dict:
        """What one step moved, counted on this rank: the gradient handed to the allreduce, and
        (rank 1) the activations received forward and their gradient sent back."""
        grads = [p.grad for p in self.data_model.params() if p.grad is not None]
        facts: dict[str, Any] = {
            "parameters": int(sum(grad.size for grad in grads)),
            "gradient_bytes_per_rank": int(sum(grad.nbytes for grad in grads)),
        }
        received = getattr(self.part, "received", None)
        if received is not None:
            facts["cut_shape"] = list(received.shape[1:])
            facts["activation_bytes"] = int(received.array.nbytes + received.grad.nbytes)
        return facts


def timed(comm, step, batches: list[tuple[np.ndarray, np.ndarray]]) -> list[float]:
    """Each step's seconds on this rank, every step after a barrier."""
    seconds = []
    for x, t in batches:
        comm.mpi_comm.Barrier()
        start = time.perf_counter()
        step(x, t)
        seconds.append(time.perf_counter() - start)
    return seconds


def main(argv: list[str] | None = None) -> int:
    import chainer
    import chainermn
    from mpi4py import MPI

    from course.runtime import data

    args = parse_args(argv)
    mpi.check_world(MPI.COMM_WORLD.Get_size())
    if MPI.COMM_WORLD.Get_size() != 2:
        if MPI.COMM_WORLD.Get_rank() == 0:
            print(
                _(
                    "model_parallel_bench splits the network over 2 ranks; this job has {ranks}: "
                    "submit it with -l select=1:mpiprocs=2"
                ).format(ranks=MPI.COMM_WORLD.Get_size()),
                file=sys.stderr,
            )
        return 2
    # MultiNodeChainList and its send and recv warn, on every rank, that they are experimental.
    chainer.disable_experimental_feature_warning = True
    comm = chainermn.create_communicator("naive")
    started = time.time()
    train, _test = data.load(args.dataset)
    count = args.batch * args.steps
    x = np.stack([train[i][0] for i in range(count)])
    t = np.array([train[i][1] for i in range(count)], dtype=np.int32)
    batches = [(x[i : i + args.batch], t[i : i + args.batch]) for i in range(0, count, args.batch)]
    steps = Steps(comm, args.width, args.cut)
    # One untimed step each: the lazy layers take their shapes, the connections are made, and the
    # bytes are counted.
    steps.data_parallel(*batches[0])
    steps.model_parallel(*batches[0], keep_grad=True)
    counted = steps.counted()
    mine: dict[str, list[float]] = {name: [] for name in model_parallel.SETTINGS}
    for _round in range(args.rounds):
        mine["data_parallel"] += timed(comm, steps.data_parallel, batches)
        mine["model_parallel"] += timed(comm, steps.model_parallel, batches)
    slowest = {}
    for name, seconds in mine.items():  # after the steps: no traffic between them
        mine_array = np.asarray(seconds)
        slowest[name] = np.empty_like(mine_array)
        comm.mpi_comm.Allreduce(mine_array, slowest[name], op=MPI.MAX)
    every = comm.mpi_comm.gather(counted, root=0)
    names = comm.mpi_comm.gather(MPI.Get_processor_name(), root=0)
    if comm.rank != 0:
        return 0
    assert every is not None
    cut = every[1]  # what rank 1 received and sent back
    job = hosts.detect()
    record = {
        "job": {"id": job.job_id, "scheduler": job.scheduler, "name": job.job_name},
        "ranks": comm.size,
        "hosts": names,
        "cores": os.cpu_count(),
        "dataset": data.resolve(args.dataset),
        "model": {"name": "vgg", "width": args.width, "parameters": counted["parameters"]},
        "batch": args.batch,
        "images": count,
        "rounds": args.rounds,
        "cut": {"after_block": args.cut, "shape": cut["cut_shape"]},
        "data_parallel": {
            "seconds": slowest["data_parallel"].tolist(),
            "gradient_bytes_per_rank": counted["gradient_bytes_per_rank"],
        },
        "model_parallel": {
            "seconds": slowest["model_parallel"].tolist(),
            "activation_bytes": cut["activation_bytes"],
        },
        "started": started,
        "seconds_total": time.time() - started,
    }
    folder = model_parallel.run_folder(args.out, _run_tag(job))
    path = model_parallel.next_path(folder, comm.size)
    sha256 = model_parallel.write(path, record)
    setting_names = {"data_parallel": _("data parallel"), "model_parallel": _("model parallel")}
    for name in model_parallel.SETTINGS:
        median = float(np.median(record[name]["seconds"]))
        print(
            # TRANSLATORS: {setting} is "data parallel" or "model parallel" (already translated)
            _(
                "{setting} on {ranks} ranks, batch {batch}: median {median:.1f} ms a step, "
                "{rate:.1f} images/sec"
            ).format(
                setting=setting_names[name],
                ranks=comm.size,
                batch=args.batch,
                median=median * 1e3,
                rate=args.batch / median,
            )
        )
    print(model_parallel.log_line(os.path.relpath(path, args.out), sha256, comm.size), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Runs under `mpiexec -n N`: exercises a stage-3 module's functions on N real ranks.

    COURSE_PROBE_HOSTS=node0,node0,node1,node1 \
        mpiexec -n 4 python -m course.lessons.core.mn_probe MODULE.py SEED

Each part runs on every rank and is recorded separately (an error in one part does not hide
the others); later parts use the kit's own communicator, data and optimizer, so that each
part is judged on its own. SEED, the checking process's choice, sets the arrays of the
communicator and optimizer parts (mn_settings.rank_case). Rank 0 prints the facts as JSON on its
last line; the notebook's checks (course.lessons.core.multi_node) decide what they mean against
what they compute themselves: the student's code runs in these processes too, and could say
anything.

COURSE_PROBE_HOSTS names the node of each rank, so that ranks on one machine act as ranks of
several nodes (comm.rank and comm.intra_rank then differ): see _simulate_hosts. Inside a job on
several nodes the ranks run on the real nodes instead, and the variable is not set.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import os
import sys
import tempfile
import traceback
from collections.abc import Iterator
from pathlib import Path

import chainer
import chainer.links as L
import chainermn
import numpy as np

from course.lessons.core.mn_settings import (
    BATCH,
    HOSTS,
    LR,
    SEED,
    TEST_PER_RANK,
    TRAIN_PER_RANK,
    rank_case,
)
from course.lessons.core.mn_settings import link as mn_link
from course.lessons.core.trainers import extensions_of
from course.notebook.checks import sealed_json
from course.notebook.checks.inputs import (
    example_ids,
    labelled_dataset,
    remove_scratch,
    small_args,
)
from course.notebook.checks.observe import freeze_kit
from course.runtime import models
from course.runtime.throughput import Throughput


def _simulate_hosts() -> None:
    """Give this rank the node name HOSTS assigns it, before any communicator exists.

    ChainerMN 7 groups ranks into nodes by MPI.Get_processor_name(): create_communicator gathers
    every rank's name, and the ranks sharing a name get intra_rank 0, 1, ... in rank order, the
    names in order of their first rank inter_rank 0, 1, ...
    (chainermn/communicators/_communication_utility.py, init_ranks). On one machine all ranks share
    its host name; the kit's probe (trusted code, before the student's module is loaded) answers
    with the simulated names instead. Nothing else of MPI changes.
    """
    names = os.environ.get(HOSTS)
    if names:
        from mpi4py import MPI

        name = names.split(",")[MPI.COMM_WORLD.rank]
        MPI.Get_processor_name = lambda: name


@contextlib.contextmanager
def _printed() -> Iterator[list[str]]:
    """What this process writes on its standard output meanwhile (PrintReport writes to the stream
    it found when it was made), as the one text of the list it yields, once it is over; the output
    is put back afterwards."""
    sys.stdout.flush()
    saved, text = os.dup(1), list[str]()
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 1)
        try:
            yield text
        finally:
            sys.stdout.flush()
            if sys.__stdout__ is not None:
                sys.__stdout__.flush()
            os.dup2(saved, 1)
            os.close(saved)
            captured.seek(0)
            text.append(captured.read().decode(errors="replace"))


def _error(e: BaseException, module_path: str) -> str:
    own = [
        frame for frame in traceback.extract_tb(e.__traceback__) if frame.filename == module_path
    ]
    where = f" (line {own[-1].lineno} in {own[-1].name}: {own[-1].line})" if own else ""
    return f"{type(e).__name__}: {e}{where}"


def _flat(*arrays) -> list[float]:
    return [float(v) for a in arrays for v in np.asarray(a).ravel()]


def _run_parts(module, comm, path: str, seed: int) -> dict:
    """comm is the kit's own communicator: every part but the first uses it. `seed` is the checking
    process's choice of the communicator and optimizer parts' arrays (mn_settings.rank_case)."""
    facts: dict = {"errors": {}}

    def part(name, action):
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                facts[name] = action()
        except Exception as e:  # the student's code may raise anything; it becomes a finding
            facts["errors"][name] = _error(e, path)

    def communicator():
        own = module.make_communicator("naive")
        found = {
            "class": type(own).__name__,
            "size": getattr(own, "size", None),
            "rank": getattr(own, "rank", None),
        }
        # What a multi-node optimizer asks of it, on arrays the checking process chose: rank 0's
        # weights sent to every rank, the ranks' gradients averaged.
        case = rank_case(seed, comm.rank)
        link = mn_link(case)
        link.W.grad, link.b.grad = case["W_grad"].copy(), case["b_grad"].copy()
        try:
            own.bcast_data(link)
            own.multi_node_mean_grad(link)
        except AttributeError:  # no such methods: not a ChainerMN communicator, the check says so
            return {**found, "weights": None, "gradients": None}
        return {
            **found,
            "weights": _flat(link.W.array, link.b.array),
            "gradients": _flat(link.W.grad, link.b.grad),
        }

    def devices():
        return {
            "gpu": str(module.device_for_rank(comm, True)),
            "cpu": str(module.device_for_rank(comm, False)),
        }

    def shards():
        def split(seed: int) -> dict:
            train = labelled_dataset(TRAIN_PER_RANK * comm.size) if comm.rank == 0 else None
            test = labelled_dataset(TEST_PER_RANK * comm.size, seed=1) if comm.rank == 0 else None
            got = module.shard_datasets(train, test, comm, seed)
            # None on rank 1 is the usual mistake (no scatter): a finding for the check, not a crash
            return {
                "train": None if got[0] is None else example_ids(got[0]),
                "test": None if got[1] is None else example_ids(got[1]),
            }

        first = split(SEED)
        return {**first, "same_seed": split(SEED)["train"], "other_seed": split(SEED + 1)["train"]}

    def optimizer():
        case = rank_case(seed, comm.rank)  # other weights and data on each rank
        model = L.Classifier(mn_link(case))
        built = module.make_optimizer(small_args("multi_node", lr=LR), comm, model)
        # A multi-node optimizer's first update sends rank 0's weights to every rank, its second
        # moves them by the gradient averaged over the ranks: the check computes both itself.
        for _ in range(2):
            built.update(model, case["x"], case["t"])
        return {
            "class": type(built).__name__,
            "target_is_model": getattr(built, "target", None) is model,
            "weights": _flat(model.predictor.W.array, model.predictor.b.array),
        }

    def trainer():
        args = small_args("multi_node", epoch=1, batchsize=BATCH, warmup=1)
        model = L.Classifier(models.build("vgg", width=2))
        optimizer = chainermn.create_multi_node_optimizer(
            chainer.optimizers.MomentumSGD(0.05), comm
        )
        optimizer.setup(model)
        train = chainermn.scatter_dataset(
            labelled_dataset(TRAIN_PER_RANK * comm.size) if comm.rank == 0 else None,
            comm,
            shuffle=True,
        )
        test = chainermn.scatter_dataset(
            labelled_dataset(TEST_PER_RANK * comm.size, seed=1) if comm.rank == 0 else None, comm
        )
        built = module.build_trainer(
            args, comm, train, test, model, optimizer, chainer.get_device("@numpy")
        )
        with _printed() as printed:
            built.run()
        log = Path(args.out, "log")
        meters = [ext for ext in extensions_of(built).values() if isinstance(ext, Throughput)]
        return {
            # what the run did: its steps, the given optimizer's updates, the validation values
            # reported at the epoch's end, the log it wrote and the table it printed
            "iterations": built.updater.iteration,
            "updates": optimizer.t,
            "evaluation": {
                key: float(value)
                for key, value in built.observation.items()
                if key.startswith("validation/")
            },
            "log": len(json.loads(log.read_text())) if log.is_file() else None,
            "printed": "main/loss" in printed[0],
            "throughput_images": meters[0].images_per_iteration if meters else None,
            "out": built.out == args.out,
        }

    for name, action in (
        ("communicator", communicator),
        ("devices", devices),
        ("shards", shards),
        ("optimizer", optimizer),
        ("trainer", trainer),
    ):
        part(name, action)
    return facts


def main(path: str, seed: int) -> None:
    _simulate_hosts()
    from mpi4py import MPI

    comm = chainermn.create_communicator("naive")
    # What the facts are gathered and written with, made before the student's module runs and held
    # only in this frame's variables: their functions get `comm`, and could otherwise swap its MPI
    # communicator, json's encoder classes, mpi4py's pickle or stdout. Each rank writes its facts
    # with a C encoder (sealed_json), rank 0 gathers the texts as bytes (MPI's buffer calls, no
    # pickle) and joins them.
    # (The builtins the gathering calls are bound here too, and no comprehension shares this
    # frame's variables through closure cells.)
    world, byte, encode, join = comm.mpi_comm, MPI.BYTE, sealed_json.encoder(), "".join
    gather, gatherv, write, rank, size = world.Gather, world.Gatherv, os.write, comm.rank, comm.size
    number, text, span, buffer, length = int.from_bytes, bytes, range, bytearray, len
    host, intra_rank, out = MPI.Get_processor_name(), comm.intra_rank, os.dup(1)
    finalize, leave, tidy = MPI.Finalize, os._exit, remove_scratch
    freeze_kit()
    spec = importlib.util.spec_from_file_location("student_stage3", path)
    assert spec is not None and spec.loader is not None  # a .py file always has both
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
        facts = _run_parts(module, comm, path, seed)
    except Exception as e:
        facts = {"errors": {"module": _error(e, path)}}
    # The kit's communicator's view: the check verifies that the ranks sit on the nodes of its
    # layout.
    facts["intra_rank"], facts["host"] = intra_rank, host
    try:
        mine = join(encode(facts, 0)).encode()
    except (TypeError, ValueError, RecursionError) as e:  # a student's object among the facts
        refused = {"module": f"the facts of this rank are not JSON data: {type(e).__name__}"}
        mine = join(encode({"errors": refused, "intra_rank": intra_rank, "host": host}, 0)).encode()
    lengths, counts, starts, total = buffer(8 * size), [], [], 0
    gather([length(mine).to_bytes(8, "little"), byte], [lengths, byte], root=0)
    for i in span(size):
        starts.append(total)
        counts.append(number(lengths[8 * i : 8 * i + 8], "little"))
        total += counts[i]
    texts = buffer(total)
    gatherv([mine, byte], [texts, (counts, starts), byte], root=0)
    finalize()
    if rank == 0:
        line = b'{"size":' + b"%d" % size + b',"ranks":['
        for i in span(size):
            line += (b"," if i else b"") + text(texts[starts[i] : starts[i] + counts[i]])
        write(out, b"\n" + line + b"]}\n")
    tidy()  # the trainers' scratch folders: os._exit skips atexit
    leave(0)  # nothing of the student's (exit handlers, finalizers) runs after the facts' line


if __name__ == "__main__":
    main(str(Path(sys.argv[1]).resolve()), int(sys.argv[2]))

"""Checks of stage 3 (ChainerMN), on real MPI ranks of this machine acting as ranks of several
nodes.

Each rank check states its inputs (a layout of ranks on nodes), gets every rank's facts of its
part from the probe (mn_ranks runs the notebook's stage-3 functions under mpiexec, once for all
checks), judges them and says what passed. The visible checks use 2 nodes x 2 ranks, the hidden
tests another layout and rank count. learning_rate_schedule, resource_request and run_part need
no ranks: they live in mn_local and mn_placement and are called from here. Either way the
judgement rests on what the functions did, compared with what this module computes itself
(mn_reference, the kit's directive parser and mpirun's map), never on the names of their
objects' classes alone.
"""

from __future__ import annotations

from typing import Any

import course.notebook.checks.mn_reference as mn_reference
from course.i18n import _
from course.notebook.checks.mn_local import learning_rate_schedule, resource_request
from course.notebook.checks.mn_placement import run_part
from course.notebook.checks.mn_ranks import Layout, part_facts
from course.notebook.checks.mn_settings import (
    BATCH,
    CLASSES,
    FEATURES,
    LR,
    TEST_PER_RANK,
    TRAIN_PER_RANK,
)
from course.notebook.checks.verdict import expect, fail, passed

__all__ = [
    "communicator",
    "device_binding",
    "learning_rate_schedule",
    "optimizer",
    "resource_request",
    "run_part",
    "scatter",
    "trainer",
]
_LINK = ((FEATURES + 1) * CLASSES,)  # the shape of the probe's link's W and b, flat


def _gpu_diagnosis(gpu: list, expected: list[str], layout: Layout) -> str:
    """Why the first rank whose GPU is wrong cannot use it: the GPUs its node has."""
    rank = next(i for i, (got, want) in enumerate(zip(gpu, expected)) if got != want)
    return _(
        "rank {rank} would use {gpu}, but its node ({node}) has GPUs {gpus}, one per rank there: "
        "a rank's number counts the ranks of all nodes, and mpiexec's placement decides which "
        "ranks share a node"
    ).format(
        rank=rank,
        gpu=gpu[rank],
        node=layout.node_of()[rank],
        gpus=", ".join(map(str, range(layout.ranks_per_node))),
    )


def _on_ranks(
    function: Any, part: str, nodes: int, ranks_per_node: int, map_by: str
) -> tuple[Layout, int, list[dict]]:
    """The layout a check asks for, the seed of the probe's run there, and each rank's facts of
    its part (by rank). `function` is the student's function or its Remote handle."""
    __tracebackhide__ = True
    layout = Layout(nodes, ranks_per_node, map_by)
    return (layout, *part_facts(function, part, layout))


def communicator(
    make_communicator: Any,
    nodes: int = 2,
    ranks_per_node: int = 2,
    map_by: str = "slot",
) -> None:
    """make_communicator('naive'): a ChainerMN communicator of that name over all ranks."""
    __tracebackhide__ = True
    layout, seed, ranks = _on_ranks(
        make_communicator, "communicator", nodes, ranks_per_node, map_by
    )
    expect(
        all(r["weights"] is not None and r["gradients"] is not None for r in ranks),
        _("make_communicator returned {kind}, not a ChainerMN communicator").format(
            kind=ranks[0]["class"]
        ),
        _("the ranks exchange gradients through a ChainerMN communicator ('Communicators')"),
    )
    expect(
        all(r["size"] == layout.size for r in ranks)
        and sorted(r["rank"] for r in ranks) == list(range(layout.size)),
        _("on {size} ranks the communicator says size {said}, ranks {ranks}").format(
            size=layout.size, said=ranks[0]["size"], ranks=[r["rank"] for r in ranks]
        ),
        _("every rank of the job should be in one communicator, numbered 0 to size - 1"),
    )
    weights, gradients = mn_reference.exchanged(seed, layout.size)
    wrong = [
        rank
        for rank, r in enumerate(ranks)
        if not mn_reference.close(mn_reference.array(r["weights"], _LINK), weights)
        or not mn_reference.close(mn_reference.array(r["gradients"], _LINK), gradients)
    ]
    expect(
        not wrong,
        _(
            "through the communicator rank {rank} did not get rank 0's weights (bcast_data) or "
            "the mean of the ranks' gradients (multi_node_mean_grad)"
        ).format(rank=wrong[0] if wrong else 0),
        _(
            "the multi-node optimizer exchanges weights and gradients through it: it should span "
            "all ranks of the job"
        ),
    )
    # Naive and flat communicators give the same numbers on CPUs: the name tells which it is.
    expect(
        ranks[0]["class"] == "NaiveCommunicator",
        _("make_communicator('naive') made a {kind}").format(kind=ranks[0]["class"]),
        _("the name is the communicator the job asks for: the comparison runs measure each"),
    )
    passed(
        # TRANSLATORS: {layout} says where the ranks run ("4 ranks on 2 simulated nodes of 2: ...")
        _(
            "make_communicator: a ChainerMN communicator over all ranks (size {size}, ranks 0 to "
            "{last}; {layout}): it sends rank 0's weights and averages the gradients"
        ).format(size=layout.size, last=layout.size - 1, layout=layout)
    )


def device_binding(
    device_for_rank: Any,
    nodes: int = 2,
    ranks_per_node: int = 2,
    map_by: str = "slot",
) -> None:
    """device_for_rank: each rank the GPU of its number within its node, '@numpy' without GPUs."""
    __tracebackhide__ = True
    layout, _seed, ranks = _on_ranks(device_for_rank, "devices", nodes, ranks_per_node, map_by)
    gpu = [r["gpu"] for r in ranks]
    expected = [f"@cupy:{intra}" for intra in layout.intra_ranks()]
    expect(
        gpu == expected,
        # TRANSLATORS: {layout} says where the ranks run ("4 ranks on 2 simulated nodes of 2: ...")
        _(
            "with GPUs, ranks 0-{last} would use {gpu}; the GPU of each rank's number within its "
            "node is {expected} ({layout})"
        ).format(last=layout.size - 1, gpu=gpu, expected=expected, layout=layout),
        _gpu_diagnosis(gpu, expected, layout) if gpu != expected else "",
    )
    cpu = [r["cpu"] for r in ranks]
    expect(
        cpu == ["@numpy"] * layout.size,
        _("without GPUs the ranks would use {cpu}").format(cpu=cpu),
        _("on CPUs every rank uses '@numpy'"),
    )
    passed(
        # TRANSLATORS: {layout} says where the ranks run ("4 ranks on 2 simulated nodes of 2: ...")
        _(
            "device_for_rank: each rank the GPU of its number within its node ({gpus}; "
            "{layout}), '@numpy' on CPUs"
        ).format(gpus=", ".join(gpu), layout=layout)
    )


def scatter(
    shard_datasets: Any,
    nodes: int = 2,
    ranks_per_node: int = 2,
    map_by: str = "slot",
) -> None:
    """shard_datasets: each rank its own equal, shuffled part of both sets; the same per seed."""
    __tracebackhide__ = True
    layout, _seed, ranks = _on_ranks(shard_datasets, "shards", nodes, ranks_per_node, map_by)
    for split, total in (
        ("train", TRAIN_PER_RANK * layout.size),
        ("test", TEST_PER_RANK * layout.size),
    ):
        parts = [r[split] for r in ranks]
        if None in parts:
            fail(
                # TRANSLATORS: {split} is train or test, the name of the data set in the code
                _("rank {rank} has no {split} set (None): only rank 0 loads the data").format(
                    rank=parts.index(None), split=split
                ),
                _("every rank needs its own part of it, sent from rank 0 ('Dataset utilities')"),
            )
        together = [i for p in parts for i in p]
        expect(
            len(together) == len(set(together)),
            # TRANSLATORS: {split} is train or test, the name of the data set in the code
            _("the ranks got some of the same {split} examples ({count} held twice)").format(
                split=split, count=len(together) - len(set(together))
            ),
            _("data parallelism gives each rank another part: an epoch sees every example once"),
        )
        expect(
            sorted(together) == list(range(total)),
            # TRANSLATORS: {split} is train or test, the name of the data set in the code
            _("the ranks' {split} parts hold {held} of the {total} examples").format(
                split=split, held=len(set(together)), total=total
            ),
            # TRANSLATORS: {split} is train or test, the name of the data set in the code
            _("together the ranks' parts should be the whole {split} set rank 0 holds").format(
                split=split
            ),
        )
        expect(
            len({len(p) for p in parts}) == 1,
            # TRANSLATORS: {split} is train or test, the name of the data set in the code
            _("the ranks' {split} parts have sizes {sizes}").format(
                split=split, sizes=[len(p) for p in parts]
            ),
            _("the ranks step together: with unequal parts their epochs end at other updates"),
        )
    # A shuffle before the split mixes the stored order into every part; one after it (or none)
    # leaves each rank a block of consecutive examples, e.g. of the classes a data set stored by
    # class holds there.
    blocks = [
        (rank, min(p), max(p))
        for rank, p in enumerate(r["train"] for r in ranks)
        if sorted(p) == list(range(min(p), min(p) + len(p)))
    ]
    if blocks:
        rank, first, last = blocks[0]
        fail(
            _(
                "rank {rank}'s training part is examples {first} to {last}, one block of the "
                "stored order: it is not shuffled before the split"
            ).format(rank=rank, first=first, last=last),
            _(
                "a data set stored by class would give each rank other classes, and each rank's "
                "gradient would pull towards its own"
            ),
        )
    expect(
        all(r["same_seed"] == r["train"] for r in ranks),
        _(
            "two calls with the same seed split the training set differently, so runs cannot be "
            "repeated"
        ),
        _("the shuffle before the split is random: without the seed it differs every run"),
    )
    expect(
        any(r["other_seed"] != r["train"] for r in ranks),
        _("another seed gives the same split: the seed is not used"),
        _("the seed makes a run repeatable, and another seed gives another split"),
    )
    passed(
        _(
            "shard_datasets: each of the {size} ranks gets its own shuffled part (train {train}, "
            "test {test} each), together all of it, the same for the same seed"
        ).format(size=layout.size, train=len(ranks[0]["train"]), test=len(ranks[0]["test"]))
    )


def optimizer(
    make_optimizer: Any,
    nodes: int = 2,
    ranks_per_node: int = 2,
    map_by: str = "slot",
) -> None:
    """make_optimizer: a multi-node optimizer at args.lr; the ranks' weights stay equal."""
    __tracebackhide__ = True
    layout, seed, ranks = _on_ranks(make_optimizer, "optimizer", nodes, ranks_per_node, map_by)
    expect(
        all(r["target_is_model"] is True for r in ranks),
        _("the optimizer is not set up on the model"),
        _("the optimizer updates only the link it was set up on, and that is not `model`"),
    )
    start, gradient = mn_reference.multi_node_step(seed, layout.size)
    weights = [mn_reference.array(r["weights"], start.shape) for r in ranks]
    first = weights[0] if weights[0] is not None else start + float("nan")  # a fact of no weights
    expect(
        all(mn_reference.close(w, first) for w in weights),
        _(
            "make_optimizer returned a {kind}, which does not exchange gradients between ranks"
        ).format(kind=ranks[0]["class"]),
        _("each rank's model would follow its own gradient and drift apart ('Optimizers')"),
    )
    if not mn_reference.close(first, start - LR * gradient):
        rate = mn_reference.rate_of(first - start, gradient)
        expect(
            rate is None,
            _("with args.lr = {lr} on {size} ranks the optimizer starts at {rate:.3g}").format(
                lr=LR, size=layout.size, rate=rate or 0
            ),
            _(
                "start at args.lr, the single-worker rate: learning_rate_schedule (and --lr-rule) "
                "scales it up"
            ),
        )
        fail(
            _(
                "after an update on different data the {size} ranks hold the same weights, but "
                "not rank 0's moved by args.lr ({lr}) along the gradient averaged over the ranks"
            ).format(size=layout.size, lr=LR),
            _(
                "a multi-node optimizer sends rank 0's weights to every rank at its first update, "
                "then averages the ranks' gradients and takes the usual step: something else "
                "changed the weights"
            ),
        )
    passed(
        _(
            "make_optimizer: a multi-node optimizer at args.lr; after an update on different data "
            "all {size} ranks hold the same weights, rank 0's moved by args.lr along the mean "
            "gradient"
        ).format(size=layout.size)
    )


def trainer(
    build_trainer: Any, nodes: int = 2, ranks_per_node: int = 2, map_by: str = "slot"
) -> None:
    """build_trainer: a multi-node Evaluator, Throughput over all ranks, reports on rank 0 only."""
    __tracebackhide__ = True
    layout, _seed, ranks = _on_ranks(build_trainer, "trainer", nodes, ranks_per_node, map_by)
    steps = -(-TRAIN_PER_RANK // BATCH)  # one epoch of each rank's part, in minibatches
    # The given multi-node optimizer's first update only sends rank 0's weights to every rank; its
    # step count (Optimizer.t) counts the others.
    expect(
        all(r["iterations"] == steps and r["updates"] == steps - 1 for r in ranks),
        _(
            "in one epoch the trainer made {made} steps, and the optimizer it was given {updates} "
            "updates after its first, which only sends rank 0's weights; one epoch of {examples} "
            "examples in minibatches of args.batchsize ({batch}) is {steps} steps"
        ).format(
            made=ranks[0]["iterations"],
            updates=ranks[0]["updates"],
            examples=TRAIN_PER_RANK,
            batch=BATCH,
            steps=steps,
        ),
        _(
            "ChainerMN uses the usual StandardUpdater: the multi-node optimizer does the "
            "communication"
        ),
    )
    silent = [rank for rank, r in enumerate(ranks) if not r["evaluation"]]
    expect(
        not silent,
        _("every rank needs one Evaluator"),
        _(
            "ranks {silent} reported no validation/main/* values at the epoch's end: the log's "
            "validation/main/* columns come from one"
        ).format(silent=silent),
    )
    first = ranks[0]["evaluation"]
    expect(
        all(
            r["evaluation"].keys() == first.keys()
            and all(
                abs(r["evaluation"][k] - first[k]) <= 1e-6 * max(1.0, abs(first[k])) for k in first
            )
            for r in ranks
        ),
        _("the ranks evaluate only their own test part and report different results"),
        _(
            "the log would show rank 0's accuracy on 1/{size} of the test set, not on all of it "
            "('Extensions' in ChainerMN's reference)"
        ).format(size=layout.size),
    )
    moved = BATCH * layout.size
    expect(
        all(r["throughput_images"] == moved for r in ranks),
        _(
            "Throughput counts {counted} images per step; {size} ranks x {batch} move {moved}"
        ).format(counted=ranks[0]["throughput_images"], size=layout.size, batch=BATCH, moved=moved),
        _(
            "every rank draws its own minibatch at each step, so one step moves a minibatch per "
            "rank: the communicator knows how many ranks the job has"
        ),
    )
    # what each rank reported: a log file in args.out (LogReport) and a printed table (PrintReport)
    reports = [
        ({"LogReport"} if r["log"] is not None else set())
        | ({"PrintReport"} if r["printed"] else set())
        for r in ranks
    ]
    expect(
        reports[0] == {"LogReport", "PrintReport"} and ranks[0]["log"] == 1,
        _("rank 0 has no LogReport and PrintReport"),
        _("the job log should hold one table per run, written by rank 0"),
    )
    others = [rank for rank, found in enumerate(reports) if rank and found]
    if others:
        fail(
            _(
                "rank {rank} also reports ({reports}), so every line would be printed once per rank"
            ).format(rank=others[0], reports=", ".join(sorted(reports[others[0]]))),
            _("the ranks run the same script: the reports belong to rank 0 alone"),
        )
    expect(
        all(r["out"] for r in ranks),
        _("the trainer writes to another folder than args.out"),
        _("the job's log and results file go there"),
    )
    passed(
        _(
            "build_trainer: {steps} steps of the given optimizer per epoch, a multi-node "
            "Evaluator (the same result on all {size} ranks), Throughput over all ranks, "
            "LogReport and PrintReport on rank 0 only"
        ).format(steps=steps, size=layout.size)
    )

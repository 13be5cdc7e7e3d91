"""Checks of stage 3 (ChainerMN), on real MPI ranks of this machine acting as ranks of several
nodes.

Each rank check states its inputs (a layout of ranks on nodes), gets every rank's facts of its
part from the probe (mn_ranks runs the notebook's stage-3 functions under mpiexec, once for all
checks), judges them and says what passed. The visible checks use 2 nodes x 2 ranks, the hidden
tests another layout and rank count. The optimizer's and the trainer's rank checks live in
mn_training; learning_rate_schedule needs no ranks: it lives in mn_local. All are called from here
(the job's request and run part are notebook 07's: course.lessons.run_part.checks). Either way the
judgement rests on what the functions did, compared with what the checks compute themselves
(mn_reference), never on the names of their objects' classes alone.
"""

from __future__ import annotations

from typing import Any

import course.lessons.core.mn_reference as mn_reference
from course import i18n
from course.i18n import _
from course.lessons.core.mn_local import learning_rate_schedule
from course.lessons.core.mn_ranks import Layout, part_facts
from course.lessons.core.mn_settings import CLASSES, FEATURES, TEST_PER_RANK, TRAIN_PER_RANK
from course.lessons.core.mn_training import optimizer, trainer
from course.notebook.checks.verdict import expect, fail, passed

__all__ = [
    "communicator",
    "device_binding",
    "learning_rate_schedule",
    "optimizer",
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
        gpus=i18n.listed(map(str, range(layout.ranks_per_node))),
    )


def communicator(
    make_communicator: Any,
    nodes: int = 2,
    ranks_per_node: int = 2,
    map_by: str = "slot",
) -> None:
    """make_communicator('naive'): a ChainerMN communicator of that name over all ranks."""
    __tracebackhide__ = True
    layout = Layout(nodes, ranks_per_node, map_by)
    seed, ranks = part_facts(make_communicator, "communicator", layout)
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
    layout = Layout(nodes, ranks_per_node, map_by)
    ranks = part_facts(device_for_rank, "devices", layout)[1]
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
        ).format(gpus=i18n.listed(gpu), layout=layout)
    )


def scatter(
    shard_datasets: Any,
    nodes: int = 2,
    ranks_per_node: int = 2,
    map_by: str = "slot",
) -> None:
    """shard_datasets: each rank its own equal, shuffled part of both sets; the same per seed."""
    __tracebackhide__ = True
    layout = Layout(nodes, ranks_per_node, map_by)
    ranks = part_facts(shard_datasets, "shards", layout)[1]
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

"""Checks of stage 3 (ChainerMN), on real MPI ranks of this machine acting as ranks of several
nodes.

Each rank check states its inputs (a layout of ranks on nodes), gets every rank's facts of its
part from the probe (mn_ranks runs the notebook's stage-3 functions under mpiexec, once for all
checks), judges them and says what passed. The visible checks use 2 nodes x 2 ranks, the hidden
tests another layout and rank count. learning_rate_schedule and resource_request run in this
process.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from course.notebook.checks.mn_ranks import Layout, part_facts
from course.notebook.checks.mn_settings import BATCH, TEST_PER_RANK, TRAIN_PER_RANK
from course.notebook.checks.trainers import rates_used
from course.notebook.checks.verdict import call, expect, fail, passed


def _gpu_diagnosis(gpu: list, expected: list[str], layout: Layout) -> str:
    """Why the first rank whose GPU is wrong cannot use it: the GPUs its node has."""
    rank = next(i for i, (got, want) in enumerate(zip(gpu, expected)) if got != want)
    return (
        f"rank {rank} would use {gpu[rank]}, but its node ({layout.node_of()[rank]}) has GPUs "
        f"{', '.join(map(str, range(layout.ranks_per_node)))}, one per rank there: a rank's number "
        "counts the ranks of all nodes, and mpiexec's placement decides which ranks share a node"
    )


def _on_ranks(
    function: Callable[..., Any], part: str, nodes: int, ranks_per_node: int, map_by: str
) -> tuple[Layout, list[dict]]:
    """The layout a check asks for, and each rank's facts of its part there (by rank)."""
    __tracebackhide__ = True
    layout = Layout(nodes, ranks_per_node, map_by)
    return layout, part_facts(function, part, layout)


def communicator(
    make_communicator: Callable[..., Any],
    nodes: int = 2,
    ranks_per_node: int = 2,
    map_by: str = "slot",
) -> None:
    """make_communicator('naive'): a ChainerMN communicator of that name over all ranks."""
    __tracebackhide__ = True
    layout, ranks = _on_ranks(make_communicator, "communicator", nodes, ranks_per_node, map_by)
    expect(
        all(r["class"] and r["class"].endswith("Communicator") for r in ranks),
        f"make_communicator returned {ranks[0]['class']}, not a ChainerMN communicator",
        "the ranks exchange gradients through a ChainerMN communicator ('Communicators')",
    )
    expect(
        all(r["size"] == layout.size for r in ranks)
        and sorted(r["rank"] for r in ranks) == list(range(layout.size)),
        f"on {layout.size} ranks the communicator says size {ranks[0]['size']}, ranks "
        f"{[r['rank'] for r in ranks]}",
        "every rank of the job should be in one communicator, numbered 0 to size - 1",
    )
    expect(
        ranks[0]["class"] == "NaiveCommunicator",
        f"make_communicator('naive') made a {ranks[0]['class']}",
        "the name is the communicator the job asks for: the comparison runs measure each",
    )
    passed(
        f"make_communicator: a ChainerMN communicator over all ranks (size {layout.size}, ranks 0 "
        "to "
        f"{layout.size - 1}; {layout})"
    )


def device_binding(
    device_for_rank: Callable[..., Any],
    nodes: int = 2,
    ranks_per_node: int = 2,
    map_by: str = "slot",
) -> None:
    """device_for_rank: each rank the GPU of its number within its node, '@numpy' without GPUs."""
    __tracebackhide__ = True
    layout, ranks = _on_ranks(device_for_rank, "devices", nodes, ranks_per_node, map_by)
    gpu = [r["gpu"] for r in ranks]
    expected = [f"@cupy:{intra}" for intra in layout.intra_ranks()]
    expect(
        gpu == expected,
        f"with GPUs, ranks 0-{layout.size - 1} would use {gpu}; the GPU of each rank's number "
        "within its node "
        f"is {expected} ({layout})",
        _gpu_diagnosis(gpu, expected, layout) if gpu != expected else "",
    )
    cpu = [r["cpu"] for r in ranks]
    expect(
        cpu == ["@numpy"] * layout.size,
        f"without GPUs the ranks would use {cpu}",
        "on CPUs every rank uses '@numpy'",
    )
    passed(
        f"device_for_rank: each rank the GPU of its number within its node ({', '.join(gpu)}; "
        f"{layout}), "
        "'@numpy' on CPUs"
    )


def scatter(
    shard_datasets: Callable[..., Any],
    nodes: int = 2,
    ranks_per_node: int = 2,
    map_by: str = "slot",
) -> None:
    """shard_datasets: each rank its own equal, shuffled part of both sets; the same per seed."""
    __tracebackhide__ = True
    layout, ranks = _on_ranks(shard_datasets, "shards", nodes, ranks_per_node, map_by)
    for split, total in (
        ("train", TRAIN_PER_RANK * layout.size),
        ("test", TEST_PER_RANK * layout.size),
    ):
        parts = [r[split] for r in ranks]
        if None in parts:
            fail(
                f"rank {parts.index(None)} has no {split} set (None): only rank 0 loads the data",
                "every rank needs its own part of it, sent from rank 0 ('Dataset utilities')",
            )
        together = [i for p in parts for i in p]
        expect(
            len(together) == len(set(together)),
            f"the ranks got some of the same {split} examples "
            f"({len(together) - len(set(together))} held twice)",
            "data parallelism gives each rank another part: an epoch sees every example once",
        )
        expect(
            sorted(together) == list(range(total)),
            f"the ranks' {split} parts hold {len(set(together))} of the {total} examples",
            f"together the ranks' parts should be the whole {split} set rank 0 holds",
        )
        expect(
            len({len(p) for p in parts}) == 1,
            f"the ranks' {split} parts have sizes {[len(p) for p in parts]}",
            "the ranks step together: with unequal parts their epochs end at other updates",
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
            f"rank {rank}'s training part is examples {first} to {last}, one block of the stored "
            "order: it is not "
            "shuffled before the split",
            "a data set stored by class would give each rank other classes, and each rank's "
            "gradient would pull towards its own",
        )
    expect(
        all(r["same_seed"] == r["train"] for r in ranks),
        "two calls with the same seed split the training set differently, so runs cannot be "
        "repeated",
        "the shuffle before the split is random: without the seed it differs every run",
    )
    expect(
        any(r["other_seed"] != r["train"] for r in ranks),
        "another seed gives the same split: the seed is not used",
        "the seed makes a run repeatable, and another seed gives another split",
    )
    passed(
        f"shard_datasets: each of the {layout.size} ranks gets its own shuffled part (train "
        f"{len(ranks[0]['train'])}, test {len(ranks[0]['test'])} each), together all of it, the "
        "same for the "
        "same seed"
    )


def optimizer(
    make_optimizer: Callable[..., Any],
    nodes: int = 2,
    ranks_per_node: int = 2,
    map_by: str = "slot",
) -> None:
    """make_optimizer: a multi-node optimizer at args.lr; the ranks' weights stay equal."""
    __tracebackhide__ = True
    layout, ranks = _on_ranks(make_optimizer, "optimizer", nodes, ranks_per_node, map_by)
    expect(
        all(r["class"] == "_MultiNodeOptimizer" for r in ranks),
        f"make_optimizer returned a {ranks[0]['class']}, which does not exchange gradients between "
        "ranks",
        "each rank's model would follow its own gradient and drift apart ('Optimizers')",
    )
    expect(
        all(r["target_is_model"] for r in ranks),
        "the optimizer is not set up on the model",
        "the optimizer updates only the link it was set up on, and that is not `model`",
    )
    expect(
        all(r["lr"] is not None and abs(r["lr"] - 0.1) < 1e-9 for r in ranks),
        f"with args.lr = 0.1 on {layout.size} ranks the optimizer starts at {ranks[0]['lr']}",
        "start at args.lr, the single-worker rate: learning_rate_schedule (and --lr-rule) scales "
        "it up",
    )
    weights = [r["weights"] for r in ranks]
    expect(
        all(abs(w - weights[0]) <= 1e-5 * max(1.0, abs(weights[0])) for w in weights),
        "after one update on different data the ranks' weights differ",
        "the gradients were not averaged over the ranks before the update",
    )
    passed(
        "make_optimizer: a multi-node optimizer at args.lr; after an update on different data all "
        f"{layout.size} "
        "ranks hold the same weights"
    )


def trainer(
    build_trainer: Callable[..., Any], nodes: int = 2, ranks_per_node: int = 2, map_by: str = "slot"
) -> None:
    """build_trainer: a multi-node Evaluator, Throughput over all ranks, reports on rank 0 only."""
    __tracebackhide__ = True
    layout, ranks = _on_ranks(build_trainer, "trainer", nodes, ranks_per_node, map_by)
    expect(
        all(r["updater"] == "StandardUpdater" for r in ranks),
        f"the updater is a {ranks[0]['updater']}",
        "ChainerMN uses the usual StandardUpdater: the multi-node optimizer does the communication",
    )
    expect(
        all(r["evaluators"] == 1 for r in ranks),
        "every rank needs one Evaluator",
        f"ranks 0-{layout.size - 1} have {[r['evaluators'] for r in ranks]}: the log's "
        "validation/main/* columns come from one",
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
        "the ranks evaluate only their own test part and report different results",
        f"the log would show rank 0's accuracy on 1/{layout.size} of the test set, not on all "
        "of it ('Extensions' in ChainerMN's reference)",
    )
    moved = BATCH * layout.size
    expect(
        all(r["throughput_images"] == moved for r in ranks),
        f"Throughput counts {ranks[0]['throughput_images']} images per step; {layout.size} ranks x "
        f"{BATCH} move "
        f"{moved}",
        "every rank draws its own minibatch at each step, so one step moves a minibatch per "
        "rank: the communicator knows how many ranks the job has",
    )
    reports = [{"LogReport", "PrintReport"} & set(r["extensions"]) for r in ranks]
    expect(
        reports[0] == {"LogReport", "PrintReport"},
        "rank 0 has no LogReport and PrintReport",
        "the job log should hold one table per run, written by rank 0",
    )
    others = [rank for rank, found in enumerate(reports) if rank and found]
    if others:
        fail(
            f"rank {others[0]} also reports ({', '.join(sorted(reports[others[0]]))}), so every "
            "line would be "
            "printed once per rank",
            "the ranks run the same script: the reports belong to rank 0 alone",
        )
    expect(
        all(r["out"] for r in ranks),
        "the trainer writes to another folder than args.out",
        "the job's log and results file go there",
    )
    passed(
        "build_trainer: StandardUpdater, a multi-node Evaluator (the same result on all "
        f"{layout.size} ranks), "
        "Throughput over all ranks, LogReport and PrintReport on rank 0 only"
    )


def learning_rate_schedule(
    schedule: Callable[..., Any],
    base_lr: float = 0.1,
    n_workers: int = 4,
    warmup_iterations: int = 8,
) -> None:
    """The rates the optimizer really uses: base_lr at the first update, n_workers x base_lr after
    the warm-up."""
    __tracebackhide__ = True
    import chainer

    extension = call(schedule, base_lr, n_workers, warmup_iterations)
    expect(
        isinstance(extension, chainer.training.Extension) or callable(extension),
        f"learning_rate_schedule returned {type(extension).__name__}, not a trainer extension",
        "the trainer runs extensions; one of Chainer's (see 'Extensions' in its reference) "
        "changes an optimizer attribute linearly over a number of iterations",
    )
    updates = warmup_iterations + 4
    used = rates_used(extension, base_lr, updates)
    ramp = [
        base_lr * (1 + (n_workers - 1) * min(t, warmup_iterations) / warmup_iterations)
        for t in range(updates)
    ]
    shown = ", ".join(f"{r:.3g}" for r in used)
    target = base_lr * n_workers

    def close(a: float, b: float) -> bool:
        return abs(a - b) <= 1e-6 * max(1.0, abs(b))

    expect(len(used) == updates, f"{len(used)} updates ran instead of {updates}")
    expect(
        close(used[-1], target) or not close(used[-1], base_lr),
        f"with {n_workers} workers the rate stays at the single-worker rate {base_lr} (rates used: "
        f"{shown}): "
        "no scaling",
        f"the linear scaling rule: {n_workers} workers move {n_workers} times the batch per "
        f"update, so the rate should reach {target:g}",
    )
    expect(
        close(used[-1], target),
        f"after the warm-up the rate is {used[-1]:.3g}, not base_lr x n_workers = "
        f"{target:g} (rates used: {shown})",
        f"the ramp should end at the scaled rate, {n_workers} times the single-worker rate",
    )
    expect(
        close(used[0], base_lr),
        f"the first update used the rate {used[0]:.3g}, not the single-worker rate "
        f"{base_lr} (rates used: {shown}): no warm-up, so the first updates of a large batch take "
        "too large "
        "steps",
        "a gradual warm-up (Goyal et al. 2017, in the lesson) starts from the single-worker "
        "rate while the weights are still random",
    )
    expect(
        all(close(a, b) for a, b in zip(used, ramp)),
        f"the rates used were {shown}; a linear ramp over {warmup_iterations} updates gives "
        f"{', '.join(f'{r:.3g}' for r in ramp)}",
        f"the warm-up should reach the scaled rate at update {warmup_iterations} and stay there",
    )
    passed(
        f"learning_rate_schedule: the rate ramps linearly from {base_lr} to {target:g} over "
        f"{warmup_iterations} "
        f"updates, then stays ({shown})"
    )


# Sites unlike the course's own, so that lines copied from the job script's defaults do not pass:
# (name, queue, group, GPUs per node, cores per node, ranks, threads per rank, epoch s, epochs).
_OTHER_SITES = (
    ("pbs-gpu", "h-regular", "gt00", 2, 36, 4, 4, 95.0, 10),  # the Reedbush-H hands-on's nodes
    ("no-queue", None, None, 0, 8, 8, 2, 1260.0, 4),  # CPU nodes: 4 ranks of 2 threads each
    ("queue-only", "short", None, 4, 16, 2, 1, 30.0, 3),  # fewer ranks than one node's GPUs
)


def resource_request(
    function: Callable[..., Any],
    cases: tuple[tuple[str, str | None, str | None, int, int, int, int, float, int], ...] = (
        _OTHER_SITES
    ),
    folder: Path = Path("."),
) -> None:
    """The #PBS lines of resource_request(site, ranks, threads_per_rank, epoch_seconds, epochs),
    read with the kit's directive parser, for this folder's site (when a profile is applied and a
    stage-1 run measured an epoch) and for `cases`."""
    __tracebackhide__ = True
    from course.cluster import siteenv
    from course.errors import CourseError
    from course.notebook import directives

    asked = [
        (directives.Site(name, queue, group, gpus, cores), ranks, threads, epoch_seconds, epochs)
        for name, queue, group, gpus, cores, ranks, threads, epoch_seconds, epochs in cases
    ]
    if (Path(folder) / "jobs" / siteenv.FILE).is_file():
        settings = siteenv.of_folder(folder)
        try:  # without a stage-1 run yet, the other sites' cases say it all
            measured = directives.measured_epochs(folder)
            ranks = settings.largest_run[0] * settings.largest_run[1]
            here = (directives.applied_site(folder), ranks, settings.threads_per_rank)
            asked.insert(0, (*here, *measured))
        except CourseError:
            pass
    for site, ranks, threads, epoch_seconds, epochs in asked:
        lines = call(function, site, ranks, threads, epoch_seconds, epochs)
        try:
            directives.check(lines, site, ranks, threads, epoch_seconds, epochs)
        except CourseError as e:
            fail(
                f"for {site!r}: {ranks} rank(s) of {threads} thread(s), {epochs} epoch(s) of "
                f"{epoch_seconds:g} s: {e.message}",
                e.hint,
            )
    passed(
        f"resource_request: the right #PBS lines for {len(asked)} sites and runs, "
        f"e.g. {' | '.join(call(function, *asked[0]))}"
    )

"""Stage 3's rank checks of the training: make_optimizer's multi-node optimizer and build_trainer's
trainer, judged on every rank's facts from the probe as course.lessons.core.multi_node's checks
are (the notebooks call them from there)."""

from __future__ import annotations

from typing import Any

import course.lessons.core.mn_reference as mn_reference
from course import i18n
from course.i18n import _
from course.lessons.core.mn_ranks import Layout, part_facts
from course.lessons.core.mn_settings import BATCH, LR, TRAIN_PER_RANK
from course.notebook.checks.verdict import expect, fail, passed


def optimizer(
    make_optimizer: Any,
    nodes: int = 2,
    ranks_per_node: int = 2,
    map_by: str = "slot",
) -> None:
    """make_optimizer: a multi-node optimizer at args.lr; the ranks' weights stay equal."""
    __tracebackhide__ = True
    layout = Layout(nodes, ranks_per_node, map_by)
    seed, ranks = part_facts(make_optimizer, "optimizer", layout)
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
    layout = Layout(nodes, ranks_per_node, map_by)
    ranks = part_facts(build_trainer, "trainer", layout)[1]
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
            ).format(rank=others[0], reports=i18n.listed(sorted(reports[others[0]]))),
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

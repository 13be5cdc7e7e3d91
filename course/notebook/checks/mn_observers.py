"""The observers of the stage-3 checks that run in the notebook's process (or the grader's test
child) rather than on MPI ranks: they run the student's learning_rate_schedule and
resource_request on the check's inputs and describe what they did as plain facts, which
multi_node judges."""

from __future__ import annotations

from typing import Any

from course.notebook.checks.inputs import labelled_dataset, scratch_folder
from course.notebook.checks.verdict import call, real


def schedule_rates(
    schedule: Any, base_lr: float, n_workers: int, warmup_iterations: int, updates: int
) -> dict:
    """{"type": what learning_rate_schedule(base_lr, n_workers, warmup_iterations) returned,
    "rates": the learning rate each of `updates` updates of a small trainer with it used (None
    per update where it is no number), or None when it returned no extension}."""
    import chainer

    extension = call(schedule, base_lr, n_workers, warmup_iterations)
    kind = type(extension).__name__
    if not (isinstance(extension, chainer.training.Extension) or callable(extension)):
        return {"type": kind, "rates": None}
    return {"type": kind, "rates": _rates_used(extension, base_lr, updates)}


def _rates_used(extension: Any, base_lr: float, updates: int) -> list[float | None]:
    """The learning rate each update of a small trainer that has `extension` used, read by an
    optimizer hook inside the update."""
    import chainer
    import chainer.links as L
    from chainer import training

    model = L.Classifier(L.Linear(None, 10))
    optimizer = chainer.optimizers.MomentumSGD(base_lr)
    optimizer.setup(model)
    used: list[float | None] = []
    optimizer.add_hook(lambda opt: used.append(real(opt.lr)), name="record_lr")
    iterator = chainer.iterators.SerialIterator(labelled_dataset(8, size=4), 4)
    trainer = training.Trainer(
        training.updaters.StandardUpdater(iterator, optimizer),
        (updates, "iteration"),
        out=scratch_folder(),
    )
    trainer.extend(extension, name="learning_rate_schedule")
    trainer.run(show_loop_exception_msg=False)
    return used


def request_lines(function: Any, cases: list[list]) -> list[dict]:
    """Per case [site's fields, ranks, threads per rank, epoch seconds, epochs]: {"lines": what
    resource_request returned} when it is a list of strings, else {"type": its type's name}."""
    from course.notebook import directives

    found: list[dict] = []
    for fields, ranks, threads, epoch_seconds, epochs in cases:
        site = directives.Site(**{**fields, "resources": tuple(fields["resources"])})
        lines = call(function, site, ranks, threads, epoch_seconds, epochs)
        if isinstance(lines, (list, tuple)) and all(isinstance(line, str) for line in lines):
            found.append({"lines": [str.__str__(line) for line in lines]})
        else:
            found.append({"type": type(lines).__name__})
    return found

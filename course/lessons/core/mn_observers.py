"""The observers of the stage-3 checks that run in the notebook's process (or the grader's test
child) rather than on MPI ranks: they run the student's learning_rate_schedule on the check's
inputs and describe what it did as plain facts, which multi_node judges."""

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

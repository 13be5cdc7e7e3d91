"""What the trainer checks of stages 1 and 2 both verify of a built Trainer: its length in epochs,
its Throughput, its reports, and the log of a short run."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable
from typing import Any

from chainer import training
from chainer.training import extensions

from course.notebook.checks.inputs import labelled_dataset, scratch_folder
from course.notebook.checks.verdict import call, expect
from course.runtime.throughput import Throughput


def extensions_of(trainer: training.Trainer) -> dict[str, Any]:
    """{name: extension} of a Trainer (Chainer keeps them in a private dict)."""
    return {name: entry.extension for name, entry in trainer._extensions.items()}


def of_type(trainer: training.Trainer, kind: type) -> list:
    """The trainer's extensions of class `kind`."""
    return [ext for ext in extensions_of(trainer).values() if isinstance(ext, kind)]


def built_trainer(build_trainer: Callable[..., Any], *args: Any) -> training.Trainer:
    """build_trainer(*args), which must return a Trainer."""
    __tracebackhide__ = True
    built = call(build_trainer, *args)
    expect(
        isinstance(built, training.Trainer),
        f"build_trainer returned {type(built).__name__}, not a Trainer",
    )
    return built


def expect_epochs(built: training.Trainer, epochs: int, out: str, out_fix: str) -> None:
    """The trainer stops after args.epoch epochs and writes to args.out (`out`; else the hint
    `out_fix`)."""
    __tracebackhide__ = True
    stop = built.stop_trigger
    expect(
        (getattr(stop, "period", None), getattr(stop, "unit", None)) == (epochs, "epoch"),
        f"the trainer stops after {getattr(stop, 'period', '?')} {getattr(stop, 'unit', '?')}(s), "
        f"not args.epoch ({epochs}) epochs",
        "the stop trigger sets how long the trainer runs: the job script passes the epochs in "
        "args.epoch (see Trainer in Chainer's reference)",
    )
    expect(
        built.out == out,
        f"the trainer writes to another folder than args.out ({built.out!r}, not {out!r})",
        out_fix,
    )


def expect_throughput(
    built: training.Trainer, images: int, none: tuple[str, str], moved: str, fix: str
) -> None:
    """The trainer has one course.Throughput (else CheckFailed with `none`: message and hint), and
    it counts the `images` a step moves (else "Throughput counts N images per step; `moved`")."""
    __tracebackhide__ = True
    meters = of_type(built, Throughput)
    expect(len(meters) == 1, *none)
    counted = meters[0].images_per_iteration
    expect(counted == images, f"Throughput counts {counted} images per step; {moved}", fix)


def expect_reports(built: training.Trainer) -> None:
    """The trainer has a LogReport and a PrintReport."""
    __tracebackhide__ = True
    expect(
        bool(of_type(built, extensions.LogReport) and of_type(built, extensions.PrintReport)),
        "the trainer needs a LogReport and a PrintReport",
        "the job log shows the PrintReport table per epoch",
    )


def expect_meters_and_log(
    built: training.Trainer, epochs: int, images: int, none: tuple[str, str], moved: str, fix: str
) -> list[dict]:
    """expect_throughput (of `images` a step), expect_reports, then the trained_log of a run."""
    __tracebackhide__ = True
    expect_throughput(built, images, none=none, moved=moved, fix=fix)
    expect_reports(built)
    return trained_log(built, epochs)


def trained_log(built: training.Trainer, epochs: int) -> list[dict]:
    """Run the trainer quietly; its LogReport's entries, one per epoch with the training loss and
    the validation accuracy."""
    __tracebackhide__ = True
    for report in of_type(built, extensions.PrintReport):
        report._out = io.StringIO()  # it holds on to sys.stdout from when it was made
    with contextlib.redirect_stdout(io.StringIO()):
        call(built.run)
    log = of_type(built, extensions.LogReport)[0].log
    expect(
        len(log) == epochs and all(k in log[-1] for k in ("main/loss", "validation/main/accuracy")),
        f"after {epochs} epochs the log has {len(log)} entries with "
        f"{sorted(log[-1]) if log else []}",
        "the checks and the report read one LogReport entry per epoch, with main/* from the "
        "training and validation/main/* from the Evaluator",
    )
    return log


def rates_used(extension: Any, base_lr: float, updates: int) -> list[float]:
    """The learning rate of each of `updates` updates of a small trainer that has `extension`."""
    import chainer
    import chainer.links as L
    from chainer import training

    model = L.Classifier(L.Linear(None, 10))
    optimizer = chainer.optimizers.MomentumSGD(base_lr)
    optimizer.setup(model)
    used: list[float] = []
    optimizer.add_hook(
        lambda opt: used.append(float(opt.lr)), name="record_lr"
    )  # runs inside each update
    iterator = chainer.iterators.SerialIterator(labelled_dataset(8, size=4), 4)
    trainer = training.Trainer(
        training.updaters.StandardUpdater(iterator, optimizer),
        (updates, "iteration"),
        out=scratch_folder(),
    )
    trainer.extend(extension, name="learning_rate_schedule")
    trainer.run(show_loop_exception_msg=False)
    return used

"""What the trainer checks of stages 1 and 2 both verify of a built Trainer: its length in epochs,
its Throughput, its reports, and the log of a short run. The observers describe the Trainer as facts
(`described`, `ran`), in the process that ran the student's build_trainer; the checks judge those
facts (`expect_*`)."""

from __future__ import annotations

import contextlib
import io
from typing import Any

from chainer import training
from chainer.training import extensions

from course.i18n import _
from course.notebook.checks.observe import finite, number
from course.notebook.checks.verdict import call, expect, real
from course.runtime.throughput import Throughput


def extensions_of(trainer: training.Trainer) -> dict[str, Any]:
    """{name: extension} of a Trainer (Chainer keeps them in a private dict)."""
    return {name: entry.extension for name, entry in trainer._extensions.items()}


def of_type(trainer: training.Trainer, kind: type) -> list:
    """The trainer's extensions of class `kind`."""
    return [ext for ext in extensions_of(trainer).values() if isinstance(ext, kind)]


def fact(value: Any) -> Any:
    """A setting of the student's objects as a fact: a JSON primitive as it is (a subclass is read
    as its built-in type when it crosses), anything else in words."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)


def weights(link: Any) -> dict[str, list]:
    """{name: values} of a link's initialised parameters, as facts."""
    return {
        name: param.array.tolist() for name, param in link.namedparams() if param.array is not None
    }


def described(built: Any, out: str) -> dict[str, Any]:
    """The facts the trainer checks of stages 1 and 2 judge of what build_trainer returned (the
    job's flags had `out`): its length, folder, Throughput meters and reports."""
    if not isinstance(built, training.Trainer):
        return {"built": type(built).__name__, "trainer": False}
    stop = built.stop_trigger
    return {
        "built": type(built).__name__,
        "trainer": True,
        "stop": [fact(getattr(stop, "period", None)), fact(getattr(stop, "unit", None))],
        "out": [fact(built.out), out],
        "throughput": [fact(meter.images_per_iteration) for meter in of_type(built, Throughput)],
        "reports": [
            bool(of_type(built, extensions.LogReport)),
            bool(of_type(built, extensions.PrintReport)),
        ],
    }


def ran(built: training.Trainer) -> dict[str, Any]:
    """Run the trainer quietly; what it did, as facts: the updates, how many steps each Throughput
    timed, and the first LogReport's entries (their numbers)."""
    __tracebackhide__ = True
    for report in of_type(built, extensions.PrintReport):
        report._out = io.StringIO()  # it holds on to sys.stdout from when it was made
    with contextlib.redirect_stdout(io.StringIO()):
        call(built.run)
    logs = of_type(built, extensions.LogReport)
    return {
        "iteration": fact(built.updater.iteration),
        "timed": [meter._seen for meter in of_type(built, Throughput)],
        "log": [
            {key: real(value) for key, value in entry.items() if real(value) is not None}
            for entry in logs[0].log
        ]
        if logs
        else None,
    }


def expect_trainer(facts: Any) -> None:
    """build_trainer returned a Trainer."""
    __tracebackhide__ = True
    expect(
        facts["trainer"] is True,
        _("build_trainer returned {built}, not a Trainer").format(built=facts["built"]),
    )


def expect_epochs(facts: Any, epochs: int, out_fix: str) -> None:
    """The trainer stops after args.epoch epochs and writes to args.out (else the hint
    `out_fix`)."""
    __tracebackhide__ = True
    period, unit = facts["stop"]
    expect(
        [period, unit] == [epochs, "epoch"] and number(period) is not None,
        _("the trainer stops after {period} {unit}(s), not args.epoch ({epochs}) epochs").format(
            period="?" if period is None else period,
            unit="?" if unit is None else unit,
            epochs=epochs,
        ),
        _(
            "the stop trigger sets how long the trainer runs: the job script passes the epochs in "
            "args.epoch (see Trainer in Chainer's reference)"
        ),
    )
    out, wanted = facts["out"]
    expect(
        out == wanted and isinstance(out, str),
        _("the trainer writes to another folder than args.out ({out}, not {wanted})").format(
            out=repr(out), wanted=repr(wanted)
        ),
        out_fix,
    )


def expect_throughput(facts: Any, images: int, none: tuple[str, str], moved: str, fix: str) -> None:
    """The trainer has one course.Throughput (else CheckFailed with `none`: message and hint), and
    it counts the `images` a step moves (else "Throughput counts N images per step; `moved`")."""
    __tracebackhide__ = True
    meters = facts["throughput"]
    expect(len(meters) == 1, *none)
    counted = meters[0]
    expect(
        counted == images and number(counted) is not None,
        _("Throughput counts {counted} images per step; {moved}").format(
            counted=counted, moved=moved
        ),
        fix,
    )


def expect_reports(facts: Any) -> None:
    """The trainer has a LogReport and a PrintReport."""
    __tracebackhide__ = True
    expect(
        facts["reports"] == [True, True],
        _("the trainer needs a LogReport and a PrintReport"),
        _("the job log shows the PrintReport table per epoch"),
    )


def expect_trained(facts: Any, epochs: int, steps: int) -> list[dict]:
    """What the run did: `epochs` epochs of `steps` updates, every one timed by the Throughput, and
    one LogReport entry per epoch with a finite training loss and the validation accuracy; the
    log."""
    __tracebackhide__ = True
    log = facts["log"] or []
    expect(
        len(log) == epochs and all(k in log[-1] for k in ("main/loss", "validation/main/accuracy")),
        _("after {epochs} epochs the log has {count} entries with {keys}").format(
            epochs=epochs, count=len(log), keys=sorted(log[-1]) if log else []
        ),
        _(
            "the checks and the report read one LogReport entry per epoch, with main/* from the "
            "training and validation/main/* from the Evaluator"
        ),
    )
    losses = [entry.get("main/loss") for entry in log]
    expect(
        all(finite(loss) for loss in losses),
        _("the training loss in the log is {losses}, not a number at every epoch").format(
            losses=losses
        ),
        _(
            "a loss that is not finite means the weights diverged: the learning rate or the "
            "model's settings are not the job's"
        ),
    )
    updates = epochs * steps
    expect(
        facts["iteration"] == updates and number(facts["iteration"]) is not None,
        _("the trainer ran {ran} updates; {epochs} epochs of {steps} steps are {updates}").format(
            ran=facts["iteration"], epochs=epochs, steps=steps, updates=updates
        ),
    )
    expect(
        facts["timed"] == [updates],
        _("Throughput timed {timed} of the {updates} steps").format(
            timed=facts["timed"], updates=updates
        ),
        _("it measures the time between two steps, so it runs after every step"),
    )
    return log

"""The optimizer's policy, the same in every stage: a learning-rate rule for N workers (warm-up,
constant, linear; sqrt and lars for notebook 06), the final drop, the rate the optimizer really
used, into the log, and the weight decay."""

from __future__ import annotations

import argparse

import chainer

from course.contracts import stages
from course.errors import CourseError
from course.i18n import _
from course.runtime import largebatch

# Every stage trains with it (main() adds it), so that the stages' accuracies compare.
WEIGHT_DECAY = 5e-4


class _FinalDrop(chainer.training.Extension):
    """From iteration `start` on, a tenth of the rate the schedule sets (a step decay, as Goyal et
    al.).

    It runs after the other schedule extensions of the same iteration, and scales the rate it found
    when the drop began, so that it works over a LinearShift that sets the rate at every update too.
    """

    trigger = 1, "iteration"
    priority = chainer.training.PRIORITY_READER - 10

    def __init__(self, start: int) -> None:
        self.start = start
        self._rate: float | None = None

    def __call__(self, trainer) -> None:
        if trainer.updater.iteration >= self.start:
            optimizer = trainer.updater.get_optimizer("main")
            self._rate = optimizer.lr if self._rate is None else self._rate
            optimizer.lr = self._rate * 0.1

    def initialize(self, trainer) -> None:
        """A run resumed inside the drop trains at the dropped rate from its first step (the
        optimizer's rate is not in a snapshot)."""
        if self._rate is not None:
            trainer.updater.get_optimizer("main").lr = self._rate * 0.1

    def serialize(self, serializer) -> None:
        rate = serializer("rate", -1.0 if self._rate is None else self._rate)
        self._rate = None if rate < 0 else float(rate)


def _iterations_per_epoch(trainer, args: argparse.Namespace) -> int:
    return max(1, len(trainer.updater.get_iterator("main").dataset) // args.batchsize)


def apply_lr_drop(trainer, args: argparse.Namespace) -> int | None:
    """The last --lr-drop-epochs at a tenth of the rate; returns the first iteration of the drop
    (None: none)."""
    if args.lr_drop_epochs <= 0:
        return None
    start = round((args.epoch - args.lr_drop_epochs) * _iterations_per_epoch(trainer, args))
    trainer.extend(_FinalDrop(max(0, start)), name="course_lr_drop")
    return max(0, start)


def apply_lr_rule(trainer, args: argparse.Namespace, workers: int, schedule) -> dict:
    """Set the learning rate of `trainer`'s optimizer by args.lr_rule for `workers` workers, then
    the drop.

    The optimizer starts at args.lr, the single-worker rate. schedule(base_lr, factor,
    warmup_iterations) is the warm-up extension (the student's, in stage 3), ramping base_lr to
    factor x base_lr: warmup, sqrt and lars ramp with it. lars also adds Chainer's GradientLARS
    hook and runs the optimizer at LARS_TRUST times the rule's rate. Returns what was done, for
    the results file (also kept as args.lr_plan).
    """
    optimizer = trainer.updater.get_optimizer("main")
    ramps = args.lr_rule in ("warmup", *stages.LARGE_BATCH_LR_RULES)
    warmup = round(args.lr_warmup_epochs * _iterations_per_epoch(trainer, args)) if ramps else 0
    base = args.lr
    if args.lr_rule == "lars":
        # Chainer's lr is the paper's global rate times its trust coefficient (the hook's docstring)
        base = args.lr * stages.LARS_TRUST
        # weight decay is the course's own hook (added before): the trust ratio sees it in the grad
        optimizer.add_hook(chainer.optimizer_hooks.GradientLARS(weight_decay=0.0))
    factor = largebatch.rate_factor(args.lr_rule, workers)
    target = base * factor
    if not ramps or warmup == 0 or workers == 1:
        optimizer.lr = target
        warmup = 0
    else:
        trainer.extend(schedule(base, factor, warmup), name="learning_rate_schedule")
    args.lr_plan = {
        "rule": args.lr_rule,
        "start": base if warmup else target,
        "target": target,
        "warmup_iterations": warmup,
        "drop_from_iteration": apply_lr_drop(trainer, args),
    }
    return args.lr_plan


def learning_rate(optimizer) -> float | None:
    """The base learning rate: lr (SGD family) or alpha (Adam, whose .lr raises before the first
    step)."""
    hyperparam = getattr(optimizer, "hyperparam", None)
    for name in ("lr", "alpha"):
        value = getattr(hyperparam, name, None)
        if isinstance(value, (int, float)):
            return float(value)
    return None  # AdaDelta and the like have none


@chainer.training.make_extension(
    trigger=(1, "iteration"), priority=chainer.training.PRIORITY_WRITER
)
def observe_rate(trainer) -> None:
    """The rate the optimizer really uses, into the log (LogReport averages it per entry); any
    optimizer."""
    rate = learning_rate(trainer.updater.get_optimizer("main"))
    if rate is not None:
        chainer.reporter.report({"lr": rate})


def add_weight_decay(optimizer) -> None:
    """The course's weight decay on `optimizer`, which is set up on the model."""
    try:
        optimizer.add_hook(chainer.optimizer_hooks.WeightDecay(WEIGHT_DECAY))
    except KeyError:  # Chainer refuses a second hook of the same name
        raise CourseError(
            _(
                "your optimizer already has a WeightDecay hook, and main() adds the course's "
                "(rate {rate:g}) to every stage, so that the stages compare"
            ).format(rate=WEIGHT_DECAY),
            _("leave weight decay to main(): remove the add_hook line from your function"),
        ) from None

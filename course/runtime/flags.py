"""A stage script's flags and the run folder they name.

The defaults suit a GPU; the job scripts pass the site's choices (course.cluster.siteenv).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from pathlib import Path

from course.cli import CommandParser
from course.cluster import hosts
from course.contracts import results, stages
from course.i18n import _

DEFAULT_SEED = 0


def run_tag() -> str:
    """The run folder's suffix: the job's id and rerun attempt (all its ranks share it), else the
    time made unique.

    Outside a job the process id keeps runs started in the same second on one machine apart, and
    a random part keeps apart those of other machines sharing the folder, or two calls in one
    process.
    """
    tag = os.environ.get("COURSE_RUN_TAG") or hosts.detect().run_tag
    if not tag:
        tag = f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-{os.urandom(2).hex()}"
    return re.sub(r"[^A-Za-z0-9._-]", "_", tag)


def parser(stage: str) -> argparse.ArgumentParser:
    """The flags of a stage script. Defaults suit a GPU; the job scripts pass the site's choices."""
    stages.get(stage)
    parser = CommandParser(
        description=_("CIFAR-10 training, course stage {stage}").format(stage=stage)
    )
    parser.add_argument(
        "--dataset",
        default=os.environ.get("COURSE_DATASET", "auto"),
        help=_("data set name (python -m course data list); auto: real CIFAR-10 if prepared"),
    )
    parser.add_argument("--model", default="vgg", help=_("vgg or resnet"))
    parser.add_argument(
        "--width", type=int, default=64, help=_("channels of the first block (16 for CPU)")
    )
    parser.add_argument(
        "--batchsize", "-b", type=int, default=64, help=_("images per step on ONE worker")
    )
    parser.add_argument("--epoch", "-e", type=int, default=4, help=_("epochs to train"))
    parser.add_argument(
        "--lr", type=float, default=0.05, help=_("learning rate for --batchsize on one worker")
    )
    parser.add_argument(
        "--warmup", type=int, default=5, help=_("iterations left out of images/sec")
    )
    parser.add_argument(
        "--lr-rule",
        choices=stages.LR_RULES,
        default=stages.TAUGHT_LR_RULE,
        help=_("how the learning rate follows the total batch of N workers (stage 3)"),
    )
    parser.add_argument(
        "--lr-warmup-epochs",
        type=float,
        default=1.0,
        help=_("epochs over which the warmup rule ramps the learning rate up to N x --lr"),
    )
    parser.add_argument(
        "--lr-drop-epochs",
        type=float,
        default=1.0,
        help=_("the last epochs train at a tenth of the learning rate (a step decay; 0: none)"),
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=DEFAULT_SEED,
        help=_("seed of the weights, the batch order, dropout and the data's split over ranks"),
    )
    parser.add_argument("--out", default=None, help=_("run folder (default runs/<stage>-<job id>)"))
    parser.add_argument(
        "--resume",
        action=argparse.BooleanOptionalAction,
        default=True,
        help=_("continue an unfinished run of the same training from its newest snapshot"),
    )
    if stage == stages.SINGLE_GPU.name:
        parser.add_argument("--device", default="auto", help=_("@cupy:0, @numpy, or auto"))
    elif stage == stages.MULTI_GPU.name:
        parser.add_argument(
            "--gpus", type=int, default=None, help=_("GPUs to use (default: all visible)")
        )
    else:
        parser.add_argument(
            "--communicator",
            default="auto",
            help=_("ChainerMN communicator; auto: pure_nccl on GPUs, naive on CPUs"),
        )
        parser.add_argument(
            "--gpu",
            action=argparse.BooleanOptionalAction,
            default=None,
            help=_("one GPU per rank (default: when the node has GPUs)"),
        )
        parser.add_argument(
            "--profile",
            action="store_true",
            help=_("time every step's data, forward, backward, allreduce and update, per rank"),
        )
    return parser


def parse_args(stage: str, argv: list[str] | None = None, more_flags=None) -> argparse.Namespace:
    """The flags of a stage script (sys.argv, or `argv`), with the run folder filled in.

    more_flags: a function that adds a script's own flags to the parser.
    """
    flags = parser(stage)
    if more_flags is not None:
        more_flags(flags)
    args = flags.parse_args(argv)
    if stage == stages.MULTI_NODE.name:
        # Without this an exception on one rank leaves the others waiting in MPI until the walltime
        # ends.
        from chainermn import global_except_hook

        if (
            sys.excepthook is not global_except_hook._global_except_hook
        ):  # the job may have set it already
            global_except_hook.add_hook()
    args.stage = stage
    args.out = args.out or str(Path(results.RUNS_DIR) / f"{stage}-{run_tag()}")
    return args

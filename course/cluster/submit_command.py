"""`python -m course submit`: the command line over course.cluster.submit (its help is that module's
description)."""

from __future__ import annotations

from pathlib import Path

from course.cli import command_parser
from course.cluster import submit
from course.i18n import _


def main(argv: list[str]) -> int:
    """`python -m course submit [-l RESOURCE] [-v VARS] SCRIPT`: submit a job script and follow its
    log."""
    parser = command_parser("course submit", submit.__doc__)
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--local",
        dest="scheduler",
        action="store_const",
        const="local",
        help=_("run it on this machine, whatever the site profile says"),
    )
    where.add_argument(
        "--qsub", dest="scheduler", action="store_const", const="qsub", help=_("hand it to qsub")
    )
    parser.set_defaults(scheduler="auto")
    parser.add_argument(
        "-l",
        dest="resources",
        action="append",
        default=[],
        metavar="RESOURCE",
        help=_("as qsub -l, e.g. -l select=1:mpiprocs=2"),
    )
    parser.add_argument(
        "-v", dest="variables", default="", metavar="VAR=VALUE,...", help=_("as qsub -v")
    )
    parser.add_argument(
        "--no-wait", dest="wait", action="store_false", help=_("return after submitting")
    )
    parser.add_argument("script", type=Path)
    args = parser.parse_args(argv)
    options = [x for r in args.resources for x in ("-l", r)] + (
        ["-v", args.variables] if args.variables else []
    )
    job = submit.submit(args.script, scheduler=args.scheduler, options=options)
    if job is None:  # nbgrader runs the notebook: nothing was submitted, as submit said
        return 0
    if not args.wait:
        log = job.find_log() or f"<script>.o{job.number}"
        print(_("follow it with: {command}").format(command=f"tail -f {log}"))
        return 0
    status = job.wait()
    return 1 if status is None or status < 0 else min(status, 255)  # < 0: how it ended is unknown

"""`python -m course handin`: nbgrader's submit, and a failure said as one.

It runs nbgrader's own `nbgrader submit ASSIGNMENT` (by default the assignment of the bundle's
edition: `distributed_training_ja` in the Japanese bundle; the students' configuration puts the
kit's NamingSubmit in nbgrader) in the folder of the nearest nbgrader_config.py, and checks its
result: the exit status, and nbgrader's "Submitted as" line. Anything else is a failure, said in
plain words with nbgrader's own, and the command exits 1, so that neither a terminal nor a script
reads a refused hand-in as done.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from course import i18n, paths
from course.i18n import _
from course.notebook import handin

SUBMITTED = "Submitted as:"  # nbgrader's log line once the copy is in the exchange


def submit(assignment: str, folder: Path, extra: list[str]) -> tuple[bool, str]:
    """(handed in, nbgrader's log) of `nbgrader submit ASSIGNMENT EXTRA` run in `folder`."""
    done = subprocess.run(
        [sys.executable, "-m", "nbgrader", "submit", assignment, *extra],
        cwd=folder,
        capture_output=True,
        text=True,
        env=paths.tool_environment(),
    )
    log = done.stdout + done.stderr
    return done.returncode == 0 and SUBMITTED in log, log


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="course handin",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "assignment",
        nargs="?",
        default=i18n.assignment(i18n.edition() or i18n.language()),
        help=_("default: %(default)s"),
    )
    parser.add_argument(
        "--folder",
        type=Path,
        default=Path("."),
        help=_("a folder in your copy of the course (default: here)"),
    )
    args, extra = parser.parse_known_args(argv)  # the rest goes to nbgrader (--student=...)
    config = handin.limits(args.folder).config
    if config is None:
        print(
            _(
                "Nothing was handed in: there is no {config} in {folder} or above it. Run this "
                "command in the folder your instructor gave you (the one with install.sh), or "
                "give it with --folder."
            ).format(config=handin.CONFIG, folder=args.folder.resolve()),
            file=sys.stderr,
        )
        return 1
    handed_in, log = submit(args.assignment, config.parent, extra)
    said = [line for line in log.splitlines() if line.strip()]
    if handed_in:
        print("\n".join(said))
        print(
            _("Handed in: {assignment} is in the exchange, as the line above says.").format(
                assignment=args.assignment
            )
        )
        return 0
    print("\n".join(said[-15:]), file=sys.stderr)
    print(
        _(
            "Nothing was handed in: nbgrader's submit of {assignment} failed in {folder} (its "
            "words are above). Fix what they name and run this command again; your work is still "
            "in your folder."
        ).format(assignment=args.assignment, folder=config.parent),
        file=sys.stderr,
    )
    return 1

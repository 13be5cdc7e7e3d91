"""The kit's command line: `python -m course COMMAND [...]`; `python -m course COMMAND -h` for each.

One convention: each command is a module with `main(argv) -> int` that builds its own parser.
This table only names them, so that `python -m course -h` answers without importing Chainer.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import re
import sys
from collections.abc import Callable, Iterator
from typing import Any, NoReturn

from wcwidth import width

from course.errors import CourseError
from course.i18n import _

COMMANDS = {  # name: the module that runs it (`about` says what it does)
    "doctor": "course.diagnostics.doctor",
    "env": "course.gpu",
    "kernels": "course.diagnostics.kernels",
    "data": "course.runtime.data_command",
    "train": "course.instructor.reference",
    "submit": "course.cluster.submit_command",
    "cancel": "course.cluster.localsched",
    "launch": "course.cluster.launch",
    "site": "course.cluster.sites",
    "report": "course.notebook.report",
    "handin": "course.notebook.handin_command",
    "release": "course.instructor.release",
    "grade": "course.instructor.grade_command",
    "class-report": "course.instructor.class_report",
    "plan": "course.instructor.allocation",
    "bundle": "course.instructor.bundle",
    "demo": "course.instructor.demo",
    "i18n": "course.instructor.i18n_command",
}


def about(name: str) -> str:
    """What the command `name` does, in the student's language (`python -m course -h` lists it)."""
    return {
        "doctor": _("what works on this machine, and how to fix the rest"),
        "env": _(
            "shell lines that make the gpu extra's CUDA libraries findable (eval their output)"
        ),
        "kernels": _(
            "compile the course's CUDA kernels for P100 to H100 with NVRTC (no GPU needed)"
        ),
        "data": _("prepare CIFAR-10, the synthetic set, or a variant; list what is prepared"),
        "train": _("the kit's reference CIFAR-10 training (one device, or ranks under mpiexec)"),
        "submit": _("submit a job script: to qsub, or run it here as PBS would (local profile)"),
        "cancel": _("stop a job that runs on this machine (local profile), as qdel does"),
        "launch": _("inside a job: start a command as one MPI rank per slot (-- COMMAND)"),
        "site": _(
            "site profiles: list, show (what jobs/ has), apply PROFILE; verify: run the course's "
            "jobs on the site and report what to fix"
        ),
        "report": _("the table of your runs: images/sec, speedup and efficiency vs stage 1"),
        "handin": _(
            "hand in your assignment with nbgrader's submit; a failure exits 1 and says why"
        ),
        "release": _("make the student release notebooks/ from solutions/ (nbgrader)"),
        "grade": _("autograde submissions with nbgrader, feedback and a CSV gradebook"),
        "class-report": _(
            "after grading: one HTML page of the class's scaling, accuracy and failed exercises"
        ),
        "plan": _(
            "before the class: node-hours and GPU-hours of the course's jobs, and the request"
        ),
        "bundle": _("make the folder to hand out to students (no solutions, no grader)"),
        "demo": _("the whole course on this machine: release, a student, the jobs, grading"),
        "i18n": _(
            "translations: update the catalogs from the English, show what is left, build an "
            "edition"
        ),
    }[name]


# Subcommands that live in a module of their own (an instructor's, which the students' copy lacks).
SUBCOMMANDS = {("site", "verify"): "course.instructor.site_verify"}
USAGE = "usage: python -m course COMMAND [-h] [...]"  # as argparse begins a command's help


def _argparse_messages(_: Callable[[str], str] = _) -> list[str]:
    """argparse's own messages that a student reads (the headings of its help, -h's help, its
    errors), each as argparse looks it up (its gettext id, filled with %), through `_`: as they
    are in English with `_` that gives its message back, else in the student's language."""
    return [
        _("positional arguments"),
        _("options"),
        _("show this help message and exit"),
        _("{command}: error: {message}").format(command="%(prog)s", message="%(message)s") + "\n",
        _("the following arguments are required: {arguments}").format(arguments="%s"),
        _("unrecognized arguments: {arguments}").format(arguments="%s"),
        _("argument {argument}: {message}").format(
            argument="%(argument_name)s", message="%(message)s"
        ),
        _("invalid choice: {value} (choose from {choices})").format(
            value="%(value)r", choices="%(choices)s"
        ),
        _("invalid {type} value: {value}").format(type="%(type)s", value="%(value)r"),
        _("expected one argument"),
        _("expected at most one argument"),
        _("expected at least one argument"),
        _("one of the arguments {arguments} is required").format(arguments="%s"),
        _("not allowed with argument {argument}").format(argument="%s"),
        _("ambiguous option: {option} could match {matches}").format(
            option="%(option)s", matches="%(matches)s"
        ),
        _("ignored explicit argument {value}").format(value="%r"),
    ]


def _argparse_gettext(message: str) -> str:
    """argparse's message `message` in the student's language (its usage prefix and any other
    message as they are)."""
    english = _argparse_messages(lambda text: text)
    return dict(zip(english, _argparse_messages())).get(message, message)


@contextlib.contextmanager
def argparse_words() -> Iterator[None]:
    """argparse's own words in the student's language while the block runs: argparse looks each
    up through its module's gettext function `_` (Python 3.11), which this puts the kit's in place
    of."""
    module = vars(argparse)
    before = module["_"]
    module["_"] = _argparse_gettext
    try:
        yield
    finally:
        module["_"] = before


# A line of Japanese may break between any two of its characters, but not before a closing mark
# nor after an opening one: the pieces a line is filled with.
_WIDE = "\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef"
_OPENING, _CLOSING = "（「『【〔", "、。，．）」』】〕！？ー・：；"
_PIECE = re.compile(rf"[{_OPENING}]*(?:[^\s{_WIDE}]+|[{_WIDE}])[{_CLOSING}]*")


def wrapped(text: str, columns: int) -> list[str]:
    """`text` (its whitespace as one space) in lines of at most `columns` terminal columns, filled
    with pieces (`_PIECE`) whose columns are counted as a terminal shows them (a piece longer stands
    alone)."""
    lines: list[str] = []
    line = ""
    for piece in re.finditer(rf"{_PIECE.pattern}|\s+", text.strip()):
        found = piece.group()
        if found.isspace():
            line += " "
        elif line.strip() and width(line + found) > columns:
            lines.append(line.rstrip())
            line = found
        else:
            line += found
    return [*lines, line.rstrip()] if line.strip() else lines


def _narrow(text: str) -> bool:
    """Whether `text` has no wide character (then argparse wraps it, as it always did)."""
    return width(text) == len(text)


class HelpFormatter(argparse.HelpFormatter):
    """argparse's layout; a line with wide characters (Japanese) wrapped by the columns a terminal
    gives it (`wrapped`), where textwrap would count each as one column and find no space to break
    at."""

    def _split_lines(self, text: str, width: int) -> list[str]:
        if _narrow(text):
            return super()._split_lines(text, width)
        return wrapped(text, width)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if _narrow(text):
            return super()._fill_text(text, width, indent)
        return "\n".join(indent + line for line in wrapped(text, width - len(indent)))


class RawDescriptionHelpFormatter(argparse.RawDescriptionHelpFormatter, HelpFormatter):
    """The description as it is written (its own lines), the rest as HelpFormatter lays it out."""


class CommandParser(argparse.ArgumentParser):
    """A command's parser in the student's language: its own words are marked where they are
    written, argparse's are looked up while it is made, parses and prints (`argparse_words`), and
    its lines are wrapped by terminal columns (`HelpFormatter`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        with argparse_words():
            super().__init__(*args, **kwargs)

    def parse_known_args(self, *args: Any, **kwargs: Any) -> Any:
        with argparse_words():
            return super().parse_known_args(*args, **kwargs)

    def format_help(self) -> str:
        with argparse_words():
            return super().format_help()

    def error(self, message: str) -> NoReturn:
        with argparse_words():
            super().error(message)


def command_parser(prog: str, doc: str | None) -> argparse.ArgumentParser:
    """A command's parser, its help `doc` (the module's docstring, or a message in the student's
    language) with its lines as written."""
    return CommandParser(prog=prog, description=doc, formatter_class=RawDescriptionHelpFormatter)


def usage() -> str:
    # The students' copy of the kit has no course/instructor/ and no tools/: it lists neither.
    kit = importlib.util.find_spec("course.instructor") is not None
    shown = {
        name: about(name)
        for name, module in COMMANDS.items()
        if kit or not module.startswith("course.instructor")
    }
    column = max(map(len, shown))
    lines = [f"  {name:<{column}}  {said}" for name, said in shown.items()]
    tools = "\n\n" + _(
        "make bench (tools/bench.py) measures the kit; tools/pins.py keeps the pins."
    )
    return (
        USAGE
        + "\n\n"
        + _("The course kit's commands:")
        + "\n"
        + "\n".join(lines)
        + (tools if kit else "")
    )


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return 0 if argv else 2
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        print(
            "course: " + _("unknown command {name}").format(name=repr(name)) + "\n\n" + usage(),
            file=sys.stderr,
        )
        return 2
    own = SUBCOMMANDS.get((name, rest[0] if rest else ""))
    if own:
        name, rest = f"{name} {rest[0]}", rest[1:]
    try:
        module = importlib.import_module(own or COMMANDS[name])
    except ModuleNotFoundError as e:
        if e.name and e.name.startswith(
            "course."
        ):  # the student bundle leaves the instructor's modules out
            print(
                f"course {name}: "
                + _("an instructor's command, not in the students' copy of the kit"),
                file=sys.stderr,
            )
            return 2
        raise
    with argparse_words():  # also for the commands whose parser is argparse's own
        return guarded(name, lambda: module.main(rest))


def guarded(command: str, action) -> int:
    """Run a command, printing a CourseError as its message and fix instead of a traceback."""
    try:
        return action()
    except CourseError as e:
        print(f"course {command}: {e.message}", file=sys.stderr)
        if e.hint:
            print(f"  -> {e.hint}", file=sys.stderr)
        return 2
    except (
        OSError
    ) as e:  # a folder that cannot be written, a full disk: the system's words say which
        print(f"course {command}: {e}", file=sys.stderr)
        print(
            "  -> " + _("check that path: its permissions, and the free space on its disk"),
            file=sys.stderr,
        )
        return 2
    except KeyboardInterrupt:
        return 130

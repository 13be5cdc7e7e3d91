"""The kit's command line: `python -m course COMMAND [...]`; `python -m course COMMAND -h` for each.

One convention: each command is a module with `main(argv) -> int` that builds its own parser.
This table only names them, so that `python -m course -h` answers without importing Chainer.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys

from course.errors import CourseError

COMMANDS = {  # name: (module, what it does)
    "doctor": ("course.diagnostics.doctor", "what works on this machine, and how to fix the rest"),
    "env": (
        "course.gpu",
        "shell lines that make the gpu extra's CUDA libraries findable (eval their output)",
    ),
    "kernels": (
        "course.diagnostics.kernels",
        "compile the course's CUDA kernels for P100 to H100 with NVRTC (no GPU needed)",
    ),
    "data": (
        "course.runtime.data_command",
        "prepare CIFAR-10, the synthetic set, or a variant; list what is prepared",
    ),
    "train": (
        "course.instructor.reference",
        "the kit's reference CIFAR-10 training (one device, or ranks under mpiexec)",
    ),
    "submit": (
        "course.cluster.submit_command",
        "submit a job script: to qsub, or run it here as PBS would (local profile)",
    ),
    "cancel": (
        "course.cluster.localsched",
        "stop a job that runs on this machine (local profile), as qdel does",
    ),
    "launch": (
        "course.cluster.launch",
        "inside a job: start a command as one MPI rank per slot (-- COMMAND)",
    ),
    "site": (
        "course.cluster.sites",
        "site profiles: list, show (what jobs/ has), apply PROFILE; verify: run the course's "
        "jobs on the site and report what to fix",
    ),
    "report": (
        "course.notebook.report",
        "the table of your runs: images/sec, speedup and efficiency vs stage 1",
    ),
    "handin": (
        "course.notebook.handin_command",
        "hand in your assignment with nbgrader's submit; a failure exits 1 and says why",
    ),
    "release": (
        "course.instructor.release",
        "make the student release notebooks/ from solutions/ (nbgrader)",
    ),
    "grade": (
        "course.instructor.grade_command",
        "autograde submissions with nbgrader, feedback and a CSV gradebook",
    ),
    "class-report": (
        "course.instructor.class_report",
        "after grading: one HTML page of the class's scaling, accuracy and failed exercises",
    ),
    "plan": (
        "course.instructor.allocation",
        "before the class: node-hours and GPU-hours of the course's jobs, and the request",
    ),
    "bundle": (
        "course.instructor.bundle",
        "make the folder to hand out to students (no solutions, no grader)",
    ),
    "demo": (
        "course.instructor.demo",
        "the whole course on this machine: release, a student, the jobs, grading",
    ),
    "i18n": (
        "course.instructor.i18n_command",
        "translations: update the catalogs from the English, show what is left, build an edition",
    ),
}
# Subcommands that live in a module of their own (an instructor's, which the students' copy lacks).
SUBCOMMANDS = {("site", "verify"): "course.instructor.site_verify"}


def command_parser(prog: str, doc: str | None) -> argparse.ArgumentParser:
    """A command's parser, its help `doc` (the module's docstring) with its lines as written."""
    return argparse.ArgumentParser(
        prog=prog, description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )


def usage() -> str:
    # The students' copy of the kit has no course/instructor/ and no tools/: it lists neither.
    kit = importlib.util.find_spec("course.instructor") is not None
    shown = {
        name: about
        for name, (module, about) in COMMANDS.items()
        if kit or not module.startswith("course.instructor")
    }
    width = max(map(len, shown))
    lines = [f"  {name:<{width}}  {about}" for name, about in shown.items()]
    tools = "\n\nmake bench (tools/bench.py) measures the kit; tools/pins.py keeps the pins."
    return (
        "usage: python -m course COMMAND [-h] [...]\n\nThe course kit's commands:\n"
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
        print(f"course: unknown command {name!r}\n\n{usage()}", file=sys.stderr)
        return 2
    own = SUBCOMMANDS.get((name, rest[0] if rest else ""))
    if own:
        name, rest = f"{name} {rest[0]}", rest[1:]
    try:
        module = importlib.import_module(own or COMMANDS[name][0])
    except ModuleNotFoundError as e:
        if e.name and e.name.startswith(
            "course."
        ):  # the student bundle leaves the instructor's modules out
            print(
                f"course {name}: an instructor's command, not in the students' copy of the kit",
                file=sys.stderr,
            )
            return 2
        raise
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
            "  -> check that path: its permissions, and the free space on its disk", file=sys.stderr
        )
        return 2
    except KeyboardInterrupt:
        return 130

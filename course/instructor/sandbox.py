"""Where a student's code runs while it is graded: a bubblewrap sandbox (Debian's package
`bubblewrap`).

Inside, the whole file system is read-only; the course folder (source notebooks with their hidden
tests, the gradebook, other students' work), the folder of submissions and the home folders are
hidden behind empty ones, except what the grading needs back, read-only: the student's own
submission, the Python environment and the kit, and a copy of grading.toml. /tmp is private. The
sandbox has its own process ids, so nothing in it can see or signal the grader or another student's
grading; it dies with the grader, and drops every capability (root included).
"""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
from pathlib import Path

import course
from course import paths
from course.errors import GradingError

# Set to "off" to grade without the sandbox (a machine without bubblewrap); every grade is then
# marked.
SWITCH = "COURSE_SANDBOX"


def enabled() -> bool:
    return os.environ.get(SWITCH, "on") != "off"


def bwrap() -> str:
    """The bubblewrap program; GradingError saying how to get it when it is missing."""
    found = shutil.which("bwrap")
    if not found:
        raise GradingError(
            "bubblewrap (bwrap) is not installed, and grading runs students' code inside it",
            f"sudo apt install bubblewrap (or, knowing the risk, {SWITCH}=off python -m course "
            "grade)",
        )
    return found


def _environment_folders() -> list[Path]:
    """The Python environment the grading runs in (its prefixes and library folders) and the kit's
    package, not the kit's checkout around it, which holds the solutions."""
    folders = {
        Path(sys.prefix),
        Path(sys.base_prefix),
        Path(sys.executable).resolve().parent.parent,
        Path(course.__file__).resolve().parent,
    }
    folders |= {Path(path) for name, path in sysconfig.get_paths().items() if name.endswith("lib")}
    return sorted(folder.resolve() for folder in folders)


def command(
    argv: list[str], *, readable: list[Path], hidden: list[Path], workdir: Path, env: dict[str, str]
) -> list[str]:
    """bwrap's command line that runs `argv` in `workdir` with only `readable` (read-only) of
    `hidden`."""
    args = [
        bwrap(),
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--tmpfs",
        "/tmp",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--new-session",
        "--die-with-parent",
        "--cap-drop",
        "ALL",
        "--clearenv",
    ]
    homes = [Path(p) for p in ("/root", "/home") if Path(p).is_dir()] + [paths.KIT_ROOT]
    for folder in sorted(
        {p.resolve() for p in [*hidden, *homes] if p.exists()}, key=lambda p: len(p.parts)
    ):
        args += ["--tmpfs", str(folder)]
    for folder in [*_environment_folders(), *readable]:
        if folder.exists():  # bound again, read-only, over the hidden folders that hold them
            args += ["--ro-bind", str(folder), str(folder)]
    for name, value in {
        **env,
        "HOME": "/tmp/home",
        "MPLCONFIGDIR": "/tmp/matplotlib",
        "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
        "LANG": "C.UTF-8",
    }.items():
        args += ["--setenv", name, value]
    return [*args, "--chdir", str(workdir), *argv]

"""Where a student's code runs while it is graded: a bubblewrap sandbox (Debian's package
`bubblewrap`).

Inside, only what the grading needs is there, read-only: the system's programs and libraries
(/usr, /etc and the like), the Python environment and the kit's package, the student's own
submission, the instructor's data set and a copy of grading.toml. Nothing else of the machine is:
not the course folder (source notebooks with their hidden tests, the gradebook), not the exchange,
not other submissions, not the home folders. /tmp is private, the network is the sandbox's own (no
interface but a loopback of its own: nothing on the machine or beyond can be reached), and the code
runs as the unprivileged user nobody (uid 65534 of a user namespace of its own), without any
capability. The sandbox has its own process ids, so nothing in it can see or signal the grader or
another student's grading; it dies with the grader.
"""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
from pathlib import Path

import course
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


# The system's programs, libraries and settings, as every process needs them (a missing one is
# skipped; a link such as Debian's /bin -> usr/bin is made again as a link).
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/sys")
UNPRIVILEGED = "65534"  # nobody


def _system() -> list[str]:
    args = []
    for name in SYSTEM:
        path = Path(name)
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), name]
        elif path.is_dir():
            args += ["--ro-bind", name, name]
    return args


def command(
    argv: list[str], *, readable: list[Path], workdir: Path, env: dict[str, str]
) -> list[str]:
    """bwrap's command line that runs `argv` in `workdir`, with the system, the Python environment
    and `readable` (read-only) and nothing else of the machine."""
    args = [
        bwrap(),
        *_system(),
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--tmpfs",
        "/tmp",
        "--unshare-user",
        "--uid",
        UNPRIVILEGED,
        "--gid",
        UNPRIVILEGED,
        "--unshare-pid",
        "--unshare-net",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--new-session",
        "--die-with-parent",
        "--cap-drop",
        "ALL",
        "--clearenv",
    ]
    for folder in [*_environment_folders(), *readable]:
        if folder.exists():
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

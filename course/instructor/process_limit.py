"""How many processes one submission's grading may run at once: a cgroup of the pids controller
per submission (setrlimit's RLIMIT_NPROC counts a user's processes machine-wide, and does not bind
root, so it cannot keep one submission's fork bomb from another's grading).

The verifier (course.instructor.verify) makes the group, starts the sandbox in it, and removes it
with everything left in it when the submission is done; the worker inside reads the group's
`pids.events` around each test (its path in EVENTS) to tell the test that met the limit. Either
cgroup version: v1's pids hierarchy, or v2 where the grader's own group delegates the pids
controller. Where neither can be written (not root, no delegation), grading goes on without the
limit, and `course grade` says so once.
"""

from __future__ import annotations

import itertools
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

MAX_PROCESSES = 256  # a test's MPI probe needs a few dozen; a submission never needs more
EVENTS = "COURSE_VERIFY_PIDS_EVENTS"
_names = itertools.count()


def _own_group() -> Path:
    """The folder of this process's pids cgroup; OSError when there is none to write."""
    mounts = Path("/proc/self/mountinfo").read_text().splitlines()
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        v1 = "pids" in controllers.split(",")
        if not v1 and controllers:
            continue
        for mount in mounts:
            fields, _, rest = mount.partition(" - ")
            fstype, _, options = rest.split()[:3]
            if v1:
                wanted = fstype == "cgroup" and "pids" in options.split(",")
            else:
                wanted = fstype == "cgroup2"
            root, mount_point = fields.split()[3:5]  # a container may mount a subtree only
            if wanted and (path + "/").startswith(root.rstrip("/") + "/"):
                group = Path(mount_point) / os.path.relpath(path, root)
                if v1 or "pids" in (group / "cgroup.subtree_control").read_text().split():
                    return group
    raise OSError("no pids cgroup controller is delegated to this process")


@dataclass
class ProcessLimit:
    """One submission's group."""

    folder: Path

    @property
    def events(self) -> Path:
        return self.folder / "pids.events"

    def command(self, argv: list[str]) -> list[str]:
        """`argv`, started inside the group (a shell joins it, then becomes `argv`)."""
        join = 'echo $$ > "$0" && exec "$@"'
        return ["/bin/sh", "-c", join, str(self.folder / "cgroup.procs"), *argv]

    def close(self) -> None:
        """End every process left in the group, then remove it."""
        deadline = time.monotonic() + 30
        kill = self.folder / "cgroup.kill"  # v2, Linux 5.14 and later
        while time.monotonic() < deadline:
            pids = [int(p) for p in (self.folder / "cgroup.procs").read_text().split()]
            if not pids:
                break
            if kill.exists():
                kill.write_text("1")
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.05)
        try:
            self.folder.rmdir()
        except OSError:  # a process still ending: the kernel frees the group with it
            pass


def start(limit: int = MAX_PROCESSES) -> tuple[ProcessLimit | None, str]:
    """(a new group that runs at most `limit` processes, "") or (None, why there is none)."""
    try:
        folder = _own_group() / f"course-verify-{os.getpid()}-{next(_names)}"
        folder.mkdir()
    except (OSError, ValueError, IndexError) as e:
        return None, str(e)
    try:
        (folder / "pids.max").write_text(str(limit))
    except OSError as e:
        folder.rmdir()
        return None, str(e)
    return ProcessLimit(folder), ""


def refused(events: Path) -> int:
    """How many process starts the group has refused so far (its pids.events "max" count)."""
    for line in events.read_text().splitlines():
        name, _, count = line.partition(" ")
        if name == "max":
            return int(count)
    return 0


def limit_of(events: Path) -> int:
    return int((events.parent / "pids.max").read_text())


def unavailable() -> str:
    """Why no submission's processes can be limited here, or "" when they can."""
    group, why = start()
    if group is not None:
        group.close()
    return why

"""How many processes, and how much memory, one submission's grading may use: a cgroup per
submission, of the pids and the memory controllers (setrlimit's RLIMIT_NPROC counts a user's
processes machine-wide and does not bind root, and RLIMIT_AS binds one process: two forked
processes of one test would hold twice the limit).

The verifier (course.instructor.verify) makes the group, starts the sandbox in it, and removes it
with everything left in it when the submission is done; the worker inside reads the group's
`pids.events` and its count of processes the kernel ended for memory (`oom_kill`) around each test
(their paths in EVENTS and MEMORY_EVENTS) to tell the test that met a limit. A submission's tests
run one after another, so the memory limit holds for each test's processes together (with the
worker's own, a few hundred MB). Either cgroup version: v1's pids and memory hierarchies, or v2
where the grader's own group delegates the controllers. Where one cannot be written (not root, no
delegation), grading goes on without that limit, and `course grade` says so once.
"""

from __future__ import annotations

import itertools
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

MAX_PROCESSES = 256  # a test's MPI probe needs a few dozen; a submission never needs more
MAX_MEMORY = 8 * 2**30  # bytes: a test's stage-3 probe holds about 1 GiB over its ranks
EVENTS = "COURSE_VERIFY_PIDS_EVENTS"
MEMORY_EVENTS = "COURSE_VERIFY_MEMORY_EVENTS"
_names = itertools.count()


def _own_group(controller: str) -> Path:
    """The folder of this process's cgroup of `controller` (pids, memory); OSError when there is
    none to write."""
    mounts = Path("/proc/self/mountinfo").read_text().splitlines()
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        v1 = controller in controllers.split(",")
        if not v1 and controllers:
            continue
        for mount in mounts:
            fields, _, rest = mount.partition(" - ")
            fstype, _, options = rest.split()[:3]
            if v1:
                wanted = fstype == "cgroup" and controller in options.split(",")
            else:
                wanted = fstype == "cgroup2"
            root, mount_point = fields.split()[3:5]  # a container may mount a subtree only
            if wanted and (path + "/").startswith(root.rstrip("/") + "/"):
                group = Path(mount_point) / os.path.relpath(path, root)
                if v1 or controller in (group / "cgroup.subtree_control").read_text().split():
                    return group
    raise OSError(f"no {controller} cgroup controller is delegated to this process")


@dataclass
class ProcessLimit:
    """One submission's groups: {controller: its folder} (v2: the same folder for both)."""

    folders: dict[str, Path]

    @property
    def events(self) -> Path | None:
        return self.folders["pids"] / "pids.events" if "pids" in self.folders else None

    @property
    def memory_events(self) -> Path | None:
        """The file whose `oom_kill` line counts the processes ended for memory (v2's
        memory.events, v1's memory.oom_control)."""
        if "memory" not in self.folders:
            return None
        folder = self.folders["memory"]
        v2 = (folder / "memory.events").exists()
        return folder / ("memory.events" if v2 else "memory.oom_control")

    def environment(self) -> dict[str, str]:
        """What the worker reads the limits met from."""
        found = {EVENTS: self.events, MEMORY_EVENTS: self.memory_events}
        return {name: str(path) for name, path in found.items() if path is not None}

    def command(self, argv: list[str]) -> list[str]:
        """`argv`, started inside the groups (a shell joins them, then becomes `argv`)."""
        join = 'n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ > "$1"; shift; n=$((n-1)); done; '
        join += 'exec "$@"'
        procs = [str(folder / "cgroup.procs") for folder in dict.fromkeys(self.folders.values())]
        return ["/bin/sh", "-c", join, "sh", str(len(procs)), *procs, *argv]

    def close(self) -> None:
        """End every process left in the groups, then remove them."""
        for folder in dict.fromkeys(self.folders.values()):
            _empty(folder)


def _empty(folder: Path) -> None:
    deadline = time.monotonic() + 30
    kill = folder / "cgroup.kill"  # v2, Linux 5.14 and later
    while time.monotonic() < deadline:
        pids = [int(p) for p in (folder / "cgroup.procs").read_text().split()]
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
        folder.rmdir()
    except OSError:  # a process still ending: the kernel frees the group with it
        pass


def _group(controller: str, name: str, limits: dict[str, int]) -> Path:
    """A new group `name` of `controller` with `limits` ({file: value}, the first file the
    controller has is written); OSError when it cannot be made."""
    parent = _own_group(controller)
    folder = parent / name
    made = not folder.exists()  # v2: the pids controller's group is the same folder
    folder.mkdir(exist_ok=True)
    try:
        for file, value in limits.items():
            if (folder / file).exists():
                (folder / file).write_text(str(value))
    except OSError:
        if made:
            folder.rmdir()
        raise
    return folder


def start(limit: int = MAX_PROCESSES, memory: int = MAX_MEMORY) -> tuple[ProcessLimit | None, str]:
    """(new groups that run at most `limit` processes and hold at most `memory` bytes, "") or
    (None, why there are none); where only one controller can be used, its group alone and why
    the other cannot."""
    name = f"course-verify-{os.getpid()}-{next(_names)}"
    folders, why = {}, []
    wanted = {
        "pids": {"pids.max": limit},
        # v2 and v1; no swap either (v1's memsw only where swap is accounted)
        "memory": {
            "memory.max": memory,
            "memory.swap.max": 0,
            "memory.limit_in_bytes": memory,
            "memory.memsw.limit_in_bytes": memory,
        },
    }
    for controller, limits in wanted.items():
        try:
            folders[controller] = _group(controller, name, limits)
        except (OSError, ValueError, IndexError) as e:
            why.append(str(e))
    return (ProcessLimit(folders) if folders else None), "; ".join(why)


def refused(events: Path) -> int:
    """How many process starts the group has refused so far (its pids.events "max" count)."""
    return _count(events, "max")


def ended_for_memory(events: Path) -> int:
    """How many processes the kernel has ended in the group for its memory limit so far."""
    return _count(events, "oom_kill")


def _count(events: Path, name: str) -> int:
    for line in events.read_text().splitlines():
        key, _, count = line.partition(" ")
        if key == name:
            return int(count)
    return 0


def limit_of(events: Path) -> int:
    return int((events.parent / "pids.max").read_text())


def memory_limit_of(events: Path) -> int:
    """The bytes the memory group of `events` may hold (v2's memory.max, v1's limit_in_bytes)."""
    v2 = events.parent / "memory.max"
    return int((v2 if v2.exists() else events.parent / "memory.limit_in_bytes").read_text())


def unavailable() -> str:
    """Why a submission's processes or memory cannot be limited here, or "" when they can."""
    group, why = start()
    if group is not None:
        group.close()
    return why

"""A job's processes as one unit: ending all of them, and children that die with their parent.

A job runs in a session of its own (the local scheduler starts its shell with setsid), as PBS
runs it; Open MPI's prterun puts each rank in a process group of its own, so the session, not
the process group, is what holds every process of the job. Linux tells which processes are in a
session (/proc) and lets a child ask for a signal when its parent dies (prctl); elsewhere the job's
process group is all there is to signal, and children outlive a parent killed with SIGKILL.
"""

from __future__ import annotations

import ctypes
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

STOP_SIGNALS = (
    signal.SIGTERM,
    signal.SIGINT,
    signal.SIGHUP,
)  # what schedulers and terminals send to stop
_PROC = Path("/proc")
_PR_SET_PDEATHSIG = 1


def exit_code(returncode: int) -> int:
    """A child's exit status as a shell shows it: 128 + N for a child killed by signal N."""
    return 128 - returncode if returncode < 0 else returncode


def die_with_parent(sig: int = signal.SIGTERM) -> Callable[[], None] | None:
    """A preexec_fn that has the child get `sig` when the process that starts it dies (Linux only).

    Without it a launcher killed with SIGKILL leaves its children running, unowned.
    """
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # not Linux
        return None
    parent = os.getpid()

    def in_child() -> None:
        prctl(_PR_SET_PDEATHSIG, int(sig))
        if os.getppid() != parent:  # the parent died before prctl: nothing would signal us
            os.kill(os.getpid(), sig)

    return in_child


def _stat(pid: int) -> list[str] | None:
    """/proc/PID/stat's fields after the command name: state, ppid, pgrp, session, ..."""
    try:
        text = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2 :].split()


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie, dead but not yet reaped, does not)."""
    if _PROC.is_dir():
        fields = _stat(pid)
        return fields is not None and fields[0] not in ("Z", "X")
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def session_members(session: int) -> list[int]:
    """The live processes of a session (Linux); elsewhere its leader, if it lives."""
    if not _PROC.is_dir():
        return [session] if alive(session) else []
    members = []
    for entry in _PROC.iterdir():
        if entry.name.isdigit():
            fields = _stat(int(entry.name))
            if fields and fields[0] not in ("Z", "X") and int(fields[3]) == session:
                members.append(int(entry.name))
    return members


def _signal_session(session: int, sig: int) -> None:
    try:
        os.killpg(session, sig)  # the leader's group: all there is to find where /proc is missing
    except (ProcessLookupError, PermissionError):
        pass
    for pid in session_members(session):
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def end_session(session: int, grace: float = 10.0, reap: Callable[[], object] | None = None) -> int:
    """Stop every process of `session`: SIGTERM, `grace` seconds to exit, then SIGKILL.

    `reap` (e.g. the leader's Popen.poll) is called while waiting, so that a child of the caller
    does not linger as a zombie. Returns how many processes were running when it began.
    """
    running = len(session_members(session))
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        if not session_members(session):
            break
        _signal_session(session, sig)
        deadline = time.monotonic() + wait
        while session_members(session) and time.monotonic() < deadline:
            if reap:
                reap()
            time.sleep(0.05)
    if reap:
        reap()
    return running

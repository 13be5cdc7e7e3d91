"""The local scheduler's supervisor: the process that runs one job (``python -m
course.cluster.supervisor SPEC``, started by course.cluster.localsched.start).

The job ends as one unit, as PBS ends it: its shell runs in a session of its own, and every process
of that session is stopped (SIGTERM, GRACE seconds, SIGKILL) at the walltime, when the supervisor is
sent SIGTERM, SIGINT or SIGHUP (`python -m course cancel JOBID`), and when the job shell exits and
leaves processes behind; a forked watchdog does it if the supervisor itself dies. Either records how
and when the job ended in its status file.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import IO

from course.cluster import pbs, procs
from course.cluster.localsched import GRACE, LOST_EXIT, WALLTIME_EXIT, read_record, utc_now
from course.contracts import jobend
from course.fileio import atomic_file
from course.i18n import _


class _Stopped(Exception):
    """The supervisor was sent a stop signal: the job is being cancelled."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signal = signal.Signals(signum)


def _ignore_stops() -> None:
    """Once the job is being stopped, a second signal must not cut the stopping short."""
    for sig in procs.STOP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)


def _stop(signum: int, frame) -> None:
    _ignore_stops()
    raise _Stopped(signum)


def _write_record(spec: dict, record: dict) -> None:
    with atomic_file(Path(spec["status"]), "w") as f:
        json.dump({"id": spec["id"], **record}, f)


def _record_end(spec: dict, started: datetime, status: int, says: str) -> None:
    ended = utc_now()
    _write_record(
        spec,
        {
            "state": "ended",
            "exit_status": status,
            "says": says,
            "started_at": started.isoformat(timespec="seconds"),
            "ended_at": ended.isoformat(timespec="seconds"),
            "seconds": round((ended - started).total_seconds(), 3),
        },
    )


def _start_watchdog(spec: dict, started: datetime) -> tuple[int, int]:
    """Fork the process that stops the job should this one die without recording its end (SIGKILL,
    a crash): it waits for the end of a pipe only this process holds, which the kernel closes
    however this process ends. Returns its pid and the pipe's end to keep open."""
    read_end, write_end = os.pipe()  # not inherited by the job (close-on-exec)
    pid = os.fork()
    if pid:
        os.close(read_end)
        return pid, write_end
    try:
        os.close(write_end)
        # out of the supervisor's process group: a signal to that group leaves the watchdog
        os.setsid()
        _ignore_stops()  # stopping the job is the supervisor's task while it lives
        while os.read(read_end, 1):
            pass
        record = read_record(Path(spec["status"]))
        if record.get("state") != "ended":
            if record.get("session"):
                procs.end_session(record["session"], GRACE)
            with open(spec["log"], "a") as log:
                log.write(jobend.lost_notice(spec["id"], utc_now()) + "\n")
            _record_end(spec, started, LOST_EXIT, "was lost: its scheduler process died")
    finally:
        os._exit(0)


def _run(process: subprocess.Popen, spec: dict, log: IO[str]) -> tuple[int, str]:
    """Wait for the job shell within the walltime; stop every process of the job; (status, what
    happened)."""
    try:
        status = procs.exit_code(process.wait(timeout=spec["walltime"]))
    except subprocess.TimeoutExpired:
        _ignore_stops()
        procs.end_session(process.pid, GRACE, process.poll)
        log.write(jobend.walltime_notice(pbs.format_walltime(spec["walltime"])) + "\n")
        return WALLTIME_EXIT, "was killed at its walltime"
    except _Stopped as stop:
        procs.end_session(process.pid, GRACE, process.poll)
        log.write(jobend.cancel_notice(spec["id"], stop.signal.name[3:], utc_now()) + "\n")
        return 128 + stop.signal, "was cancelled"
    _ignore_stops()
    left = procs.end_session(
        process.pid, GRACE, process.poll
    )  # as PBS, end what the job left running
    if left:
        log.write(jobend.leftovers_notice(left) + "\n")
    killed = signal.Signals(status - 128).name if status > 128 and process.returncode < 0 else None
    return status, f"was killed by {killed}" if killed else f"ended with exit status {status}"


def supervise(spec_file: Path) -> int:
    """Run one job as its spec says and record how and when it ended (the supervisor process's
    body)."""
    spec = json.loads(Path(spec_file).read_text())
    started = utc_now()
    watchdog, _lifeline = _start_watchdog(spec, started)
    for sig in procs.STOP_SIGNALS:
        signal.signal(sig, _stop)
    status, says = LOST_EXIT, "could not start"  # a waiting student must never wait forever
    process = None
    try:
        with open(spec["log"], "a", buffering=1) as log:
            for warning in spec["warnings"]:
                # TRANSLATORS: {warning} is what the scheduler found slow in the job's request
                log.write(_("course local scheduler: {warning}").format(warning=warning) + "\n")
            home = spec["env"].get("HOME") or os.path.expanduser("~")
            # in a session of its own: the session is the job, whatever process groups MPI makes
            try:
                process = subprocess.Popen(
                    ["bash", spec["script"]],
                    cwd=home,
                    env=spec["env"],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                    preexec_fn=procs.die_with_parent(),
                )
            except OSError as e:
                log.write(
                    _("course local scheduler: the job could not start: {error}").format(error=e)
                    + "\n"
                )
                return status
            _write_record(
                spec,
                {
                    "state": "running",
                    "supervisor": os.getpid(),
                    "watchdog": watchdog,
                    "session": process.pid,
                    "started_at": started.isoformat(timespec="seconds"),
                },
            )
            status, says = _run(process, spec, log)
    except _Stopped as stop:  # stopped before the job shell started
        status, says = 128 + stop.signal, "was cancelled"
    finally:
        _ignore_stops()
        if process is not None:
            procs.end_session(
                process.pid, GRACE, process.poll
            )  # after a crash too: nothing outlives the job
        _record_end(spec, started, status, says)
    return status


if __name__ == "__main__":
    sys.exit(supervise(Path(sys.argv[1])))

"""How a job ended, in its log: the job shell's end line (jobs/site_env.sh's traps), the schedulers'
kill notices, and the part of a log written before the end (course.contracts.joblog has the lines
a run writes; this module, the lines that close a job).

| line | written by | read by |
|---|---|---|
| `course: job ID ended with exit status N at TIME` | jobs/site_env.sh's EXIT trap | submit (how),
evidence (when) |
| `course: job ID was killed by SIGNAME at TIME` | jobs/site_env.sh's signal traps | the same |
| `course: job ID attempt N started at TIME` | jobs/site_env.sh, when Slurm reruns the job | the
follower (rerunning), evidence (which attempt wrote a run) |
| a walltime kill notice | the local scheduler; PBS and Slurm their own | the submitter, the
diagnosis |
| Slurm's requeue and node-failure notices | slurmstepd | the follower, the diagnosis |
| `course local scheduler: job ID was cancelled / was lost ...` | the local scheduler | the
submitter, the diagnosis |
| `course: watchdog: rank R of N made no training step for M minutes ...` | the training's watchdog
(course.runtime.watchdog), before it ends the job | the diagnosis |

Each line's format and its parser stand side by side; tests/test_joblog_end.py round-trips them.
"""

from __future__ import annotations

import re
import signal
from dataclasses import dataclass
from datetime import UTC, datetime

# --- how the job ended --------------------------------------------------------------------------
#
# The job shell's last line says how it ended and when (UTC); a scheduler's kill notice, where
# there is one, says more and wins. A reader that traces a run to its job takes only what the
# log shows up to the end (`until_end`): processes that outlive a job can still write into it.

# The status the kit gives a job killed at its walltime: 256 + SIGTERM, as older PBS Pro reported it
# (OpenPBS 23's qstat -x says Exit_status = -29; the kit reads the log's kill notice, not qstat).
WALLTIME_EXIT = 271
LOST_EXIT = 1  # the local scheduler's process died before the job ended, or the job could not start
_TIME = "%Y-%m-%dT%H:%M:%SZ"

# Bash, in jobs/site_env.sh. EXIT alone would report the status of the shell's last command (often
# 0) for a shell stopped by a signal, so each trapped signal writes its own line, is passed on to
# the shell's background children, and is raised again so that the scheduler sees it too.
# A terminal that sources the file keeps its own signal handling.
# The end line starts a line of its own: a launcher may leave the log's last line unfinished
# (prterun ends an MPI_Abort report with a NUL byte and no newline).
END_TRAP = r"""_course_end() {
    local log="/proc/$$/fd/1"
    if [ -f "$log" ] && [ -s "$log" ] && [ "$(tail -c 1 "$log" | wc -l)" -eq 0 ]; then echo; fi
    echo "course: job ${PBS_JOBID:-${SLURM_JOB_ID:-?}} $1 at $(date -u +%Y-%m-%dT%H:%M:%SZ)"
}
_course_stopped() {
    trap - EXIT; trap '' "$1"
    local children; children=$(jobs -p)
    [ -z "$children" ] || kill -s "$1" $children 2>/dev/null || true
    _course_end "was killed by SIG$1"
    trap - "$1"; kill -s "$1" $$
}
trap '_course_end "ended with exit status $?"' EXIT
if [[ $- != *i* ]]; then
    trap '_course_stopped TERM' TERM; trap '_course_stopped INT' INT; trap '_course_stopped HUP' HUP
fi"""
_TIMESTAMP = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"
_AT = rf"(?: at (?P<at>{_TIMESTAMP}))?"  # the kit's own notices carry it; the schedulers' do not
# Open MPI 5's launcher ends its MPI_ABORT notice with a NUL byte, which lands at the start of the
# next line, the end line: after a rank's exception (ChainerMN's abort hook) or the watchdog.
_END = re.compile(
    r"^\x00*course: job \S+ (?:ended with exit status (?P<status>\d+)|was killed by "
    rf"SIG(?P<signal>[A-Z]+)) at (?P<at>{_TIMESTAMP})$",
    re.MULTILINE,
)


def _stamp(at: datetime | None) -> str:
    return f" at {at.astimezone(UTC).strftime(_TIME)}" if at else ""


def end_line(job_id: str, status: int, at: datetime) -> str:
    """What END_TRAP prints when the job shell exits."""
    return f"course: job {job_id} ended with exit status {status}{_stamp(at)}"


def killed_line(job_id: str, signal_name: str, at: datetime) -> str:
    """What END_TRAP prints when a signal stops the job shell; `signal_name` as TERM."""
    return f"course: job {job_id} was killed by SIG{signal_name}{_stamp(at)}"


def walltime_notice(limit: str) -> str:
    """What the local scheduler writes when it kills a job at its walltime (PBS Pro's words)."""
    return f"=>> PBS: job killed: walltime {limit} exceeded limit {limit}"


def cancel_notice(job_id: str, signal_name: str, at: datetime | None = None) -> str:
    """What the local scheduler writes when it stops a job because it was sent a signal (course
    cancel)."""
    return (
        f"course local scheduler: job {job_id} was cancelled (SIG{signal_name} to its scheduler)"
        f"{_stamp(at)}"
    )


def lost_notice(job_id: str, at: datetime | None = None) -> str:
    """What the local scheduler's watchdog writes when the scheduler's process died before the
    job."""
    return (
        f"course local scheduler: job {job_id} was lost: its scheduler process died, so it was "
        "stopped"
        f"{_stamp(at)}"
    )


def leftovers_notice(count: int) -> str:
    """What the local scheduler writes when a job's shell ended and left processes running."""
    return (
        f"course local scheduler: {count} process(es) of the job still ran after its end; "
        "they were stopped"
    )


_WALLTIME = re.compile(r"job killed: walltime|DUE TO TIME LIMIT")
_NOTICES = re.compile(
    r"^(?:=>> PBS: job killed: (?P<pbs>.*)"
    # slurmstepd names its node (slurmstepd-n1:) in Slurm 22.05; a requeue or a node failure says so
    r"|slurmstepd(?:-\S+)?: error: \*\*\* JOB \S+ ON \S+ (?P<slurm>CANCELLED)\b"
    r"(?:.*? DUE TO (?P<rerun>JOB REQUEUE|NODE FAILURE))?.*"
    r"|course local scheduler: job \S+ (?:(?P<cancelled>was cancelled) "
    r"\(SIG(?P<signal>[A-Z]+)[^)]*\)"
    r"|(?P<lost>was lost)\b.*?)" + _AT + ")$",
    re.MULTILINE,
)


def killed_by_scheduler(text: str) -> bool:
    """Whether a scheduler (PBS, Slurm or the local one) says it killed the job's last attempt."""
    return _NOTICES.search(last_attempt(text)) is not None


def walltime_exceeded(text: str) -> bool:
    return _WALLTIME.search(last_attempt(text)) is not None


@dataclass(frozen=True)
class End:
    """How a job ended, as its log tells."""

    status: int  # as a shell shows it: N, or 128 + the signal's number; WALLTIME_EXIT, LOST_EXIT
    # exit, signal (the job shell's line); walltime, cancelled, lost, killed, requeued, node_failed
    # (a scheduler's notice)
    kind: str
    # e.g. "ended with exit status 3", "was killed by SIGTERM", "was killed at its walltime"
    says: str
    at: datetime | None  # when (UTC), where the log gives the time


def _signal_status(name: str) -> int:
    return 128 + int(getattr(signal, f"SIG{name}", signal.SIGTERM))


def _shell_end(text: str, at: datetime | None) -> End | None:
    """What the job shell's last end line says."""
    found = list(_END.finditer(text))
    if not found:
        return None
    line = found[-1]
    if line["signal"]:
        return End(
            _signal_status(line["signal"]), "signal", f"was killed by SIG{line['signal']}", at
        )
    return End(int(line["status"]), "exit", f"ended with exit status {line['status']}", at)


def end(text: str) -> End | None:
    """How the job's last attempt ended: a scheduler's kill notice wins over the job shell's last
    end line; None when the log shows no end yet (the job runs, or it was killed without a word)."""
    text = last_attempt(text)
    at = ended_at(text)
    shell = _shell_end(text, at)
    notice = _NOTICES.search(text)
    if walltime_exceeded(text):
        return End(WALLTIME_EXIT, "walltime", "was killed at its walltime", at)
    if notice is None:
        return shell
    if notice["rerun"] == "JOB REQUEUE":
        return End(_signal_status("TERM"), "requeued", "was requeued by the scheduler", at)
    if notice["rerun"] == "NODE FAILURE":
        return End(_signal_status("TERM"), "node_failed", "was stopped: a node of it failed", at)
    if notice["lost"]:
        return End(LOST_EXIT, "lost", "was lost: its scheduler process died", at)
    if notice["cancelled"] or notice["slurm"]:
        return End(_signal_status(notice["signal"] or "TERM"), "cancelled", "was cancelled", at)
    status = shell.status if shell and shell.status else _signal_status("KILL")
    return End(status, "killed", f"was killed by PBS: {notice['pbs']}", at)


def exit_status(text: str) -> int | None:
    """The exit status the log states (see `end`), else None; never 0 for a killed job."""
    found = end(text)
    return found.status if found else None


def ended_at(text: str) -> datetime | None:
    """When the job's last attempt ended (UTC): the time on its last end line or local-scheduler
    notice; None in logs without one (a job still running, a shell killed with SIGKILL)."""
    text = last_attempt(text)
    times = [m["at"] for pattern in (_END, _NOTICES) for m in pattern.finditer(text) if m["at"]]
    return datetime.strptime(max(times), _TIME).replace(tzinfo=UTC) if times else None


def until_end(text: str) -> str:
    """An attempt's part of the log (`attempt`) as it was when it ended: through its last end line
    or scheduler notice. What follows was written by processes that outlived it, and proves
    nothing."""
    ends = [m.end() for pattern in (_END, _NOTICES) for m in pattern.finditer(text)]
    return text[: max(ends) + 1] if ends else text


# --- a training that hung, ended by the watchdog (course.runtime.watchdog) ----------------------
#
# One line, written by the process that noticed (rank 0, or rank 1 when rank 0 is the one that
# stopped) just before it ends the job: the cause, where the end line only says how.

HANG_HOW = {
    "stopped": "its process stopped running (stopped by a signal, or its node hangs)",
    "stuck": "it hung in {where}; the other ranks wait for it",
    "alone": "it hung in {where}",
    "waiting": "every rank waits for the others in ChainerMN (a deadlock)",
}


@dataclass(frozen=True)
class Hang:
    """No training step for `minutes`: which rank hung and how."""

    ranks: int  # how many processes train: 1 for stages 1 and 2
    rank: int | None  # the rank that hung; None with one process, or when every rank waits
    minutes: float
    iteration: int  # the training's iteration at its last step
    how: str  # HANG_HOW's: stopped, stuck (one rank of several), alone (one process), waiting
    where: str = ""  # where its main thread is, for stuck and alone

    def format(self) -> str:
        who = (
            "the training"
            if self.ranks == 1
            else f"rank {self.rank} of {self.ranks}"
            if self.rank is not None
            else f"no rank of {self.ranks}"
        )
        step = "step" if self.ranks == 1 else "training step"
        unit = "minute" if self.minutes == 1 else "minutes"
        return (
            f"course: watchdog: {who} made {'a' if self.rank is None and self.ranks > 1 else 'no'} "
            f"{step} for {self.minutes:g} {unit} (last step at iteration {self.iteration}): "
            f"{HANG_HOW[self.how].format(where=self.where)}; the job was ended"
        )


_HOW = "|".join(
    f"(?P<{how}>{re.escape(text).replace(re.escape('{where}'), f'(?P<where_{how}>.+?)')})"
    for how, text in HANG_HOW.items()
)
_HANG = re.compile(
    r"^course: watchdog: (?:the training|rank (?P<rank>\d+) of (?P<ranks>\d+)|no rank of "
    r"(?P<all>\d+)) made (?:no|a) (?:training )?step for (?P<minutes>[\d.]+) minutes? "
    rf"\(last step at iteration (?P<iteration>\d+)\): (?:{_HOW}); the job was ended$",
    re.MULTILINE,
)


# --- attempts: a job the scheduler reran ---------------------------------------------------------
#
# Slurm reruns a job that `scontrol requeue` or a failing node stopped (JobRequeue=1, its default),
# under the same job id and into the same log: the kit's Slurm jobs append to it (#SBATCH
# --open-mode=append, course.cluster.sites) instead of truncating it, and each rerun's job shell
# first writes which attempt it is. The job ended as its last attempt did; a run is traced to the
# attempt that wrote it (its results file's job.attempt, 1 when absent).

# Bash, at the top of jobs/site_env.sh: Slurm counts the reruns in SLURM_RESTART_COUNT.
ATTEMPT_SHELL = r"""if [ "${SLURM_RESTART_COUNT:-0}" -gt 0 ] 2>/dev/null; then
    echo "course: job $SLURM_JOB_ID attempt $((SLURM_RESTART_COUNT + 1)) started at" \
        "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
fi"""
_ATTEMPT = re.compile(
    rf"^course: job (?P<job>\S+) attempt (?P<attempt>\d+) started at (?P<at>{_TIMESTAMP})$",
    re.MULTILINE,
)


def hangs(text: str) -> list[Hang]:
    """Every watchdog line of a log, in order."""
    found = []
    for m in _HANG.finditer(text):
        how = next(how for how in HANG_HOW if m[how])
        found.append(
            Hang(
                ranks=int(m["ranks"] or m["all"] or 1),
                rank=int(m["rank"]) if m["rank"] else None,
                minutes=float(m["minutes"]),
                iteration=int(m["iteration"]),
                how=how,
                where=m.groupdict().get(f"where_{how}") or "",
            )
        )
    return found


def attempt_line(job_id: str, attempt: int, at: datetime) -> str:
    """What ATTEMPT_SHELL prints when the scheduler reruns the job."""
    return f"course: job {job_id} attempt {attempt} started{_stamp(at)}"


def attempts(text: str) -> list[tuple[int, str]]:
    """(number, part of the log) of each attempt of the job, in order: [(1, text)] unless the
    scheduler reran it; a rerun's part begins at its attempt line."""
    found = list(_ATTEMPT.finditer(text))
    starts = [0, *(m.start() for m in found)]
    numbers = [1, *(int(m["attempt"]) for m in found)]
    parts = [
        (number, text[start:stop])
        for number, start, stop in zip(numbers, starts, [*starts[1:], len(text)])
    ]
    return parts[1:] if found and not parts[0][1].strip() else parts


def attempt(text: str, number: int) -> str | None:
    """Attempt `number`'s part of the log; None when the log does not show it."""
    return next((part for n, part in reversed(attempts(text)) if n == number), None)


def last_attempt(text: str) -> str:
    """The part of the log of the attempt that counts: the last one."""
    return attempts(text)[-1][1]

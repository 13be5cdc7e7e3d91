"""Following a submitted job: waiting on it while its log grows, how it ended, how to cancel it.

A job runs under the embedded local scheduler (course.cluster.localsched) or under the site's
qsub; either way its joined log <name>.o<number> in the submit folder says how it ended
(course.contracts.joblog), and course.cluster.diagnosis reads from it why a failed job failed.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from course import paths
from course.cluster import accounting, localsched, pending
from course.cluster.diagnosis import explain, how_ended
from course.contracts import jobend, joblog
from course.i18n import _

# PBS copies a job's log into the submit folder after the job ends: a job the scheduler no longer
# knows and that has no log this long after was cancelled (or refused) before it started.
NO_LOG_GRACE = 30.0  # seconds


@dataclass
class Job:
    """A submitted job: its id, the folder it was submitted from, and how to follow it."""

    id: str
    workdir: Path
    scheduler: str  # local or qsub
    log: Path | None = None
    _local: localsched.LocalJob | None = field(default=None, repr=False)

    @property
    def number(self) -> str:
        return joblog.job_number(self.id)

    def find_log(self) -> Path | None:
        """The joined stdout/stderr file, <name>.o<number> in the submit folder."""
        if self.log is not None and self.log.exists():
            return self.log
        self.log = joblog.find(self.workdir, self.id)
        return self.log

    def log_text(self) -> str:
        """The log's text as the kit reads it (joblog.read); "" before it exists."""
        log = self.find_log()
        return joblog.read(log) if log is not None else ""

    def exit_status(self) -> int | None:
        """How the job ended, as an exit status (never 0 for a killed job; see
        course.contracts.jobend.end): the local scheduler's record, else the log's end line or its
        scheduler's kill notice; None while it runs."""
        if self._local is not None:
            return self._local.exit_status()
        return jobend.exit_status(self.log_text())

    def ending(self) -> jobend.End | None:
        """How the log says the job's last attempt ended, e.g. it 'was killed at its walltime';
        None while it runs."""
        return jobend.end(self.log_text())

    def rerun_attempt(self, text: str) -> int | None:
        """The attempt Slurm runs now or next, when it reruns the job after the attempt the log
        shows ended (scontrol's Restarts=); None when it does not, or cannot say (then the
        diagnosis of the requeue notice says that Slurm reruns the job)."""
        held = accounting.restarts(self.number) if self.scheduler != "local" else None
        if held is None:
            return None
        state, restarts = held
        shown = jobend.attempts(text)[-1][0]
        return restarts + 1 if restarts + 1 > shown and state in accounting.RERUNNING else None

    def wait(
        self,
        timeout: float | None = None,
        echo: Callable[[str], None] | None = print,
        poll: float = 5.0,
    ) -> int | None:
        """Wait for the job to end; print its log as it grows; return its exit status.

        Interrupted (Ctrl-C, or the notebook's stop button), it says how to follow or cancel the
        job, which goes on running, and raises KeyboardInterrupt."""
        if echo is not None:
            show_line = echo

            def echo(line: str) -> None:
                show_line(joblog.clean(line))

        try:
            if self._local is not None:
                status = self._local.wait(timeout, echo, poll=min(poll, 0.5))
            else:
                status = self._wait_qsub(timeout, echo, poll)
        except KeyboardInterrupt:
            self._interrupted(echo or print)
            raise
        if echo and status is not None and self.find_log() is None:
            echo(
                _(
                    "[job {job} left the queue without a log: it was cancelled before it started, "
                    "or its log is not in {folder}]"
                ).format(job=self.id, folder=self.workdir)
            )
        elif echo and status is not None:
            end = self.ending()
            says = (
                # TRANSLATORS: {ended} is how the job ended, e.g. "was killed at its walltime"
                _("{ended} (exit status {status})").format(ended=how_ended(end.says), status=status)
                if end and end.kind != "exit"
                else _("ended with exit status {status}").format(status=status)
            )
            attempt = jobend.attempts(self.log_text())[-1][0]
            fields = dict(job=self.id, ended=says, attempt=attempt, log=self.find_log())
            if attempt > 1:
                # TRANSLATORS: {ended} is how the job ended, e.g. "ended with exit status 1"
                echo(_("[job {job} {ended} in attempt {attempt}; log: {log}]").format(**fields))
            else:
                # TRANSLATORS: {ended} is how the job ended, e.g. "ended with exit status 1"
                echo(_("[job {job} {ended}; log: {log}]").format(**fields))
            if status != 0:
                # TRANSLATORS: {diagnosis} is the likeliest cause and what to do about it
                echo(_("[what went wrong: {diagnosis}]").format(diagnosis=self.diagnosis()))
        return status

    def cancel_command(self) -> str:
        if self.scheduler == "local":
            return f"python -m course cancel {self.id}"
        return _("qdel {job} (on Slurm: scancel {number})").format(job=self.id, number=self.number)

    def _interrupted(self, echo: Callable[[str], None]) -> None:
        """Say that the job goes on, and how to stop it; in a terminal, offer to cancel it."""
        echo(
            _(
                "[stopped following job {job}; it goes on running. Its log: {log}; to cancel it: "
                "{command}]"
            ).format(job=self.id, log=self.find_log(), command=self.cancel_command())
        )
        if self.scheduler != "local" or not sys.stdin.isatty():  # nobody to answer: ask nothing
            return
        try:
            answer = input(_("cancel job {job} now? [y/N]").format(job=self.id) + " ")
        except (EOFError, KeyboardInterrupt):
            return
        if answer.strip().lower() in ("y", "yes"):
            localsched.cancel(self.id)
            echo(
                _("[job {job} was cancelled; log: {log}]").format(job=self.id, log=self.find_log())
            )

    def diagnosis(self) -> str:
        """The likeliest cause of a failed job, read from its log, and what to do about it."""
        log = self.find_log()
        if log is None:
            fields = dict(number=self.number, folder=self.workdir, job=self.id)
            if self.scheduler == "local":
                return _("the job left no log *.o{number} in {folder}").format(**fields)
            return _(
                "the job left no log *.o{number} in {folder}: ask the scheduler (qstat -x -f {job})"
            ).format(**fields)
        return explain(self.log_text(), self.id, self.scheduler == "local", log.name)

    def _wait_qsub(
        self, timeout: float | None, echo: Callable[[str], None] | None, poll: float
    ) -> int | None:
        deadline = None if timeout is None else time.monotonic() + timeout
        shown, announced = 0, 1
        told: set[str] = set()  # each reason for the wait said once: PBS's comments alternate
        gone: float | None = None  # since when the scheduler has not known the job, without a log
        while True:
            state = qstat_state(self.id)
            log = self.find_log()
            text = joblog.read(log) if log is not None else ""  # log_text(), the log found once
            if echo and log is None and state == "queued":
                waits = pending.ask(self.id)
                if waits and waits.reason not in told:
                    echo(f"[{waits.says(self.id)}]")
                    told.add(waits.reason)
            gone = (gone or time.monotonic()) if state == "finished" and log is None else None
            # A killed job writes no end line; without qstat its scheduler's kill notice is the only
            # sign.
            ended = (
                jobend.exit_status(text) is not None
                or (state == "finished" and log is not None)
                or jobend.killed_by_scheduler(text)
                or (gone is not None and time.monotonic() - gone > NO_LOG_GRACE)
            )
            # Slurm reruns a requeued job (scontrol requeue, a node failing) into the same log.
            shown_attempt = jobend.attempts(text)[-1][0]
            attempt = (self.rerun_attempt(text) if ended else None) or shown_attempt
            ended = ended and attempt == shown_attempt
            if echo and text:
                lines = text.splitlines()
                complete = ended or text.endswith("\n")  # else the last line may be unfinished
                upto = max(shown, len(lines) if complete else len(lines) - 1)
                for line in lines[shown:upto]:
                    echo(line)
                shown = upto
            if echo and attempt > announced:
                echo(
                    _(
                        "[the scheduler is rerunning job {job} (attempt {attempt}); its log keeps "
                        "the output of every attempt]"
                    ).format(job=self.id, attempt=attempt)
                )
                announced = attempt
            if ended:
                status = self.exit_status()
                return status if status is not None else -1
            if deadline is not None and time.monotonic() > deadline:
                return None
            time.sleep(poll)


def qstat_state(job_id: str) -> str:
    """'queued', 'finished' (or no longer known), or 'unknown' when qstat cannot tell (no qstat, no
    server)."""
    qstat = paths.find_program("qstat")
    if qstat is None:
        return "unknown"
    run = subprocess.run([qstat, job_id], capture_output=True, text=True)
    if run.returncode != 0:
        said = run.stdout + run.stderr
        gone = ("Unknown Job Id", "Invalid job id", "has finished", "Job has been deleted")
        return "finished" if any(word in said for word in gone) else "unknown"
    # PBS Pro and Slurm's wrapper list a finished job a while longer, in state F or C.
    states = re.findall(
        rf"^{re.escape(job_id.split('.')[0])}\S*\s+\S+\s+\S+\s+\S+\s+([A-Z])\b", run.stdout, re.M
    )
    return "finished" if states and states[-1] in ("F", "C") else "queued"

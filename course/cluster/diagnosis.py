"""Why a job failed, read from its log: a scheduler's kill notice, bash's, Open MPI's and Python's
own words, or the kit's error lines (course.contracts.joblog), each as what it means and what to
do."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from course.contracts import jobend, joblog
from course.i18n import _
from course.runtime import watchdog

# How jobend (End.says, from the log) and the local scheduler's supervisor (its record's "says")
# word how a job ended, looked up to say it in the student's language: the phrases with a number
# or a name; the others are how_ended()'s table.
_ENDED = re.compile(
    r"ended with exit status (?P<status>-?\d+)|was killed by (?:PBS: (?P<why>.+)|(?P<signal>\S+))"
)


def how_ended(says: str) -> str:
    """How a job ended, as its log (jobend.End.says) or the local scheduler's record says it
    ("ended with exit status 3", "was cancelled"), in the student's language; words it does not
    know as they are."""
    known = {
        "was killed at its walltime": _("was killed at its walltime"),
        "was requeued by the scheduler": _("was requeued by the scheduler"),
        "was stopped: a node of it failed": _("was stopped: a node of it failed"),
        "was lost: its scheduler process died": _("was lost: its scheduler process died"),
        "was cancelled": _("was cancelled"),
        "could not start": _("could not start"),
        "ended": _("ended"),
    }
    if says in known:
        return known[says]
    found = _ENDED.fullmatch(says)
    if found is None:
        return says
    if found["status"] is not None:
        return _("ended with exit status {status}").format(status=found["status"])
    if found["why"] is not None:
        # TRANSLATORS: {why} is PBS's own words, e.g. "mem 8gb exceeded limit 4gb"
        return _("was killed by PBS: {why}").format(why=found["why"])
    # TRANSLATORS: {signal} is a signal's name, e.g. SIGTERM
    return _("was killed by {signal}").format(signal=found["signal"])


def _rank_killed(m: re.Match) -> str:
    number = int(m["signal"])
    fields = dict(rank=m["rank"], node=m["node"], number=number, name=m["name"])
    if number == 9:
        return _(
            "MPI rank {rank} on {node} was killed by signal {number} ({name}): most often the node "
            "ran out of memory: a smaller batch or model, or fewer ranks per node"
        ).format(**fields)
    if number == 11:
        return _(
            "MPI rank {rank} on {node} was killed by signal {number} ({name}): a crash in compiled "
            "code (CuPy, MPI, NumPy): the lines above it may say where"
        ).format(**fields)
    return _("MPI rank {rank} on {node} was killed by signal {number} ({name})").format(**fields)


def _wrong_launcher(m: re.Match) -> str:
    return _(
        "{ran} is another MPI's launcher: it started each rank alone (an MPI world of {size}, not "
        "one of the {launched} ranks course launch started), so they stopped before training; the "
        "kit needs {needed}: set it as the site profile's mpiexec, or put its folder first on PATH "
        "(python -m course doctor checks it)"
    ).format(ran=m["ran"], size=m["size"], launched=m["launched"], needed=m["needed"])


def _unknown_option(m: re.Match) -> str:
    launched = joblog.launches(m.string[: m.start()])
    if not launched:
        return _(
            "a command of the job does not know the option {option}: check its spelling"
        ).format(option=m["option"])
    return _(
        "{launcher} does not know the option {option} of the site's launcher template: it is "
        "another MPI's launcher (Slurm's mpiexec wrapper is one); the kit needs the mpiexec of the "
        "MPI mpi4py uses: python -m course doctor says which, and how to set it"
    ).format(launcher=launched[-1]["launcher"], option=m["option"])


def _scheduler_kill(end: jobend.End, local: bool, job_id: str, text: str) -> str | None:
    """What a scheduler's kill notice in the log `text` means for the student; None when no
    scheduler killed the job."""
    if end.kind == "walltime":
        if joblog.NO_SNAPSHOTS in text:
            return _(
                "the walltime ran out, and this trainer takes no snapshots, so submitting it again "
                "starts over: add the snapshot extension (the add_snapshots exercise), train fewer "
                "epochs, or ask for more time (-l walltime=HH:MM:SS)"
            )
        return _(
            "the walltime ran out: submit the same job script again, unchanged: the training "
            'resumes from its last snapshot (the next log says "resuming ... at iteration N"), '
            "so the time spent is not lost. If it runs out again, train fewer epochs, or ask for "
            "more time (-l walltime=HH:MM:SS)"
        )
    if end.kind == "cancelled":
        if local:
            return _(
                "the job was cancelled (python -m course cancel, or its scheduler was stopped): "
                "submit it again"
            )
        return _("the job was cancelled (qdel or scancel, or an admin): submit it again")
    if end.kind in ("requeued", "node_failed"):
        number = joblog.job_number(job_id)
        if end.kind == "requeued":
            return _(
                "the job was requeued (scontrol requeue, by an administrator): Slurm runs it again "
                "by itself, as the same job and into the same log, which keeps every attempt; "
                "`squeue -j {number}` lists it until it ends"
            ).format(number=number)
        return _(
            "a node of the job failed: Slurm runs it again by itself, as the same job and into "
            "the same log, unless the cluster does not requeue jobs; if `squeue -j {number}` no "
            "longer lists it and the log shows no later attempt, submit it again"
        ).format(number=number)
    if end.kind == "lost":
        return _(
            "the local scheduler's process was killed (or the machine ran out of memory), which "
            "stops its job: submit it again"
        )
    if end.kind == "killed":
        # TRANSLATORS: {why} is PBS's own words, e.g. "mem 8gb exceeded limit 4gb"
        return _(
            "the job was killed by PBS: {why}: ask for more of it in the job's #PBS -l lines"
        ).format(why=end.says.split(": ", 1)[-1])
    return None


def _hang_finding(hang: jobend.Hang) -> str:
    """The watchdog's finding (its line without the protocol's words), in the student's
    language."""
    how = {
        "stopped": _("its process stopped running (stopped by a signal, or its node hangs)"),
        "stuck": _("it hung in {where}; the other ranks wait for it"),
        "alone": _("it hung in {where}"),
        "waiting": _("every rank waits for the others in ChainerMN (a deadlock)"),
    }[hang.how].format(where=hang.where)
    fields = dict(
        rank=hang.rank, ranks=hang.ranks, minutes=hang.minutes, iteration=hang.iteration, how=how
    )
    one = hang.minutes == 1
    if hang.ranks == 1:
        if one:
            return _(
                "the training made no step for {minutes:g} minute (last step at iteration "
                "{iteration}): {how}"
            ).format(**fields)
        return _(
            "the training made no step for {minutes:g} minutes (last step at iteration "
            "{iteration}): {how}"
        ).format(**fields)
    if hang.rank is not None:
        if one:
            return _(
                "rank {rank} of {ranks} made no training step for {minutes:g} minute (last step "
                "at iteration {iteration}): {how}"
            ).format(**fields)
        return _(
            "rank {rank} of {ranks} made no training step for {minutes:g} minutes (last step at "
            "iteration {iteration}): {how}"
        ).format(**fields)
    if one:
        return _(
            "no rank of {ranks} made a training step for {minutes:g} minute (last step at "
            "iteration {iteration}): {how}"
        ).format(**fields)
    return _(
        "no rank of {ranks} made a training step for {minutes:g} minutes (last step at iteration "
        "{iteration}): {how}"
    ).format(**fields)


def _hang(hang: jobend.Hang) -> str:
    """What the watchdog's line means for the student: its finding, and what to do."""
    said = _hang_finding(hang)
    if hang.how == "stopped":
        return _(
            "{finding}; the watchdog ended the job rather than wait for its walltime: submit the "
            "job again (it resumes from its last snapshot)"
        ).format(finding=said)
    if hang.how == "waiting":
        return _(
            "{finding}; the watchdog ended the job rather than wait for its walltime: every rank "
            "must make the same ChainerMN calls in the same order (one rank skipped a call the "
            "others make): fix that, then submit the job again (it resumes from its last snapshot)"
        ).format(finding=said)
    # TRANSLATORS: {variable} is the environment variable of the watchdog's limit in minutes
    return _(
        "{finding}; the watchdog ended the job rather than wait for its walltime: look at what "
        "that line waits for (a file, a device, another process), then submit the job again (it "
        "resumes from its last snapshot); if it is only slow, give it more minutes (qsub -v "
        "{variable}=30)"
    ).format(finding=said, variable=watchdog.LIMIT_VARIABLE)


# What else a failed job's log can show, most telling first: (pattern, what it means). Bash's, Open
# MPI's and Python's own words, and the kit's error lines (course.contracts.joblog).
_CAUSES: list[tuple[re.Pattern, Callable[[re.Match], str]]] = [
    (
        re.compile(r"^(?P<file>\S+): line (?P<line>\d+): syntax error(?P<what>.*)$", re.M),
        # TRANSLATORS: {what} is bash's words after "syntax error", e.g. " near unexpected token
        # `fi'" (or nothing)
        lambda m: _(
            "bash cannot read the job script: syntax error{what} at line {line} of {file}: fix "
            "that line (bash -n SCRIPT checks a script without running it)"
        ).format(what=m["what"], line=m["line"], file=Path(m["file"]).name),
    ),
    (joblog.WRONG_LAUNCHER, _wrong_launcher),
    (
        joblog.KIT_ERROR,
        # TRANSLATORS: a kit command's error as its log shows it: {message} what went wrong,
        # {fix} what to do (both as the job printed them)
        lambda m: _("course {command}: {message}: {fix}").format(
            command=m["command"], message=m["message"], fix=m["fix"]
        ),
    ),
    # Perl's Getopt (Slurm's mpiexec wrapper) and GNU getopt (srun, ...) on a template's option
    (
        re.compile(
            r"^(?:\S+: )?(?:Unknown option: |unrecognized option ')(?P<option>[^\s']+)'?$", re.M
        ),
        _unknown_option,
    ),
    (
        re.compile(
            r"^(?P<file>\S+): line (?P<line>\d+): (?P<command>.+): command not found$", re.M
        ),
        lambda m: _(
            "line {line} of {file} runs `{command}`, which is not found: fix the name, or load its "
            "module in the site profile's setup"
        ).format(line=m["line"], file=Path(m["file"]).name, command=m["command"]),
    ),
    (
        re.compile(
            r"(?P<launcher>\w+) was unable to find the specified executable "
            r"file[\s\S]*?Executable: (?P<exe>\S+)"
        ),
        lambda m: _(
            "{launcher} could not find the program {program} to start as a rank: check its name "
            "and that it is installed on every node"
        ).format(launcher=m["launcher"], program=m["exe"]),
    ),
    (
        re.compile(
            r"(?P<launcher>\w+) noticed that process rank (?P<rank>\d+) with PID \d+ on node "
            r"(?P<node>\S+) "
            r"exited on\s+signal (?P<signal>\d+) \((?P<name>[^)]*)\)"
        ),
        _rank_killed,
    ),
    (
        re.compile(r"^\s*(?P<error>[\w.]*(?:Error|Exception|Interrupt)\b:?.*)$", re.M),
        # TRANSLATORS: {error} is the exception's line, e.g. "ValueError: bad batch size"
        lambda m: _("{error} (the traceback above it in the log shows where)").format(
            error=m["error"].strip()[:200]
        ),
    ),
]
_MISSING = re.compile(r"^.*No such file or directory.*$", re.M)


def explain(text: str, job_id: str, local: bool, log: str | None = None) -> str:
    """What a failed job's log shows went wrong (Job.diagnosis): its last attempt's part, where
    Slurm reran the job. `log`: the log's name, to name it ("the log" without)."""
    text = jobend.last_attempt(text)
    hangs = jobend.hangs(jobend.until_end(text))
    if hangs:  # before any walltime: the watchdog named why the job made no progress
        return _hang(hangs[-1])
    end = jobend.end(text)
    killed = _scheduler_kill(end, local, job_id, text) if end else None
    if killed:
        return killed
    for pattern, meaning in _CAUSES:
        found = list(pattern.finditer(text))
        if found:
            return meaning(found[-1])  # the last: a traceback ends with the exception raised
    if end and end.kind == "signal":
        signal = end.says.split()[-1]  # was killed by SIGTERM
        if local:
            return _(
                "the job was killed by {signal}, sent from outside it (kill, or the machine "
                "shutting down): submit it again"
            ).format(signal=signal)
        return _(
            "the job was killed by {signal}, sent from outside it (qdel or scancel, an "
            "administrator, or a node failing): submit it again"
        ).format(signal=signal)
    missing = _MISSING.findall(text)
    if missing:
        # TRANSLATORS: {error} is the log's line that names a missing file
        return _("{error} (check that path; a job starts in your home folder)").format(
            error=missing[-1].strip()[:200]
        )
    if log is None:
        log = _("the log")
    if local:
        # TRANSLATORS: {log} is the log's file name, or "the log"
        return _(
            "{log} names no cause: read it from the top; the command before its last line failed"
        ).format(log=log)
    return _(
        "{log} names no cause; ask the scheduler why the job ended: qstat -x -f {job} (PBS) or "
        "sacct -j {number} (Slurm)"
    ).format(log=log, job=job_id, number=joblog.job_number(job_id))

"""Why a job failed, read from its log: a scheduler's kill notice, bash's, Open MPI's and Python's
own words, or the kit's error lines (course.contracts.joblog), each as what it means and what to
do."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from course.contracts import jobend, joblog
from course.runtime import watchdog


def _rank_killed(m: re.Match) -> str:
    number = int(m["signal"])
    why = {
        9: "most often the node ran out of memory: a smaller batch or model, or fewer ranks per "
        "node",
        11: "a crash in compiled code (CuPy, MPI, NumPy): the lines above it may say where",
    }
    return f"MPI rank {m['rank']} on {m['node']} was killed by signal {number} ({m['name']})" + (
        f": {why[number]}" if number in why else ""
    )


def _wrong_launcher(m: re.Match) -> str:
    return (
        f"{m['ran']} is another MPI's launcher: it started each rank alone (an MPI world of "
        f"{m['size']}, not one of the {m['launched']} ranks course launch started), so they "
        f"stopped before training; the kit needs {m['needed']}: set it as the site profile's "
        "mpiexec, or put its folder first on PATH (python -m course doctor checks it)"
    )


def _unknown_option(m: re.Match) -> str:
    launched = joblog.launches(m.string[: m.start()])
    if not launched:
        return f"a command of the job does not know the option {m['option']}: check its spelling"
    return (
        f"{launched[-1]['launcher']} does not know the option {m['option']} of the site's "
        "launcher template: it is another MPI's launcher (Slurm's mpiexec wrapper is one); the kit "
        "needs the mpiexec of the MPI mpi4py uses: python -m course doctor says which, and how to "
        "set it"
    )


def _scheduler_kill(end: jobend.End, local: bool, job_id: str) -> str | None:
    """What a scheduler's kill notice means for the student; None when no scheduler killed the
    job."""
    if end.kind == "walltime":
        return (
            "the walltime ran out: train fewer epochs, or ask for more time (-l walltime=HH:MM:SS)"
        )
    if end.kind == "cancelled":
        who = (
            "python -m course cancel, or its scheduler was stopped"
            if local
            else "qdel or scancel, or an admin"
        )
        return f"the job was cancelled ({who}): submit it again"
    if end.kind in ("requeued", "node_failed"):
        number = joblog.job_number(job_id)
        if end.kind == "requeued":
            return (
                "the job was requeued (scontrol requeue, by an administrator): Slurm runs it again "
                "by itself, as the same job and into the same log, which keeps every attempt; "
                f"`squeue -j {number}` lists it until it ends"
            )
        return (
            "a node of the job failed: Slurm runs it again by itself, as the same job and into "
            "the same log, unless the cluster does not requeue jobs; if `squeue -j "
            f"{number}` no longer lists it and the log shows no later attempt, submit it again"
        )
    if end.kind == "lost":
        return (
            "the local scheduler's process was killed (or the machine ran out of memory), which "
            "stops its job: "
            "submit it again"
        )
    if end.kind == "killed":
        return f"the job {end.says}: ask for more of it in the job's #PBS -l lines"
    return None


def _hang(hang: jobend.Hang) -> str:
    """What the watchdog's line means for the student: its finding, and what to do."""
    said = hang.format().removeprefix("course: watchdog: ").removesuffix("; the job was ended")
    again = "submit the job again (it resumes from its last snapshot)"
    fix = {
        "stopped": again,
        "waiting": "every rank must make the same ChainerMN calls in the same order (one rank "
        f"skipped a call the others make): fix that, then {again}",
    }.get(
        hang.how,
        f"look at what that line waits for (a file, a device, another process), then {again}; "
        f"if it is only slow, give it more minutes (qsub -v {watchdog.LIMIT_VARIABLE}=30)",
    )
    return f"{said}; the watchdog ended the job rather than wait for its walltime: {fix}"


# What else a failed job's log can show, most telling first: (pattern, what it means). Bash's, Open
# MPI's and Python's own words, and the kit's error lines (course.contracts.joblog).
_CAUSES: list[tuple[re.Pattern, Callable[[re.Match], str]]] = [
    (
        re.compile(r"^(?P<file>\S+): line (?P<line>\d+): syntax error(?P<what>.*)$", re.M),
        lambda m: (
            f"bash cannot read the job script: syntax error{m['what']} at line {m['line']} of "
            f"{Path(m['file']).name}: fix that line (bash -n SCRIPT checks a script without "
            "running it)"
        ),
    ),
    (joblog.WRONG_LAUNCHER, _wrong_launcher),
    (joblog.KIT_ERROR, lambda m: f"course {m['command']}: {m['message']}: {m['fix']}"),
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
        lambda m: (
            f"line {m['line']} of {Path(m['file']).name} runs `{m['command']}`, which is not "
            "found: "
            "fix the name, or load its module in the site profile's setup"
        ),
    ),
    (
        re.compile(
            r"(?P<launcher>\w+) was unable to find the specified executable "
            r"file[\s\S]*?Executable: (?P<exe>\S+)"
        ),
        lambda m: (
            f"{m['launcher']} could not find the program {m['exe']} to start as a rank: check its "
            "name "
            "and that it is installed on every node"
        ),
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
        lambda m: f"{m['error'].strip()[:200]} (the traceback above it in the log shows where)",
    ),
]
_MISSING = re.compile(r"^.*No such file or directory.*$", re.M)


def explain(text: str, job_id: str, local: bool, log: str = "the log") -> str:
    """What a failed job's log shows went wrong (Job.diagnosis): its last attempt's part, where
    Slurm reran the job."""
    text = jobend.last_attempt(text)
    hangs = jobend.hangs(jobend.until_end(text))
    if hangs:  # before any walltime: the watchdog named why the job made no progress
        return _hang(hangs[-1])
    end = jobend.end(text)
    killed = _scheduler_kill(end, local, job_id) if end else None
    if killed:
        return killed
    for pattern, meaning in _CAUSES:
        found = list(pattern.finditer(text))
        if found:
            return meaning(found[-1])  # the last: a traceback ends with the exception raised
    if end and end.kind == "signal":
        outside = (
            "kill, or the machine shutting down"
            if local
            else "qdel or scancel, an administrator, or a node failing"
        )
        return f"the job {end.says}, sent from outside it ({outside}): submit it again"
    missing = _MISSING.findall(text)
    if missing:
        return f"{missing[-1].strip()[:200]} (check that path; a job starts in your home folder)"
    if local:
        return (
            f"{log} names no cause: read it from the top; the command before its last line failed"
        )
    return (
        f"{log} names no cause; ask the scheduler why the job ended: "
        f"qstat -x -f {job_id} (PBS) or sacct -j {joblog.job_number(job_id)} (Slurm)"
    )

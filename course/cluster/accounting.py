"""The scheduler's accounting: whether a run's jobs ran here, as the student, with what they claim.

The results file and the log both live in the student's folder; the scheduler's records do not.
Where the grader can ask them (sacct on Slurm, else scontrol for a job it still holds; qstat -x -f
on PBS), a run's jobs must be there, be the student's, and the last one must have had the nodes,
GPUs and time the run claims. Where it cannot, the run's notes say so: it was not checked.
course.evidence.trace calls Accounting.check on each traced run. While a student follows a job,
`restarts` tells whether Slurm reruns it (course.cluster.job).
"""

from __future__ import annotations

import functools
import json
import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from course import i18n
from course.i18n import _


class TracedRun(Protocol):
    """What a check reads of a run (course.evidence.Run): its record and the jobs that made it."""

    record: dict

    @property
    def segments(self) -> list[dict]: ...


ELAPSED_SLACK = 2.0  # seconds: schedulers count whole seconds


@dataclass(frozen=True)
class JobAccount:
    """A job as the scheduler's records show it."""

    user: str
    nodes: int
    gpus: int | None  # None: these records do not count GPUs
    elapsed: float  # seconds
    source: str  # the command that told


@dataclass(frozen=True)
class Lookup:
    account: JobAccount | None
    why: str = ""  # without an account: why
    absent: bool = False  # the records were read and hold no such job (else they could not be read)


def clock_seconds(clock: str) -> float:
    """[DD-]HH:MM:SS (or MM:SS) as seconds."""
    days, _, rest = clock.rpartition("-")
    total = 0
    for part in rest.split(":"):
        total = total * 60 + int(part)
    return total + 86400 * int(days or 0)


def _gres_gpus(tres: str) -> int | None:
    """GPUs in a TRES list such as cpu=2,node=1,gres/gpu=2,gres/gpu:p100=2 (typed entries repeat the
    count)."""
    found = re.search(r"(?:^|,)gres/gpu=(\d+)", tres)
    return int(found.group(1)) if found else None


def parse_sacct(text: str, source: str = "sacct") -> JobAccount | None:
    """`sacct -X -n -P -o User,NNodes,AllocTRES,ElapsedRaw` output; None for no line. sacct records
    GPUs only where AccountingStorageTRES lists gres/gpu, so a TRES without it says nothing about
    GPUs."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return None
    user, nodes, tres, elapsed = lines[0].split("|")[:4]
    return JobAccount(user, int(nodes), _gres_gpus(tres), float(elapsed), source)


def parse_scontrol(text: str, source: str = "scontrol show job") -> JobAccount | None:
    """`scontrol show job -o ID` output (Key=Value words); its TRES is the allocation, so no
    gres/gpu is 0 GPUs."""
    fields = dict(re.findall(r"(?:^|\s)([\w/:]+)=(\S*)", text))
    if "UserId" not in fields:
        return None
    return JobAccount(
        fields["UserId"].split("(")[0],
        int(fields.get("NumNodes", "0").split("-")[0]),
        _gres_gpus(fields.get("TRES", "")) or 0,
        clock_seconds(fields.get("RunTime", "0:0")),
        source,
    )


def qstat_job(text: str) -> dict:
    """The job in `qstat -f -F json ID` output (OpenPBS, PBS Pro 14.1 and later); {} for none. Its
    resources are objects (`Resource_List`: {"ngpus": 2, ...}); a value that reads as JSON is
    written as such (a count as a number)."""
    try:
        jobs = json.loads(text).get("Jobs") or {}
    except (ValueError, AttributeError):
        return {}
    return next(iter(jobs.values()), {})


def parse_qstat(text: str, source: str = "qstat -x -f") -> JobAccount | None:
    """`qstat -x -f -F json ID` output (see qstat_job). A job that asked for no `ngpus` (a site that
    gives its nodes whole, as Reedbush-H did) has no Resource_List.ngpus: its GPUs are not
    recorded."""
    job = qstat_job(text)
    if "Job_Owner" not in job:
        return None
    hosts = {chunk.split("/")[0] for chunk in str(job.get("exec_host", "")).split("+") if chunk}
    asked = job.get("Resource_List") or {}
    ngpus = asked.get("ngpus")
    return JobAccount(
        job["Job_Owner"].split("@")[0],
        int(asked.get("nodect") or len(hosts)),
        int(ngpus) if ngpus is not None else None,
        clock_seconds(str((job.get("resources_used") or {}).get("walltime") or "0:0")),
        source,
    )


def _ask(command: list[str]) -> subprocess.CompletedProcess | str:
    """The command's result, or why it could not run."""
    if shutil.which(command[0]) is None:
        return _("{program} is not installed where grading runs").format(program=command[0])
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return _("{command} failed ({error})").format(command=" ".join(command), error=e)


def _said(done: subprocess.CompletedProcess) -> str:
    """A failed command's last word on why."""
    said = (done.stderr or done.stdout).strip()
    return (
        said.splitlines()[-1] if said else _("exit status {status}").format(status=done.returncode)
    )


# The states of a job Slurm still runs or will run: a requeued job is PENDING again (first
# REQUEUED, or REQUEUE_HOLD after `scontrol requeuehold`); COMPLETING while its last attempt ends.
RERUNNING = frozenset(
    {"PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "CONFIGURING", "RUNNING", "COMPLETING"}
)


def parse_restarts(text: str) -> tuple[str, int] | None:
    """(JobState, Restarts) of `scontrol show job -o ID` output; None without them."""
    fields = dict(re.findall(r"(?:^|\s)(JobState|Restarts)=(\S*)", text))
    if "JobState" not in fields or not fields.get("Restarts", "").isdigit():
        return None
    return fields["JobState"], int(fields["Restarts"])


def restarts(job_id: str) -> tuple[str, int] | None:
    """(state, how often Slurm requeued it) of a job slurmctld still holds; None elsewhere (no
    scontrol, another scheduler, a job it no longer holds)."""
    held = _ask(["scontrol", "show", "job", "-o", job_id])
    return None if isinstance(held, str) or held.returncode else parse_restarts(held.stdout)


def lookup(scheduler: str, job_id: str) -> Lookup:
    """Job `job_id` in the records of the scheduler that ran it (cached: grading asks once per
    job; per language, as the answer's why is in the student's)."""
    return _lookup(scheduler, job_id, i18n.language())


@functools.cache
def _lookup(scheduler: str, job_id: str, language: str) -> Lookup:
    """lookup's answer, asked once for each job and language."""
    if scheduler == "slurm":
        sacct = _ask(
            ["sacct", "-j", job_id, "-X", "-n", "-P", "-o", "User,NNodes,AllocTRES,ElapsedRaw"]
        )
        if not isinstance(sacct, str) and sacct.returncode == 0:
            account = parse_sacct(sacct.stdout, f"sacct -j {job_id}")
            return Lookup(
                account,
                "" if account else _("sacct -j {job} knows no such job").format(job=job_id),
                absent=account is None,
            )
        # Without slurmdbd, slurmctld still holds a finished job for MinJobAge (300 s by default).
        held = _ask(["scontrol", "show", "job", "-o", job_id])
        account = None if isinstance(held, str) or held.returncode else parse_scontrol(held.stdout)
        if account:
            return Lookup(account)
        return Lookup(
            None,
            # TRANSLATORS: {sacct} is why sacct could not tell (its own words, or the kit's)
            _("{sacct}; scontrol no longer holds job {job}").format(
                sacct=sacct if isinstance(sacct, str) else f"sacct: {_said(sacct)}", job=job_id
            ),
        )
    if scheduler == "pbs":
        done = _ask(["qstat", "-x", "-f", "-F", "json", job_id])
        if isinstance(done, str):
            return Lookup(None, done)
        account = parse_qstat(done.stdout) if done.returncode == 0 else None
        # PBS keeps finished jobs for job_history_duration (two weeks by default): not found may be
        # purged
        return Lookup(account) if account else Lookup(None, f"qstat -x -f {job_id}: {_said(done)}")
    return Lookup(
        None,
        _("the {scheduler} scheduler keeps no accounting").format(scheduler=scheduler)
        if scheduler == "local"
        else _("the kit cannot read the accounting of scheduler {scheduler}").format(
            scheduler=repr(scheduler)
        ),
    )


@dataclass(frozen=True)
class Accounting:
    """Checking runs against the scheduler's records, for one student (`user`: theirs on the
    cluster, from the instructor's mapping; None: compared with nothing, only reported)."""

    student: str | None = None
    user: str | None = None
    enabled: bool = (
        True  # False: the instructor grades where the scheduler is not the students' one
    )
    records: Callable[[str, str], Lookup] = lookup  # (scheduler, job id) -> what its records say

    def check(self, run: TracedRun) -> tuple[list[str], list[str]]:
        """(problems, notes) of a run's jobs against the records: each job the student's, the last
        one with the nodes, GPUs and time the run claims."""
        problems, notes = [], []
        job = run.record["job"]
        jobs = {
            segment["job"]["id"]: segment["job"].get("scheduler")
            for segment in run.segments[:-1]
            if (segment.get("job") or {}).get("id")
        }
        jobs[job["id"]] = job.get("scheduler")
        for job_id, scheduler in jobs.items():
            found = (
                self.records(scheduler or "none", job_id)
                if self.enabled
                else Lookup(None, _("grading.toml [accounting] has enabled = false"))
            )
            if found.absent:
                problems.append(
                    # TRANSLATORS: {why} is what the records said ("sacct -j 7 knows no such job")
                    _(
                        "job {job} is not in the scheduler's records ({why}): it did not run on "
                        "this cluster"
                    ).format(job=job_id, why=found.why)
                )
            if found.account is None:
                if not found.absent:
                    notes.append(
                        # TRANSLATORS: {why} is why the records could not be read
                        _(
                            "job {job} was not checked against the scheduler's records: {why}"
                        ).format(job=job_id, why=found.why)
                    )
                continue
            account = found.account
            if self.user is None and self.student:
                notes.append(
                    # TRANSLATORS: {source} is the command whose records say it, e.g. "sacct -j 7"
                    _(
                        "job {job} ran as user {user} ({source}); whose job it was is not "
                        "compared: grading.toml [accounting] users maps no user to {student}"
                    ).format(
                        job=job_id, user=account.user, source=account.source, student=self.student
                    )
                )
            elif self.user is None:
                notes.append(
                    _(
                        "job {job} ran as user {user} ({source}); whose job it was is not "
                        "compared: grading.toml [accounting] users maps no user to this folder"
                    ).format(job=job_id, user=account.user, source=account.source)
                )
            elif account.user != self.user:
                problems.append(
                    _(
                        "job {job} ran as user {user} ({source}), not as {expected}, the user of "
                        "{student}: it is someone else's job"
                    ).format(
                        job=job_id,
                        user=account.user,
                        source=account.source,
                        expected=self.user,
                        student=self.student,
                    )
                )
            if job_id == job["id"]:
                problems += self._allocation(run, job_id, account)
                notes.append(self._checked(job_id, account))
        return problems, notes

    @staticmethod
    def _allocation(run: TracedRun, job_id: str, account: JobAccount) -> list[str]:
        """Why the job's allocation cannot have run this run: fewer nodes, GPUs or seconds than it
        claims."""
        problems = []
        nodes = len(set(run.record["hosts"]))
        if nodes > account.nodes:
            problems.append(
                _("the run names {nodes} node(s), but job {job} had {had} ({source})").format(
                    nodes=nodes, job=job_id, had=account.nodes, source=account.source
                )
            )
        if run.record.get("device_kind") == "gpu" and account.gpus is not None:
            gpus = len(set(zip(run.record["hosts"], run.record["devices"])))
            if gpus > account.gpus:
                problems.append(
                    _("the run names {gpus} GPU(s), but job {job} had {had} ({source})").format(
                        gpus=gpus, job=job_id, had=account.gpus, source=account.source
                    )
                )
        wall = run.record.get("wall_seconds")
        if wall and account.elapsed + ELAPSED_SLACK < wall:
            problems.append(
                _(
                    "job {job} ran {elapsed:.0f} s ({source}), less than the run's own {wall:.0f} s"
                ).format(job=job_id, elapsed=account.elapsed, source=account.source, wall=wall)
            )
        return problems

    @staticmethod
    def _checked(job_id: str, account: JobAccount) -> str:
        fields = dict(
            job=job_id,
            source=account.source,
            user=account.user,
            nodes=account.nodes,
            gpus=account.gpus,
            elapsed=account.elapsed,
        )
        if account.gpus is None:
            return _(
                "job {job} checked against {source}: user {user}, {nodes} node(s), GPUs not "
                "recorded, so not checked, {elapsed:.0f} s"
            ).format(**fields)
        return _(
            "job {job} checked against {source}: user {user}, {nodes} node(s), {gpus} GPU(s), "
            "{elapsed:.0f} s"
        ).format(**fields)

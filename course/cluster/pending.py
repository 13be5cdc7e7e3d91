"""Why a job that has not started waits: the scheduler's own reason, in a student's words.

While course.cluster.job follows a job that has not started, it asks the scheduler why: Slurm's
reason code (`squeue`; for nodes that are down or drained, their state and the admin's reason from
`sinfo`), or the `comment` of PBS's `qstat -f`. A reason that means the job can never start as it
is says so, with how to cancel it and what to change; a normal wait (busy nodes, other jobs first)
is said plainly, so that nobody waits for ever without a word.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass

from course import paths
from course.cluster import accounting, pbs

LESS_TIME = "ask for less time (-l walltime=HH:MM:SS)"
ASK_INSTRUCTOR = "it starts when the nodes are back; if it waits long, tell your instructor"
# Slurm's reason codes (`man squeue`, JOB REASON CODES): what each means, whether the job can never
# start as it is (then what to change) or waits (then what happens next).
_NEVER, _WAIT = True, False
_SLURM: dict[str, tuple[str, bool, str]] = {
    "PartitionTimeLimit": (
        "the partition's time limit{limit} is below the walltime asked for{asked}",
        _NEVER,
        LESS_TIME,
    ),
    "PartitionNodeLimit": (
        "the job asks for more nodes than the partition allows",
        _NEVER,
        "ask for fewer nodes (-l select=NODES:mpiprocs=RANKS)",
    ),
    "QOSMaxWallDurationPerJobLimit": ("your account's time limit is below it", _NEVER, LESS_TIME),
    "AssocMaxWallDurationPerJobLimit": ("your account's time limit is below it", _NEVER, LESS_TIME),
    "BadConstraints": (
        "no node has what the job asks for",
        _NEVER,
        "ask for what the nodes have (python -m course site show)",
    ),
    "PartitionConfig": (  # in Slurm 22 also for a moment, before a job's more precise reason
        "the partition, as it is set up now, cannot give what the job asks for",
        _WAIT,
        "check its -q and -l against python -m course site show",
    ),
    "InvalidAccount": ("the job's account is not valid here", _NEVER, "check the site profile"),
    "InvalidQOS": ("the job's QOS is not valid here", _NEVER, "check the site profile"),
    "ReqNodeNotAvail": ("nodes it needs are not available{nodes}", _WAIT, ASK_INSTRUCTOR),
    "NodeDown": ("nodes it needs are down{nodes}", _WAIT, ASK_INSTRUCTOR),
    "PartitionDown": ("the partition is down", _WAIT, ASK_INSTRUCTOR),
    "PartitionInactive": ("the partition is inactive", _WAIT, ASK_INSTRUCTOR),
    "JobHeldUser": ("it is held", _WAIT, "release it: scontrol release {number}"),
    "JobHeldAdmin": ("an administrator holds it", _WAIT, "ask your instructor"),
    "Resources": ("the nodes it asks for are busy", _WAIT, "it starts when they are free"),
    "Priority": ("jobs of higher priority come first", _WAIT, "it starts when its turn comes"),
    "Dependency": ("it waits for the jobs it depends on", _WAIT, "it starts when they end"),
    "BeginTime": ("its start time has not come", _WAIT, "it starts then"),
}
_SLURM_OTHER = ("Slurm has not started it yet", _WAIT, "it starts when Slurm allows")
# Slurm 22's words for "Nodes required for job are DOWN, DRAINED or reserved for jobs in higher
# priority partitions", a reason without a code
_NODES_UNAVAILABLE = "Nodes required for job are DOWN"
_NODE_STATES = re.compile(r"down|drain|fail|maint|not_responding|\*$")  # sinfo's %T of a lost node
# PBS's comments: "Not Running: <why>" for a wait (what each means, what happens next), "Can Never
# Run: <why>" for a job that never will.
_PBS: list[tuple[re.Pattern, str, str]] = [
    (re.compile(r"ineligible state: (\w+)"), "a node it needs is {0}", ASK_INSTRUCTOR),
    (
        re.compile(r"Insufficient amount of (?:\w+ )?resource|too few free|free nodes"),
        "the nodes it asks for are busy",
        "it starts when they are free",
    ),
    (re.compile(r"reservation|top job"), "jobs ahead of it come first", "it starts in its turn"),
    (re.compile(r"limit", re.I), "you have as many jobs running as allowed", "it starts later"),
    (re.compile(r"Queue not started"), "its queue is stopped", "ask your instructor"),
    (re.compile(r"held", re.I), "it is held", "release it with qrls, or ask your instructor"),
]


@dataclass(frozen=True)
class Pending:
    """Why a job waits: the scheduler's words, what they mean, and what happens or what to do."""

    reason: str  # the scheduler's own words: Slurm's reason code, PBS's comment
    source: str  # "Slurm reason" or "PBS comment"
    means: str
    next: str  # what happens next, or what to change
    never: bool  # the job cannot start as it is

    def says(self, job_id: str) -> str:
        """One line for the student."""
        head = f"job {job_id} is still pending: {self.means} ({self.source} {self.reason})"
        slurm = self.source.startswith("Slurm")
        cancel = f"scancel {job_id.split('.')[0]}" if slurm else f"qdel {job_id}"
        if self.never:
            return f"{head}; it will never start: cancel it ({cancel}) and {self.next}"
        return f"{head}; {self.next}"


def slurm_reason(
    reason: str, number: str, partition_limit: str = "", asked: str = "", nodes: str = ""
) -> Pending | None:
    """What Slurm's reason for a pending job means; None for `None` (not yet looked at)."""
    code = "ReqNodeNotAvail" if reason.startswith(_NODES_UNAVAILABLE) else reason.split(",")[0]
    if code in ("", "None"):
        return None
    if code.startswith(("QOS", "Assoc")) and code not in _SLURM:  # a limit on what is in use
        means, never = "you have as many jobs or resources in use as allowed", _WAIT
        what = "it starts when some of them end"
    else:
        means, never, what = _SLURM.get(code, _SLURM_OTHER)
    filled = means.format(
        limit=f" ({partition_limit})" if partition_limit else "",
        asked=f" ({asked})" if asked else "",
        nodes=f": {nodes}" if nodes else "",
    )
    return Pending(reason, "Slurm reason", filled, what.format(number=number), never)


def pbs_comment(comment: str) -> Pending | None:
    """What the comment PBS's scheduler put on a queued job means; None without one."""
    if not comment:
        return None
    if comment.startswith("Can Never Run"):
        fix = (
            LESS_TIME
            if "walltime" in comment
            else "ask for what the site has (python -m course site show)"
        )
        return Pending(comment, "PBS comment", "PBS says it can never run as it is", fix, _NEVER)
    for pattern, means, what in _PBS:
        found = pattern.search(comment)
        if found:
            return Pending(comment, "PBS comment", means.format(*found.groups()), what, _WAIT)
    return Pending(comment, "PBS comment", "PBS has not started it", "it starts when it can", _WAIT)


def _clock(slurm_time: str) -> str:
    """Slurm's [days-]hours:minutes:seconds (MM:SS under an hour) as HH:MM:SS; other words as
    they are (UNLIMITED)."""
    if not re.fullmatch(r"(\d+-)?\d+(:\d+){1,2}", slurm_time):
        return slurm_time
    return pbs.format_walltime(int(accounting.clock_seconds(slurm_time)))


def _run(*command: str) -> str:
    """The command's output; '' when it is not there, fails or hangs."""
    program = paths.find_program(command[0])
    if program is None:
        return ""
    try:
        done = subprocess.run([program, *command[1:]], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout if done.returncode == 0 else ""


def _lost_nodes(partition: str) -> str:
    """The partition's nodes that are down or drained, with the admin's reason: 'n1 drained
    (disk)'."""
    lines = _run("sinfo", "-h", "-N", "-p", partition, "-o", "%N|%T|%E").splitlines()
    lost = [line.split("|", 2) for line in lines if line.count("|") == 2]
    return ", ".join(
        f"{node} {state}" + (f" ({why})" if why and why != "none" else "")
        for node, state, why in lost
        if _NODE_STATES.search(state)
    )


def ask(job_id: str) -> Pending | None:
    """Why the job waits, as its scheduler says; None when it does not wait (it runs, or has
    ended) or no scheduler answers. Slurm where `squeue` is found, else PBS's `qstat -f`."""
    number = job_id.split(".")[0]
    if paths.find_program("squeue"):
        said = _run("squeue", "-h", "-j", number, "-o", "%T|%P|%l|%r").strip().split("|", 3)
        if len(said) != 4 or said[0] != "PENDING":
            return None
        _, partition, asked, reason = said
        limit = lost = ""
        if reason == "PartitionTimeLimit":
            limit = _clock(_run("sinfo", "-h", "-p", partition, "-o", "%l").strip())
        if reason.startswith(("ReqNodeNotAvail", "NodeDown", _NODES_UNAVAILABLE)):
            lost = _lost_nodes(partition)
        return slurm_reason(reason, number, limit, _clock(asked), lost)
    fields = accounting.qstat_fields(_run("qstat", "-f", job_id))
    if fields.get("job_state") not in ("Q", "H", "W"):
        return None
    return pbs_comment(fields.get("comment", ""))

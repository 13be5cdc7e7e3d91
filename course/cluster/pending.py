"""Why a job that has not started waits: the scheduler's own reason, in a student's words.

While course.cluster.job follows a job that has not started, it asks the scheduler why: Slurm's
reason code (`squeue`; for nodes that are down or drained, their state and the admin's reason from
`sinfo`), or the `comment` of PBS's `qstat -f -F json`. A reason that means the job can never
start as it is says so, with how to cancel it and what to change; a normal wait (busy nodes, other
jobs first) is said plainly, so that nobody waits for ever without a word.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass

from course import i18n, paths
from course.cluster import accounting, pbs
from course.i18n import _

# Slurm's reason codes (`man squeue`, JOB REASON CODES): whether the job can never start as it is
# (then what to change) or waits (then what happens next).
_NEVER, _WAIT = True, False
# Slurm 22's words for "Nodes required for job are DOWN, DRAINED or reserved for jobs in higher
# priority partitions", a reason without a code
_NODES_UNAVAILABLE = "Nodes required for job are DOWN"
_NODE_STATES = re.compile(r"down|drain|fail|maint|not_responding|\*$")  # sinfo's %T of a lost node
# PBS's comment on a job waiting for a node that is offline, down, ...
_INELIGIBLE = re.compile(r"ineligible state: (?P<state>\w+)")


def _less_time() -> str:
    return _("ask for less time (-l walltime=HH:MM:SS)")


def _ask_instructor() -> str:
    return _("it starts when the nodes are back; if it waits long, tell your instructor")


def _slurm_reasons() -> dict[str, tuple[str, bool, str]]:
    """{Slurm's reason code: (what it means, whether the job can never start as it is, what to
    change or what happens next)}, in the student's language."""
    wall = _("your account's time limit is below it")
    return {
        "PartitionTimeLimit": (
            # TRANSLATORS: {limit} and {asked} are each empty or a time in parentheses,
            # " (00:30:00)"
            _("the partition's time limit{limit} is below the walltime asked for{asked}"),
            _NEVER,
            _less_time(),
        ),
        "PartitionNodeLimit": (
            _("the job asks for more nodes than the partition allows"),
            _NEVER,
            _("ask for fewer nodes (-l select=NODES:mpiprocs=RANKS)"),
        ),
        "QOSMaxWallDurationPerJobLimit": (wall, _NEVER, _less_time()),
        "AssocMaxWallDurationPerJobLimit": (wall, _NEVER, _less_time()),
        "BadConstraints": (
            _("no node has what the job asks for"),
            _NEVER,
            _("ask for what the nodes have (python -m course site show)"),
        ),
        "PartitionConfig": (  # in Slurm 22 also for a moment, before a job's more precise reason
            _("the partition, as it is set up now, cannot give what the job asks for"),
            _WAIT,
            _("check its -q and -l against python -m course site show"),
        ),
        "InvalidAccount": (
            _("the job's account is not valid here"),
            _NEVER,
            _("check the site profile"),
        ),
        "InvalidQOS": (_("the job's QOS is not valid here"), _NEVER, _("check the site profile")),
        "ReqNodeNotAvail": (
            # TRANSLATORS: {nodes} is empty or ": " and the nodes with their state, ": n1 drained"
            _("nodes it needs are not available{nodes}"),
            _WAIT,
            _ask_instructor(),
        ),
        "NodeDown": (
            # TRANSLATORS: {nodes} is empty or ": " and the nodes with their state, ": n1 down"
            _("nodes it needs are down{nodes}"),
            _WAIT,
            _ask_instructor(),
        ),
        "PartitionDown": (_("the partition is down"), _WAIT, _ask_instructor()),
        "PartitionInactive": (_("the partition is inactive"), _WAIT, _ask_instructor()),
        "JobHeldUser": (
            _("it is held"),
            _WAIT,
            _("release it: scontrol release {number}"),
        ),
        "JobHeldAdmin": (_("an administrator holds it"), _WAIT, _("ask your instructor")),
        "Resources": (
            _("the nodes it asks for are busy"),
            _WAIT,
            _("it starts when they are free"),
        ),
        "Priority": (
            _("jobs of higher priority come first"),
            _WAIT,
            _("it starts when its turn comes"),
        ),
        "Dependency": (
            _("it waits for the jobs it depends on"),
            _WAIT,
            _("it starts when they end"),
        ),
        "BeginTime": (_("its start time has not come"), _WAIT, _("it starts then")),
    }


def _pbs_waits() -> list[tuple[re.Pattern, str, str]]:
    """PBS's comments "Not Running: <why>" for a wait: (pattern, what it means, what happens next),
    in the student's language; a pattern's named groups fill what it means."""
    return [
        # TRANSLATORS: {state} is PBS's word for the node's state, e.g. offline
        (_INELIGIBLE, _("a node it needs is {state}"), _ask_instructor()),
        (
            re.compile(r"Insufficient amount of (?:\w+ )?resource|too few free|free nodes"),
            _("the nodes it asks for are busy"),
            _("it starts when they are free"),
        ),
        (
            re.compile(r"reservation|top job"),
            _("jobs ahead of it come first"),
            _("it starts in its turn"),
        ),
        (
            re.compile(r"limit", re.I),
            _("you have as many jobs running as allowed"),
            _("it starts later"),
        ),
        (re.compile(r"Queue not started"), _("its queue is stopped"), _("ask your instructor")),
        (
            re.compile(r"held", re.I),
            _("it is held"),
            _("release it with qrls, or ask your instructor"),
        ),
    ]


@dataclass(frozen=True)
class Pending:
    """Why a job waits: the scheduler's words, what they mean, and what happens or what to do."""

    reason: str  # the scheduler's own words: Slurm's reason code, PBS's comment
    scheduler: str  # "Slurm" or "PBS"
    means: str
    next: str  # what happens next, or what to change
    never: bool  # the job cannot start as it is

    def says(self, job_id: str) -> str:
        """One line for the student."""
        if self.scheduler == "Slurm":
            said = _("Slurm reason {reason}").format(reason=self.reason)
            cancel = f"scancel {job_id.split('.')[0]}"
        else:
            said = _("PBS comment {reason}").format(reason=self.reason)
            cancel = f"qdel {job_id}"
        fields = dict(job=job_id, means=self.means, said=said, next=self.next, cancel=cancel)
        if self.never:
            # TRANSLATORS: {said} is the scheduler's reason ("Slurm reason Priority"); {next}
            # what to change; {cancel} the command that cancels the job
            return _(
                "job {job} is still pending: {means} ({said}); it will never start: cancel it "
                "({cancel}) and {next}"
            ).format(**fields)
        # TRANSLATORS: {said} is the scheduler's reason ("Slurm reason Priority"); {next} what
        # happens next
        return _("job {job} is still pending: {means} ({said}); {next}").format(**fields)


def slurm_reason(
    reason: str, number: str, partition_limit: str = "", asked: str = "", nodes: str = ""
) -> Pending | None:
    """What Slurm's reason for a pending job means; None for `None` (not yet looked at)."""
    code = "ReqNodeNotAvail" if reason.startswith(_NODES_UNAVAILABLE) else reason.split(",")[0]
    if code in ("", "None"):
        return None
    reasons = _slurm_reasons()
    if code.startswith(("QOS", "Assoc")) and code not in reasons:  # a limit on what is in use
        means, never = _("you have as many jobs or resources in use as allowed"), _WAIT
        what = _("it starts when some of them end")
    else:
        means, never, what = reasons.get(
            code, (_("Slurm has not started it yet"), _WAIT, _("it starts when Slurm allows"))
        )
    filled = means.format(
        limit=f" ({partition_limit})" if partition_limit else "",
        asked=f" ({asked})" if asked else "",
        nodes=f": {nodes}" if nodes else "",
    )
    return Pending(reason, "Slurm", filled, what.format(number=number), never)


def pbs_comment(comment: str) -> Pending | None:
    """What the comment PBS's scheduler put on a queued job means; None without one."""
    if not comment:
        return None
    if comment.startswith("Can Never Run"):
        fix = (
            _less_time()
            if "walltime" in comment
            else _("ask for what the site has (python -m course site show)")
        )
        return Pending(comment, "PBS", _("PBS says it can never run as it is"), fix, _NEVER)
    for pattern, means, what in _pbs_waits():
        found = pattern.search(comment)
        if found:
            return Pending(comment, "PBS", means.format(**found.groupdict()), what, _WAIT)
    return Pending(comment, "PBS", _("PBS has not started it"), _("it starts when it can"), _WAIT)


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
    return i18n.listed(
        f"{node} {state}" + (f" ({why})" if why and why != "none" else "")
        for node, state, why in lost
        if _NODE_STATES.search(state)
    )


def ask(job_id: str) -> Pending | None:
    """Why the job waits, as its scheduler says; None when it does not wait (it runs, or has
    ended) or no scheduler answers. Slurm where `squeue` is found, else PBS's `qstat -f -F
    json`."""
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
    job = accounting.qstat_job(_run("qstat", "-f", "-F", "json", job_id))
    if job.get("job_state") not in ("Q", "H", "W"):
        return None
    return pbs_comment(str(job.get("comment", "")))

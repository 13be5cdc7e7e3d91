"""The embedded scheduler: runs a job script on this machine the way PBS would.

Used by `python -m course submit` where there is no scheduler (the `local` site profile).
As with PBS: the script's #PBS resources are read and checked against this machine, the job
gets an id and PBS's variables (PBS_JOBID, PBS_O_WORKDIR, PBS_NODEFILE with one line per MPI
slot, ...), a copy of the script taken at submission runs, starting in $HOME, its walltime is
enforced, and stdout and stderr are joined into <name>.o<number> in the submit folder, as
`qsub -j oe` does. Unlike PBS, the job inherits the submitting environment (as Slurm does),
with this Python's folder first on PATH.

This module is the scheduler's client side: it submits (`start`), finds, waits for and cancels
(`python -m course cancel JOBID`) jobs. Each job runs under its own supervisor process
(course.cluster.supervisor), so that the walltime holds and the exit status is recorded even if the
submitting notebook goes away. The status file (state_dir()/jobs/N/status.json, written
atomically) records how and when the job ended.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from course import gpu, i18n
from course.cluster import pbs, procs
from course.cluster.diagnosis import how_ended
from course.contracts import jobend, joblog
from course.errors import JobError
from course.i18n import _

WALLTIME_EXIT = jobend.WALLTIME_EXIT
LOST_EXIT = jobend.LOST_EXIT
GRACE = 10.0  # seconds a job's processes get between SIGTERM and SIGKILL (PBS's kill_delay)


def state_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "state"
    )
    return Path(base) / "course-kit"


def _next_number() -> int:
    folder = state_dir()
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "job-counter", "a+") as counter:
        fcntl.flock(counter, fcntl.LOCK_EX)
        counter.seek(0)
        text = counter.read().strip()
        number = int(text) + 1 if text.isdigit() else 1
        counter.seek(0)
        counter.truncate()
        counter.write(str(number))
    return number


def utc_now() -> datetime:
    return datetime.now(UTC)


def read_record(path: Path) -> dict:
    """A job's JSON file (spec or status); {} where it is missing or half-written."""
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return {}


@dataclass
class LocalJob:
    number: int
    name: str
    log: Path
    status_file: Path
    supervisor: subprocess.Popen | None = field(default=None, repr=False, compare=False)

    @property
    def id(self) -> str:
        return f"{self.number}.local"

    def record(self) -> dict:
        """The scheduler's status file: {state: running, supervisor, watchdog, session, started_at}
        while the job runs; {state: ended, exit_status, says, started_at, ended_at, seconds} once it
        has ended."""
        return read_record(self.status_file)

    def exit_status(self) -> int | None:
        """The job's exit status once it has ended, else None."""
        return self.record().get("exit_status")

    def ended_at(self) -> datetime | None:
        """When the job ended, every process of it stopped (UTC); None while it runs."""
        ended = self.record().get("ended_at")
        return datetime.fromisoformat(ended) if ended else None

    def _lost(self) -> bool:
        """Whether no process is left to record the job's end: its supervisor and watchdog are
        gone."""
        if self.supervisor is not None and self.supervisor.poll() is None:
            return False
        record = self.record()
        pids = [record[key] for key in ("supervisor", "watchdog") if record.get(key)]
        if not pids:  # no record yet: only a supervisor that died before writing one is lost
            return self.supervisor is not None
        return not any(procs.alive(pid) for pid in pids)

    def wait(
        self,
        timeout: float | None = None,
        echo: Callable[[str], None] | None = None,
        poll: float = 0.5,
    ) -> int | None:
        """Wait for the end (None if `timeout` passes first); `echo` gets each new log line."""
        deadline = None if timeout is None else time.monotonic() + timeout
        offset = 0
        while True:
            status = self.exit_status()
            lost = status is None and self._lost() and self.exit_status() is None
            if echo and self.log.exists():
                with open(self.log, "rb") as f:
                    f.seek(offset)
                    chunk = f.read()
                done = status is not None or lost
                end = len(chunk) if done else chunk.rfind(b"\n") + 1  # whole lines until the end
                for line in chunk[:end].decode(errors="replace").splitlines():
                    echo(line)
                offset += end
            if status is not None:
                return status
            if lost:
                if echo:
                    echo(
                        _(
                            "course local scheduler: job {job} was lost (its supervisor ended "
                            "without a status)"
                        ).format(job=self.id)
                    )
                return LOST_EXIT
            if deadline is not None and time.monotonic() > deadline:
                return None
            time.sleep(poll)


def find(job_id: str) -> LocalJob:
    """A job of this machine's scheduler by its id (12.local, or 12); JobError when there is
    none."""
    number = joblog.job_number(job_id)
    if job_id != number and not job_id.endswith(".local"):
        raise JobError(
            _("{job} is a cluster's job, not one of this machine's").format(job=job_id),
            _(
                "cancel it with its scheduler's command: qdel {job} (PBS) or scancel {number} "
                "(Slurm)"
            ).format(job=job_id, number=number),
        )
    spec = read_record(state_dir() / "jobs" / number / "spec.json") if number.isdigit() else {}
    if not spec:
        raise JobError(
            _("no local job {job}").format(job=job_id),
            _(
                "this machine's jobs are in {folder}; use the id `python -m course submit` "
                "printed, e.g. 12.local"
            ).format(folder=state_dir() / "jobs"),
        )
    log = Path(spec["log"])
    return LocalJob(int(number), log.name.rsplit(".o", 1)[0], log, Path(spec["status"]))


def _is_supervisor(pid: int) -> bool:
    """Whether `pid` is a local scheduler's supervisor (and not another process that got its
    number)."""
    try:
        return b"course.cluster.supervisor" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except FileNotFoundError:
        return (
            procs.alive(pid) and not Path("/proc/self").exists()
        )  # no /proc here: trust the number
    except OSError:
        return False


def cancel(job_id: str, timeout: float = GRACE + 10) -> LocalJob:
    """Stop a local job and all its processes, as qdel does; returns it once it has ended."""
    job = find(job_id)
    deadline = time.monotonic() + timeout
    while (
        not job.record() and time.monotonic() < deadline
    ):  # submitted a moment ago: not yet started
        time.sleep(0.1)
    record = job.record()
    if "exit_status" in record:
        raise JobError(
            # TRANSLATORS: {ended} is how the job ended, e.g. "was cancelled"
            _("job {job} has already ended: it {ended}").format(
                job=job.id, ended=how_ended(record.get("says", "ended"))
            ),
            _("its log: {log}").format(log=job.log),
        )
    supervisor = record.get("supervisor")
    if supervisor and _is_supervisor(supervisor):
        os.kill(supervisor, signal.SIGTERM)
    if job.wait(max(deadline - time.monotonic(), 1.0)) is None:
        raise JobError(
            _("job {job} did not end within {timeout:.0f} s of being cancelled").format(
                job=job.id, timeout=timeout
            ),
            _("see which of its processes still run: {command}").format(
                command=f"ps -s {record.get('session')}"
            ),
        )
    return job


def main(argv: list[str]) -> int:
    """`python -m course cancel JOBID`: stop a job that runs on this machine (the local profile)."""
    import argparse

    parser = argparse.ArgumentParser(prog="course cancel", description=main.__doc__)
    parser.add_argument(
        "job", help=_("the job's id, as `course submit` printed it (e.g. 12.local)")
    )
    args = parser.parse_args(argv)
    job = cancel(args.job)
    # TRANSLATORS: {ended} is how the job ended, e.g. "was cancelled"
    print(
        _("job {job} {ended}; its log: {log}").format(
            job=job.id, ended=how_ended(job.record().get("says", "ended")), log=job.log
        )
    )
    return 0


def check_request(request: pbs.Request) -> list[str]:
    """Raise JobError for what this machine cannot give; return warnings for what it gives
    slowly."""
    if request.ngpus:
        found = gpu.visible_gpus()
        if found.count < request.ngpus:
            fields = dict(asked=request.ngpus, count=found.count, names=i18n.listed(found.names))
            raise JobError(
                _(
                    "this job asks for {asked} GPU(s) per node, and this machine has {count} "
                    "({names})"
                ).format(**fields)
                if found.count
                else _(
                    "this job asks for {asked} GPU(s) per node, and this machine has none"
                ).format(**fields),
                _(
                    "run it on a GPU node of a cluster (qsub there); every cell of the notebook "
                    "that needs no GPU still works here"
                ),
            )
    warnings = []
    cores = os.cpu_count() or 1
    if request.ranks > cores:
        warnings.append(
            _("{ranks} ranks on {cores} cores: they share cores, so each runs slower").format(
                ranks=request.ranks, cores=cores
            )
        )
    return warnings


def start(
    script: Path,
    options: Sequence[str] = (),
    workdir: Path | None = None,
    environment: dict[str, str] | None = None,
    resources: Sequence[str] = (),
) -> LocalJob:
    """Submit `script` to the embedded scheduler; returns at once (use .wait()). `resources`: the
    site's own `-l` resource names, allowed besides PBS's."""
    script = Path(script)
    workdir = Path(workdir or os.getcwd()).resolve()
    if not script.is_file():
        raise JobError(
            _("no job script {script}").format(script=script),
            _("submit from the folder that holds the notebooks and jobs/"),
        )
    request = pbs.read_request(script.read_text(encoding="utf-8"), options, resources)
    warnings = check_request(request)
    name = request.name or script.name
    number = _next_number()
    while (
        workdir / joblog.log_name(name, number)
    ).exists():  # the counter was reset: never overwrite an old job's log
        number = _next_number()
    job_dir = state_dir() / "jobs" / str(number)
    job_dir.mkdir(parents=True, exist_ok=True)
    shutil.copy(script, job_dir / script.name)  # PBS too runs the script as it was at submission
    nodefile = job_dir / "nodes"
    nodefile.write_text("localhost\n" * request.ranks)
    env = dict(os.environ if environment is None else environment)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.update(request.variables)
    env.update(
        {
            "PBS_JOBID": f"{number}.local",
            "PBS_JOBNAME": name,
            "PBS_O_WORKDIR": str(workdir),
            "PBS_NODEFILE": str(nodefile),
            "PBS_QUEUE": request.queue or "local",
            "PBS_O_HOST": socket.gethostname(),
            "PBS_ENVIRONMENT": "PBS_BATCH",
            "COURSE_SCHEDULER": "local",
        }
    )
    job = LocalJob(number, name, workdir / joblog.log_name(name, number), job_dir / "status.json")
    spec = {
        "script": str(job_dir / script.name),
        "log": str(job.log),
        "status": str(job.status_file),
        "walltime": request.walltime,
        "env": env,
        "warnings": warnings,
        "id": job.id,
    }
    (job_dir / "spec.json").write_text(json.dumps(spec))
    job.log.write_text("")
    job.supervisor = subprocess.Popen(
        [sys.executable, "-m", "course.cluster.supervisor", str(job_dir / "spec.json")],
        start_new_session=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=workdir,
    )
    return job

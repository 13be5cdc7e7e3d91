"""The embedded scheduler: runs a job script on this machine the way PBS would.

Used by `python -m course submit` where there is no scheduler (the `local` site profile).
As with PBS: the script's #PBS resources are read and checked against this machine, the job
gets an id and PBS's variables (PBS_JOBID, PBS_O_WORKDIR, PBS_NODEFILE with one line per MPI
slot, ...), a copy of the script taken at submission runs, starting in $HOME, its walltime is
enforced, and stdout and stderr are joined into <name>.o<number> in the submit folder, as
`qsub -j oe` does. Unlike PBS, the job inherits the submitting environment (as Slurm does),
with this Python's folder first on PATH.

A small supervisor process (``python -m course.cluster.localsched SPEC``) runs the job, so that the
walltime holds and the exit status is recorded even if the submitting notebook goes away.
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
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from course import gpu, joblog
from course.cluster import pbs
from course.errors import JobError
from course.fileio import atomic_file

WALLTIME_EXIT = 271  # what PBS reports for a job it killed (256 + SIGTERM)
LOST_EXIT = 1  # the job could not start, or its supervisor died before recording how it ended


def state_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
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

    def exit_status(self) -> int | None:
        """The job's exit status once it has ended, else None."""
        try:
            return json.loads(self.status_file.read_text())["exit_status"]
        except (OSError, ValueError, KeyError):
            return None

    def wait(self, timeout: float | None = None, echo: Callable[[str], None] | None = None,
             poll: float = 0.5) -> int | None:
        """Wait for the end (None if `timeout` passes first); `echo` gets each new log line."""
        deadline = None if timeout is None else time.monotonic() + timeout
        offset = 0
        while True:
            status = self.exit_status()
            if echo and self.log.exists():
                with open(self.log, "rb") as f:
                    f.seek(offset)
                    chunk = f.read()
                end = len(chunk) if status is not None else chunk.rfind(b"\n") + 1  # whole lines until the end
                for line in chunk[:end].decode(errors="replace").splitlines():
                    echo(line)
                offset += end
            if status is not None:
                return status
            if self.supervisor is not None and self.supervisor.poll() is not None and self.exit_status() is None:
                if echo:
                    echo(f"course local scheduler: job {self.id} was lost (its supervisor ended without a status)")
                return LOST_EXIT
            if deadline is not None and time.monotonic() > deadline:
                return None
            time.sleep(poll)


def check_request(request: pbs.Request) -> list[str]:
    """Raise JobError for what this machine cannot give; return warnings for what it gives slowly."""
    if request.ngpus:
        found = gpu.visible_gpus()
        if found.count < request.ngpus:
            have = f"{found.count} ({', '.join(found.names)})" if found.count else "none"
            raise JobError(
                f"this job asks for {request.ngpus} GPU(s) per node, and this machine has {have}",
                "run it on a GPU node of a cluster (qsub there); every cell of the notebook that needs "
                "no GPU still works here")
    warnings = []
    cores = os.cpu_count() or 1
    if request.ranks > cores:
        warnings.append(f"{request.ranks} ranks on {cores} cores: they share cores, so each runs slower")
    return warnings


def start(script: Path, options: list[str] = (), workdir: Path | None = None,
          environment: dict[str, str] | None = None) -> LocalJob:
    """Submit `script` to the embedded scheduler; returns at once (use .wait())."""
    script = Path(script)
    workdir = Path(workdir or os.getcwd()).resolve()
    if not script.is_file():
        raise JobError(f"no job script {script}", "submit from the folder that holds the notebooks and jobs/")
    request = pbs.read_request(script.read_text(), options)
    warnings = check_request(request)
    name = request.name or script.name
    number = _next_number()
    while (workdir / joblog.log_name(name, number)).exists():  # the counter was reset: never overwrite an old job's log
        number = _next_number()
    job_dir = state_dir() / "jobs" / str(number)
    job_dir.mkdir(parents=True, exist_ok=True)
    shutil.copy(script, job_dir / script.name)  # PBS too runs the script as it was at submission
    nodefile = job_dir / "nodes"
    nodefile.write_text("localhost\n" * request.ranks)
    env = dict(os.environ if environment is None else environment)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.update(request.variables)
    env.update({
        "PBS_JOBID": f"{number}.local", "PBS_JOBNAME": name, "PBS_O_WORKDIR": str(workdir),
        "PBS_NODEFILE": str(nodefile), "PBS_QUEUE": request.queue or "local", "PBS_O_HOST": socket.gethostname(),
        "PBS_ENVIRONMENT": "PBS_BATCH", "COURSE_SCHEDULER": "local",
    })
    job = LocalJob(number, name, workdir / joblog.log_name(name, number), job_dir / "status.json")
    spec = {"script": str(job_dir / script.name), "log": str(job.log), "status": str(job.status_file),
            "walltime": request.walltime, "env": env, "warnings": warnings, "id": job.id}
    (job_dir / "spec.json").write_text(json.dumps(spec))
    job.log.write_text("")
    job.supervisor = subprocess.Popen([sys.executable, "-m", "course.cluster.localsched", str(job_dir / "spec.json")],
                                      start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL, cwd=workdir)
    return job


def _kill_group(process: subprocess.Popen) -> None:
    for sig, grace in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(grace)
            return
        except subprocess.TimeoutExpired:
            continue


def supervise(spec_file: Path) -> int:
    """Run one job as its spec says; record the exit status (the supervisor process's body)."""
    spec = json.loads(Path(spec_file).read_text())
    home = spec["env"].get("HOME") or os.path.expanduser("~")
    started = time.time()
    status = LOST_EXIT  # unless the job runs and ends: a waiting student must never wait forever
    try:
        with open(spec["log"], "a", buffering=1) as log:
            for warning in spec["warnings"]:
                log.write(f"course local scheduler: {warning}\n")
            log.flush()
            try:
                process = subprocess.Popen(["bash", spec["script"]], cwd=home, env=spec["env"], stdout=log,
                                           stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                           start_new_session=True)
            except OSError as e:
                log.write(f"course local scheduler: the job could not start: {e}\n")
                return status
            try:
                status = process.wait(timeout=spec["walltime"])
            except subprocess.TimeoutExpired:
                _kill_group(process)
                log.write(joblog.walltime_notice(pbs.format_walltime(spec["walltime"])) + "\n")
                status = WALLTIME_EXIT
    finally:
        with atomic_file(Path(spec["status"]), "w") as f:
            json.dump({"id": spec["id"], "exit_status": status, "seconds": round(time.time() - started, 3)}, f)
    return status


if __name__ == "__main__":
    sys.exit(supervise(Path(sys.argv[1])))

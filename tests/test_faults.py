"""Jobs that tell the truth: killed, cancelled or broken jobs, driven through the real local
scheduler.

Each job runs under course.cluster.localsched's supervisor, as `python -m course submit` runs it;
the tests read /proc to check that no process of a job outlives it.
"""

from __future__ import annotations

import os
import re
import select
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from course import evidence
from course.cluster import localsched, mpi, procs, submit
from course.cluster.job import Job
from course.contracts import jobend, joblog, results, stages
from course.errors import JobError
from course.instructor import scoring
from course.notebook.checks import CheckFailed
from tests.helpers import PYTHON, ROOT, default_stop_signals, student_folder, until
from tests.mpi_helpers import RANK_ABORTS, other_mpi_launcher, submit_stage_3

HEAD = (
    "#!/bin/bash\n#PBS -l walltime={walltime}\nset -eo pipefail\n"
    'cd "$PBS_O_WORKDIR"\nsource jobs/site_env.sh\n'
)


@pytest.fixture
def folder(tmp_path, monkeypatch) -> Path:
    """An assignment folder with the kit's jobs/site_env.sh, and a state folder of its own."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    work = tmp_path / "work"
    (work / "jobs").mkdir(parents=True)
    shutil.copy(ROOT / "jobs" / "site_env.sh", work / "jobs")
    return work


def submit_job(folder: Path, body: str, walltime: str = "00:01:00", name: str = "job.sh") -> Job:
    (folder / "jobs" / name).write_text(HEAD.format(walltime=walltime) + body)
    return submit.submit(f"jobs/{name}", scheduler="local", workdir=folder, echo=None)


def command_name(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def job_processes(job: Job) -> dict[int, str]:
    """{pid: name} of the job's running processes (its session's)."""
    session = job._local.record().get("session")
    return {pid: command_name(pid) for pid in procs.session_members(session)} if session else {}


def running(job: Job, sleeps: int) -> list[int]:
    """The job's processes, once `sleeps` sleep commands run among them."""

    def with_sleeps() -> list[int]:
        found = job_processes(job)
        return list(found) if list(found.values()).count("sleep") >= sleeps else []

    return until(with_sleeps, what=f"{sleeps} sleep(s) in the job")


def followed(job: Job) -> tuple[int, dict[int, str]]:
    """Wait for the job's end, noting each process of it seen on the way: (exit status, {pid:
    name})."""
    seen: dict[int, str] = {}

    def ended() -> bool:
        for pid, what in job_processes(job).items():
            seen.setdefault(pid, what)
        return job.exit_status() is not None

    until(ended, timeout=120, what="the job's end")
    return job.exit_status(), seen


def last_line(job: Job) -> str:
    return job.find_log().read_text().splitlines()[-1]


@pytest.mark.integration
def test_a_job_killed_at_its_walltime_fails_says_so_last_and_leaves_no_process(folder):
    # Long enough for a busy machine to start both sleeps before the walltime (each is seen).
    job = submit_job(folder, "sleep 60 &\nsleep 60\n", walltime="00:00:15")
    status, seen = followed(job)
    assert status == localsched.WALLTIME_EXIT
    assert list(seen.values()).count("sleep") == 2 and not [pid for pid in seen if procs.alive(pid)]
    text = job.find_log().read_text()
    assert last_line(job) == jobend.walltime_notice("00:00:15")
    assert (
        jobend.killed_line(job.id, "TERM", jobend.ended_at(text)) in text
    )  # the shell's own account
    assert job.exit_status() == jobend.exit_status(text) == localsched.WALLTIME_EXIT
    assert job._local.ended_at() >= jobend.ended_at(text)
    assert job.ending().says == "was killed at its walltime" and job.diagnosis().startswith(
        "the walltime ran out: submit the same job script again"
    )


@pytest.mark.integration
def test_sigterm_to_the_supervisor_stops_every_process_of_the_job(folder):
    job = submit_job(folder, "sleep 30 &\nsleep 30\n")
    members = running(job, sleeps=2)
    os.kill(job._local.record()["supervisor"], signal.SIGTERM)
    assert job.wait(timeout=30, echo=None) == 128 + signal.SIGTERM
    assert not [pid for pid in members if procs.alive(pid)]
    assert f"job {job.id} was cancelled" in last_line(job)
    assert job.ending().says == "was cancelled" and "qstat" not in job.diagnosis()


@pytest.mark.integration
def test_a_killed_supervisor_takes_its_job_along(folder):
    job = submit_job(folder, "sleep 30\n")
    members = running(job, sleeps=1)
    job._local.supervisor.kill()
    assert job.wait(timeout=30, echo=None) == localsched.LOST_EXIT
    assert not [pid for pid in members if procs.alive(pid)]
    assert f"job {job.id} was lost" in last_line(job) and job._local.ended_at() is not None
    assert "scheduler's process was killed" in job.diagnosis()


@pytest.mark.integration
def test_sigkill_to_course_launch_leaves_no_launcher_and_no_rank(tmp_path, mpi_env):
    env = {**mpi_env, "COURSE_MPIEXEC": "mpiexec -n {nprocs} --hostfile {hostfile}"}
    for variable in ("PBS_JOBID", "SLURM_JOB_ID"):  # one rank on this machine
        env.pop(variable, None)
    launch = subprocess.Popen(
        [PYTHON, "-m", "course", "launch", "--", "sleep", "60"],
        env=env,
        cwd=tmp_path,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:

        def with_rank() -> list[int]:
            members = procs.session_members(launch.pid)
            return members if "sleep" in map(command_name, members) else []

        members = until(with_rank, what="the rank's start")
        assert len(members) >= 3  # course launch, the MPI launcher, the rank
        launch.kill()
        launch.wait()
        assert until(
            lambda: not [pid for pid in members if procs.alive(pid)],
            what="the launcher's and rank's end",
        )
    finally:
        procs.end_session(launch.pid, grace=1)


@pytest.mark.integration
def test_a_bash_syntax_error_is_named_with_its_line(folder):
    job = submit_job(folder, "if true; then\n  echo one\nfi fi\n", name="syntax.sh")
    assert job.wait(timeout=30, echo=None) == 2
    assert job.diagnosis() == (
        "bash cannot read the job script: syntax error near unexpected token `fi' at line 8 "
        "of syntax.sh: fix that line (bash -n SCRIPT checks a script without running it)"
    )


@pytest.mark.integration
def test_a_missing_command_is_named_and_no_scheduler_command_is_suggested(folder):
    job = submit_job(folder, "echo starting\nmpiexecc -n 2 python train.py\n", name="missing.sh")
    lines = []
    assert job.wait(timeout=30, echo=lines.append) == 127
    assert lines[-2].startswith(f"[job {job.id} ended with exit status 127; log: ")
    assert lines[-1] == (
        "[what went wrong: line 7 of missing.sh runs `mpiexecc`, which is not found: fix the name, "
        "or load its module in the site profile's setup]"
    )


def test_a_misspelt_pbs_resource_is_refused_before_the_job_runs(folder):
    (folder / "jobs" / "typo.sh").write_text("#!/bin/bash\n#PBS -l selct=1:mpiprocs=2\ntouch ran\n")
    with pytest.raises(JobError) as caught:
        submit.submit("jobs/typo.sh", scheduler="local", workdir=folder, echo=None)
    assert caught.value.message == "#PBS -l selct=1:mpiprocs=2: unknown resource 'selct'"
    assert caught.value.hint.startswith("did you mean select?")
    assert not (folder / "ran").exists() and not (folder.parent / "home" / "ran").exists()


def read_until(stream, wanted: str, timeout: float = 20.0) -> None:
    """Read a child's unbuffered output line by line until the line `wanted`; fail after `timeout`
    seconds."""
    deadline = time.monotonic() + timeout
    while True:
        ready, _, _ = select.select([stream], [], [], max(deadline - time.monotonic(), 0))
        assert ready, f"no line {wanted!r} within {timeout} s"
        line = stream.readline()
        assert line, f"the output ended before {wanted!r}"
        if line.decode().strip() == wanted:
            return


@pytest.mark.integration
def test_ctrl_c_on_course_submit_says_how_to_cancel_and_course_cancel_stops_the_job(folder):
    (folder / "jobs" / "long.sh").write_text(
        HEAD.format(walltime="00:01:00") + "echo started\nsleep 30\n"
    )
    follow = subprocess.Popen(
        [PYTHON, "-m", "course", "submit", "jobs/long.sh"],
        cwd=folder,
        bufsize=0,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        preexec_fn=default_stop_signals,  # as a terminal starts it: Ctrl-C reaches it
    )
    read_until(follow.stdout, "started")  # echoed by Job.wait: it follows the log now
    follow.send_signal(signal.SIGINT)
    said = follow.communicate(timeout=30)[0].decode()
    assert follow.returncode == 130, said
    assert "it goes on running" in said and "to cancel it: python -m course cancel 1.local" in said
    assert "[y/N]" not in said  # nobody at a terminal to answer
    run = subprocess.run(
        [PYTHON, "-m", "course", "cancel", "1.local"], cwd=folder, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("job 1.local was cancelled; its log: ")
    log = joblog.find(folder, "1.local")
    assert "job 1.local was cancelled" in log.read_text().splitlines()[-1]
    again = subprocess.run(
        [PYTHON, "-m", "course", "cancel", "1.local"], cwd=folder, capture_output=True, text=True
    )
    assert again.returncode == 2 and "has already ended: it was cancelled" in again.stderr


def test_cancel_names_the_right_command_for_a_clusters_job(folder):
    with pytest.raises(JobError) as caught:
        localsched.cancel("4242.pbs01")
    assert "qdel 4242.pbs01" in caught.value.hint and "scancel 4242" in caught.value.hint


@pytest.mark.integration
def test_ranks_another_mpis_launcher_starts_alone_stop_at_once_and_nobody_is_accused(
    quick_env, tmp_path
):
    # The site's launcher template names another MPI's mpiexec: it starts the 2 copies of stage 3
    # each alone, "rank 0 of 1", which would both train into the job's one run folder.
    folder = student_folder(tmp_path, "student", stages.MULTI_NODE.name)
    launcher = other_mpi_launcher(tmp_path)
    site_env = folder / "jobs" / "site_env.sh"
    site_env.write_text(
        re.sub(
            r"^export COURSE_MPIEXEC=.*$",
            f"export COURSE_MPIEXEC='{launcher} -n {{nprocs}} --hostfile {{hostfile}}'",
            site_env.read_text(),
            flags=re.M,
        )
    )
    job = submit_stage_3(folder, quick_env, quick_env["COURSE_TRAIN_ARGS"])
    log = job.find_log().read_text()
    assert job.exit_status() != 0, log
    # Every copy stopped, naming the launcher that ran and the one the kit needs.
    needed = mpi.mpiexec()
    stopped = [m.groupdict() for m in joblog.WRONG_LAUNCHER.finditer(log)]
    assert stopped == [{"ran": str(launcher), "needed": needed, "launched": "2", "size": "1"}] * 2
    assert job.diagnosis().startswith(
        f"{launcher} is another MPI's launcher: it started each rank alone (an MPI world of 1, "
        "not one of the 2 ranks course launch started), so they stopped before training; "
        f"the kit needs {needed}"
    )
    # Nothing trained, nothing counts, and grading says there is no run: no "the log was edited".
    assert joblog.throughputs(log) == [] and not list(folder.glob(f"runs/*/{results.FILENAME}"))
    assert evidence.runs(stages.MULTI_NODE.name, folder) == []
    with pytest.raises(CheckFailed) as caught:
        scoring.grade_run(stages.MULTI_NODE.name, 1.0, folder)
    assert f"there is no {stages.MULTI_NODE.name} run" in str(caught.value)
    assert "edited" not in str(caught.value)


@pytest.mark.integration
def test_slurms_mpiexec_as_the_sites_launcher_is_named_as_the_cause(folder):
    slurm = Path("/usr/bin/mpiexec.slurm")  # Debian's slurm-wlm-torque: an srun wrapper
    if not slurm.is_file():
        pytest.skip("Slurm's mpiexec wrapper is not installed (apt-get install slurm-wlm-torque)")
    site_env = folder / "jobs" / "site_env.sh"
    site_env.write_text(
        re.sub(
            r"^export COURSE_MPIEXEC=.*$",
            f"export COURSE_MPIEXEC='{slurm} -n {{nprocs}} --hostfile {{hostfile}}'",
            site_env.read_text(),
            flags=re.M,
        )
    )
    job = submit_job(folder, "python -m course launch -- python -c pass\n", name="launch.sh")
    assert job.wait(timeout=60, echo=None) == 2
    assert "Unknown option: hostfile" in job.find_log().read_text()
    assert job.diagnosis().startswith(
        f"{slurm} does not know the option hostfile of the site's launcher template: it is "
        "another MPI's launcher (Slurm's mpiexec wrapper is one); the kit needs the mpiexec of "
        "the MPI mpi4py uses: python -m course doctor says which"
    )


@pytest.mark.integration
def test_a_rank_abort_leaves_an_end_line_the_kit_reads(folder):
    """prterun ends its MPI_Abort report with a NUL byte and no newline, before the end line."""
    (folder / "abort.py").write_text(RANK_ABORTS)
    (folder / "jobs" / "abort.sh").write_text(
        HEAD.format(walltime="00:05:00") + f"{PYTHON} -m course launch -- {PYTHON} abort.py\n"
    )
    job = submit.submit("jobs/abort.sh", per_node=2, scheduler="local", workdir=folder, echo=None)
    assert job.wait(timeout=300, echo=None) == 1
    text = job.find_log().read_text()
    # prterun's NUL, when it writes one (not on every run: test_joblog_end has the case itself),
    # is on a line of its own
    assert text.count("\x00") == text.count("\x00\n"), text[-300:]
    assert last_line(job) == jobend.end_line(job.id, 1, jobend.ended_at(text)), text[-300:]
    assert job.ending().says == "ended with exit status 1"
    assert job.diagnosis().startswith("RuntimeError: rank 1 fails on purpose")

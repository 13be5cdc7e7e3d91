"""How a job ended, as its log tells: the job shell's end lines, the schedulers' notices, and the
diagnosis of a failed job read from its log (course.contracts.joblog,
course.cluster.diagnosis.explain)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from course.cluster import procs
from course.cluster.diagnosis import explain
from course.contracts import jobend, joblog

AT = datetime(2024, 5, 1, 10, 0, 0, tzinfo=UTC)
SLURM_CANCEL = "slurmstepd: error: *** JOB 7 ON n1 CANCELLED AT 2024-05-01T10:00:00 ***"


def test_end_lines_round_trip_with_their_time():
    assert (
        jobend.end_line("7.x", 3, AT)
        == "course: job 7.x ended with exit status 3 at 2024-05-01T10:00:00Z"
    )
    log = f"training\n{jobend.killed_line('7.x', 'TERM', AT)}\n"
    assert jobend.end(log) == jobend.End(143, "signal", "was killed by SIGTERM", AT)
    assert jobend.ended_at(log) == AT and jobend.exit_status(log) == 143
    # Open MPI's launcher ends its MPI_ABORT notice with a NUL byte, before the end line
    aborted = f"  Errorcode: 124\n---\n\x00{jobend.end_line('7.x', 124, AT)}\n"
    assert jobend.end(aborted) == jobend.End(124, "exit", "ended with exit status 124", AT)
    # the job shell always writes the time: a line without one is no end line
    assert jobend.end("course: job 7.x ended with exit status 0\n") is None


@pytest.mark.parametrize(
    "notice,status,kind",
    [
        (jobend.walltime_notice("00:30:00"), jobend.WALLTIME_EXIT, "walltime"),
        (jobend.cancel_notice("7.local", "INT", AT), 128 + signal.SIGINT, "cancelled"),
        (jobend.lost_notice("7.local", AT), jobend.LOST_EXIT, "lost"),
        (SLURM_CANCEL, 128 + signal.SIGTERM, "cancelled"),
        ("=>> PBS: job killed: mem 8gb exceeded limit 4gb", 128 + signal.SIGKILL, "killed"),
    ],
)
def test_a_schedulers_kill_notice_wins_over_an_end_line_that_says_0(notice, status, kind):
    for log in (
        f"{jobend.end_line('7', 0, AT)}\n{notice}\n",
        f"{notice}\n{jobend.end_line('7', 0, AT)}\n",
    ):
        found = jobend.end(log)
        assert (found.status, found.kind) == (status, kind) and jobend.exit_status(log) == status


def test_what_outlived_the_job_is_cut_off_and_the_end_time_is_the_last_one():
    later = AT + timedelta(seconds=5)
    log = (
        f"{jobend.end_line('7.local', 0, AT)}\nrerun\n"
        f"{jobend.killed_line('7.local', 'TERM', later)}\n"
        f"{jobend.walltime_notice('00:00:02')}\nThroughput: 9.00 [images/sec.]\n"
    )
    assert jobend.ended_at(log) == later
    assert jobend.until_end(log) == log[: log.index("Throughput")]
    assert joblog.throughputs(jobend.until_end(log)) == []
    assert jobend.until_end("epoch 1\n") == "epoch 1\n"  # still running: all of it


def _bash(script: str, env: dict | None = None, **kwargs) -> subprocess.Popen:
    clean = {k: v for k, v in os.environ.items() if k not in ("PBS_JOBID", "SLURM_JOB_ID")}
    return subprocess.Popen(
        ["bash", "-c", f"PBS_JOBID=9.x\n{jobend.END_TRAP}\n{script}"],
        text=True,
        env={**clean, **(env or {})},
        stdout=subprocess.PIPE,
        start_new_session=True,
        **kwargs,
    )


def _command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _members(shell: subprocess.Popen, count: int) -> list[int]:
    """The shell's session once `count` processes are in it and its children run their programs:
    a child signalled between fork and exec still has the shell's traps, and would write an end
    line of its own."""
    deadline = time.monotonic() + 30
    while True:
        members = procs.session_members(shell.pid)
        children = [pid for pid in members if pid != shell.pid]
        if len(members) >= count and all(_command(pid) == "sleep" for pid in children):
            return members
        assert time.monotonic() < deadline, "the shell's children did not start"
        time.sleep(0.02)


@pytest.mark.parametrize("name", ["TERM", "INT", "HUP"])
def test_a_job_shell_stopped_by_a_signal_says_so_and_dies_of_it(name):
    shell = _bash("echo started\nsleep 30\necho never")
    members = _members(shell, 2)
    os.killpg(shell.pid, getattr(signal, f"SIG{name}"))  # as schedulers signal a job: all of it
    out, _ = shell.communicate(timeout=30)
    assert shell.returncode == -getattr(signal, f"SIG{name}")  # the scheduler sees the signal too
    assert out.splitlines()[0] == "started" and "never" not in out
    assert jobend.end(out).says == f"was killed by SIG{name}" and len(out.splitlines()) == 2
    assert not [pid for pid in members if procs.alive(pid)]


def test_a_signal_to_the_shell_alone_reaches_its_background_children():
    shell = _bash("sleep 30 &\nwait")
    _, child = sorted(_members(shell, 2))
    shell.send_signal(signal.SIGTERM)
    out, _ = shell.communicate(timeout=30)
    assert jobend.end(out).says == "was killed by SIGTERM"
    deadline = time.monotonic() + 30
    while procs.alive(child):
        assert time.monotonic() < deadline, "the background child outlived the shell"
        time.sleep(0.02)


PRTERUN_KILLED = """--------------------------------------------------------------------------
prterun noticed that process rank 1 with PID 4242 on node n1 exited on
signal 9 (Killed).
--------------------------------------------------------------------------
"""
PRTERUN_NO_PROGRAM = """prterun was unable to find the specified executable file, and therefore did
not launch the job.

   Node:       n1
   Executable: train_cifar_multi_nod.py
"""


@pytest.mark.parametrize(
    "log,cause",
    [
        (
            "course launch: mpiexec is not found\n  -> load the site's MPI module in the site "
            "profile's setup\n",
            "course launch: mpiexec is not found: load the site's MPI module in the site profile's "
            "setup",
        ),
        (
            PRTERUN_KILLED,
            "MPI rank 1 on n1 was killed by signal 9 (Killed): most often the node ran out of "
            "memory",
        ),
        (PRTERUN_NO_PROGRAM, "prterun could not find the program train_cifar_multi_nod.py"),
        (
            "Traceback ...\ncourse.errors.JobError: "
            + joblog.wrong_launcher("/usr/bin/mpiexec", "/v/bin/mpiexec", 2, 1)
            + "\n  -> the site profile's mpiexec must start /v/bin/mpiexec\n" * 2,
            "/usr/bin/mpiexec is another MPI's launcher: it started each rank alone (an MPI world "
            "of 1, not one of the 2 ranks course launch started), so they stopped before "
            "training; the kit needs /v/bin/mpiexec: set it as the site profile's mpiexec",
        ),
        (
            "course launch: /usr/bin/mpiexec -n 2 --hostfile /tmp/h python train.py\n"
            "Unknown option: hostfile\nUsage:\n    mpiexec.slurm args executable pgmargs\n",
            "/usr/bin/mpiexec does not know the option hostfile of the site's launcher template: "
            "it is another MPI's launcher (Slurm's mpiexec wrapper is one)",
        ),
        ("Unknown option: verbose\n", "a command of the job does not know the option verbose"),
        (
            "course launch: /v/bin/srun -n 2 --hostfile /tmp/h python train.py\n"
            "srun: unrecognized option '--hostfile'\n",
            "/v/bin/srun does not know the option --hostfile of the site's launcher template",
        ),
        (
            "Traceback ...\nValueError: bad batch size\n",
            "ValueError: bad batch size (the traceback above it",
        ),
        (
            jobend.killed_line("9.local", "TERM", AT),
            "the job was killed by SIGTERM, sent from outside it (kill",
        ),
        (jobend.lost_notice("9.local", AT), "the local scheduler's process was killed"),
        (f"{jobend.end_line('9.local', 1, AT)}\n", "the log names no cause: read it from the top"),
        (  # the watchdog's line wins over what the abort and the end print after it
            f"{jobend.Hang(2, 1, 5, 37, 'stopped').format()}\nMPI_ABORT was invoked on rank 0\n"
            f"{jobend.end_line('9.local', 124, AT)}\n",
            "rank 1 of 2 made no training step for 5 minutes (last step at iteration 37): its "
            "process stopped running (stopped by a signal, or its node hangs); the watchdog ended "
            "the job rather than wait for its walltime: submit the job again",
        ),
        (
            f"{jobend.Hang(1, None, 10, 96, 'alone', 'read (data.py, line 3)').format()}\n"
            f"{jobend.walltime_notice('00:30:00')}\n",
            "the training made no step for 10 minutes (last step at iteration 96): it hung in read "
            "(data.py, line 3); the watchdog ended the job rather than wait for its walltime: look "
            "at what that line waits for",
        ),
    ],
)
def test_the_diagnosis_names_the_cause_the_log_shows(log, cause):
    said = explain(
        f"course launch: job 9.local (local); 2 slot(s) on 1 node(s): n1 x2\n{log}",
        "9.local",
        local=True,
    )
    assert said.startswith(cause)
    assert "qstat" not in said and "sacct" not in said


def test_only_a_clusters_job_without_a_cause_is_pointed_at_its_scheduler():
    said = explain(jobend.end_line("9.pbs01", 1, AT), "9.pbs01", local=False)
    assert "qstat -x -f 9.pbs01" in said and "sacct -j 9" in said
    assert "qdel or scancel" in explain(
        jobend.killed_line("9.pbs01", "TERM", AT), "9.pbs01", local=False
    )


@pytest.mark.parametrize(
    "hang",
    [
        jobend.Hang(2, 1, 0.5, 37, "stopped"),
        jobend.Hang(4, 3, 10, 0, "stuck", "get_example (train.py, line 4), from main (train.py, l"),
        jobend.Hang(1, None, 1, 96, "alone", "read (data.py, line 3)"),
        jobend.Hang(3, None, 10, 12, "waiting"),
    ],
)
def test_the_watchdogs_line_round_trips(hang):
    assert jobend.hangs(f"epoch 1\n{hang.format()}\n{jobend.end_line('9.x', 124, AT)}\n") == [hang]


def test_the_watchdogs_line_reads_as_a_sentence():
    assert jobend.Hang(2, 1, 5, 37, "stopped").format() == (
        "course: watchdog: rank 1 of 2 made no training step for 5 minutes (last step at "
        "iteration 37): its process stopped running (stopped by a signal, or its node hangs); the "
        "job was ended"
    )
    assert (
        jobend.Hang(3, None, 1, 12, "waiting")
        .format()
        .startswith("course: watchdog: no rank of 3 made a training step for 1 minute ")
    )

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

from course.cluster import accounting, procs
from course.cluster.diagnosis import explain
from course.cluster.job import Job
from course.contracts import jobend, joblog
from tests.helpers import default_stop_signals

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
        preexec_fn=default_stop_signals,  # as a scheduler starts a job shell
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


# --- a stray byte before the end line, and a job Slurm reran -------------------------------------

# Recorded on tests/slurm_cluster.py's cluster (Slurm 22.05, the pinned Open MPI 5): the tail of a
# job whose `course launch` ran two ranks, rank 1 raising. prterun ends its report with a NUL byte
# and no newline, so the job shell's end line used to follow it on the same line.
PRTERUN_ABORT = (
    "RuntimeError: rank 1 fails on purpose\n"
    "--------------------------------------------------------------------------\n"
    "prterun has exited due to process rank 1 with PID 0 on node vm calling\n"
    '"abort". This may have caused other processes in the application to be\n'
    "terminated by signals sent by prterun (as reported here).\n"
    "--------------------------------------------------------------------------\n"
    "\x00course: job 4 ended with exit status 1 at 2026-11-25T00:54:15Z\n"
)
# Recorded there too: a stage-1 job requeued with `scontrol requeue` (its output appended, as the
# kit's Slurm jobs ask), then run again to its end; the epochs' table is left out.
HEADER = (
    "course: run single_gpu | job 1 (slurm) | 1 worker(s) on vm: @numpy | batch 32 per worker, "
    "32 total | lr 0.05 (warmup) | seed 0\n"
)
REQUEUE_NOTICE = (
    "slurmstepd-localhost: error: *** JOB 1 ON localhost CANCELLED AT 2026-11-25T01:07:20 DUE TO "
    "JOB REQUEUE ***\n"
)
NODE_FAILURE_NOTICE = (
    "slurmstepd-localhost: error: *** JOB 1 ON localhost CANCELLED AT 2026-11-25T00:52:42 DUE TO "
    "NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS ***\n"
)
FIRST_ATTEMPT = (
    f"{HEADER}{REQUEUE_NOTICE}Terminated\n"
    "course: job 1 was killed by SIGTERM at 2026-11-25T01:07:20Z\n"
)
RERUN_END = datetime(2026, 11, 25, 1, 8, 36, tzinfo=UTC)
RERUN = (
    "course: job 1 attempt 2 started at 2026-11-25T01:07:21Z\n"
    f"{HEADER}"
    "Throughput: 122.44 [images/sec.] over 247 steady iterations (warm-up 2, 7 left out after "
    "epoch ends)\n"
    "course: results runs/single_gpu-1-attempt2/results.json sha256=" + "d" * 64 + "\n"
    "course: job 1 ended with exit status 0 at 2026-11-25T01:08:36Z\n"
)


def test_a_nul_byte_before_the_end_line_hides_it_from_no_reader(tmp_path):
    (tmp_path / "run_multi_node_training.sh.o4").write_text(PRTERUN_ABORT)
    job = Job("4", tmp_path, "qsub")
    assert job.exit_status() == 1 and job.ending().says == "ended with exit status 1"
    assert job.diagnosis().startswith("RuntimeError: rank 1 fails on purpose")


@pytest.mark.parametrize(
    "printed,before",  # printf's format, what it writes
    [(r"abort report\0", "abort report\x00\n"), (r"done\n", "done\n"), ("", "")],
)
def test_the_end_line_starts_a_line_of_its_own(tmp_path, printed, before):
    log = tmp_path / "job.o9"
    with log.open("w") as out:
        run = subprocess.run(
            ["bash", "-c", f'PBS_JOBID=9.x\n{jobend.END_TRAP}\nprintf "$0"; exit 3', printed],
            stdout=out,
            env={k: v for k, v in os.environ.items() if k not in ("PBS_JOBID", "SLURM_JOB_ID")},
        )
    assert run.returncode == 3
    text = log.read_text()
    assert text == f"{before}{jobend.end_line('9.x', 3, jobend.ended_at(text))}\n"


def test_a_log_slurm_reran_into_holds_each_attempt_and_the_last_one_counts():
    log = FIRST_ATTEMPT + RERUN
    assert jobend.attempts(log) == [(1, FIRST_ATTEMPT), (2, RERUN)]
    assert jobend.attempt(log, 2) == RERUN and jobend.attempt(log, 3) is None
    assert jobend.end(log) == jobend.End(0, "exit", "ended with exit status 0", RERUN_END)
    assert jobend.ended_at(log) == RERUN_END and not jobend.killed_by_scheduler(log)
    assert jobend.end(FIRST_ATTEMPT).kind == "requeued"
    assert jobend.attempt_line("1", 2, datetime(2026, 11, 25, 1, 7, 21, tzinfo=UTC)) in RERUN


@pytest.mark.parametrize(
    "notice,cause",
    [
        (
            REQUEUE_NOTICE,
            "the job was requeued (scontrol requeue, by an administrator): Slurm runs",
        ),
        (NODE_FAILURE_NOTICE, "a node of the job failed: Slurm runs it again by itself"),
    ],
)
def test_a_job_slurm_requeued_is_not_to_be_submitted_again(notice, cause):
    """Before the rerun starts the log ends with the requeue; the rerun then shows its own end."""
    stopped = f"{HEADER}{notice}Terminated\ncourse: job 1 was killed by SIGTERM at {AT:%FT%TZ}\n"
    said = explain(stopped, "1", local=False)
    assert said.startswith(cause) and "squeue -j 1" in said, said
    assert explain(stopped + RERUN.replace("status 0", "status 1"), "1", local=False).startswith(
        "the log names no cause"
    )  # the last attempt's own end counts, not the requeue before it


def test_slurms_count_of_reruns_is_read_from_scontrol():
    # Real output of `scontrol show job -o 1` on tests/slurm_cluster.py's cluster, just requeued.
    held = (
        "JobId=1 JobName=job2.sh UserId=root(0) GroupId=root(0) MCS_label=N/A Priority=1 Nice=0 "
        "Account=(null) QOS=(null) JobState=PENDING Reason=BeginTime Dependency=(null) Requeue=1 "
        "Restarts=1 BatchFlag=1 Reboot=0 ExitCode=0:0 RunTime=00:00:00 TimeLimit=00:05:00\n"
    )
    assert accounting.parse_restarts(held) == ("PENDING", 1)
    assert "PENDING" in accounting.RERUNNING and "COMPLETED" not in accounting.RERUNNING
    assert accounting.parse_restarts("slurm_load_jobs error: Invalid job id specified\n") is None

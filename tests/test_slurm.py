"""The course's job scripts under a real Slurm scheduler, submitted with `qsub -j oe` as students
do."""

from __future__ import annotations

import re
import shutil
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from course import evidence, paths
from course.cluster import sites, submit
from course.contracts import jobend, joblog, results
from tests import slurm_cluster
from tests.helpers import PYTHON, ROOT, student_folder
from tests.mpi_helpers import RANK_ABORTS, check_benchmark_job

pytestmark = [pytest.mark.slurm, pytest.mark.slow]


@pytest.fixture
def assignment(solved_assignment, tmp_path):
    """The solved assignment, its job scripts set up for the Slurm cluster, its job outputs
    removed."""
    return slurm_cluster.assignment(solved_assignment, tmp_path / paths.ASSIGNMENT)


def test_stage1_job_submitted_with_qsub(cluster, assignment, quick_env):
    job = cluster.qsub(assignment, quick_env, "jobs/run_single_gpu_training.sh")
    assert job.find_log().name == f"run_single_gpu_training.sh.o{job.number}"  # as -j oe names it
    [run_] = evidence.runs("single_gpu", assignment)
    assert run_.traced, run_.problems
    assert run_.record["job"] == {
        "id": job.id,
        "scheduler": "slurm",
        "name": "run_single_gpu_training.sh",
    }


def test_stage3_job_through_course_submit_with_mpi_ranks(cluster, assignment, quick_env):
    env = cluster.env(quick_env)
    run = subprocess.run(
        [
            PYTHON,
            "-m",
            "course",
            "submit",
            "jobs/run_multi_node_training.sh",
            "-l",
            "select=1:mpiprocs=2",
            "-v",
            "ALLREDUCE=ring",
        ],
        cwd=assignment,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "2 slot(s) on 1 node(s): localhost x2" in run.stdout
    [run_] = evidence.runs("multi_node", assignment)
    assert run_.traced, run_.problems
    assert (run_.workers, run_.setting, run_.record["job"]["scheduler"]) == (
        2,
        "naive/ring",
        "slurm",
    )


def test_a_request_the_cluster_cannot_meet_is_refused_at_submission(cluster, assignment, quick_env):
    run = subprocess.run(
        [PYTHON, "-m", "course", "submit", "jobs/run_multi_gpu_training.sh"],
        cwd=assignment,
        env=cluster.env(quick_env),
        capture_output=True,
        text=True,
    )
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert "qsub refused" in run.stderr and "Invalid generic resource" in run.stderr


@pytest.mark.extended  # the same on PBS (test_pbs_server.py), in seconds
@pytest.mark.timeout(3000)  # a job per minute of training: a busy machine needs more of them
def test_a_job_killed_at_its_walltime_is_continued_by_the_next_from_its_snapshot(
    cluster, assignment, quick_env
):
    """Slurm's time limits have a resolution of a minute and are enforced within about 30 s of it:
    the run takes about two minutes on an idle machine, so that the first job ends at its one-minute
    walltime part-way. Jobs are submitted until the run is complete, as a student would: on a busy
    machine that takes more of them (at load 8, eight), so the test asks only that each job moves
    the run on from its predecessor's snapshot."""
    env = cluster.env(
        {
            **quick_env,
            "COURSE_TRAIN_ARGS": "--model vgg --width 8 --batchsize 32 --epoch 32 --warmup 2",
        }
    )
    jobs: list[submit.Job] = []
    resumed_at: list[int] = []  # the iteration each job after the first resumed from
    while len(resumed_at) < 3 or resumed_at[-3] < resumed_at[-1]:  # stalled: say so below
        run = subprocess.run(
            ["qsub", "-j", "oe", "-l", "walltime=00:01:00", "jobs/run_single_gpu_training.sh"],
            cwd=assignment,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        jobs.append(submit.Job(run.stdout.strip(), assignment, "qsub"))
        jobs[-1].wait(timeout=600, echo=None, poll=2)
        text = jobs[-1].find_log().read_text()
        if len(jobs) > 1:
            resumed_at += [said["iteration"] for said in joblog.resumptions(text)]
            assert len(resumed_at) == len(jobs) - 1, text  # every later job resumed the run
        if any(results.load(path).get("complete") for path in results.find(assignment)):
            break  # its job may still have been killed at the walltime while the run ended
        assert (
            "DUE TO TIME LIMIT" in text and jobs[-1].ending().says == "was killed at its walltime"
        ), text
    else:
        pytest.fail(
            f"three jobs in a row did not move the run on (resumed at {resumed_at}): a job's "
            "minute no longer holds an epoch and its snapshot on this machine"
        )
    assert len(jobs) >= 2, [job.find_log().read_text()[-600:] for job in jobs]
    [run_] = evidence.runs("single_gpu", assignment)
    # Every job's log's end too: a failure here once left no trace of why (issue 24's race).
    logs = [job.find_log().read_text()[-1500:] for job in jobs]
    if not run_.traced:  # whole, in the captured output: pytest shortens an assertion's message
        print(run_.problems, "complete:", run_.record.get("complete"), "job:", run_.record["job"])
        for job in jobs:
            print(f"--- {job.find_log()}\n{job.find_log().read_text()}")
    assert run_.traced, (run_.problems, run_.record.get("complete"), logs)
    # A job killed before its first snapshot leaves no segment: the next resumes where it did.
    starts = [0, *resumed_at]
    moved_on = [later > start for start, later in zip(starts, starts[1:])] + [True]
    assert [segment["job"]["id"] for segment in run_.segments] == [
        job.id for job, moved in zip(jobs, moved_on) if moved
    ], logs
    for job in jobs[1:]:
        [said] = joblog.resumptions(job.find_log().read_text())
        assert said["folder"].endswith(run_.path.parent.name) and said["iteration"] > 0
    assert [entry["epoch"] for entry in run_.record["log"]] == list(range(1, 33))


def test_the_allreduce_benchmark_job_submitted_with_qsub(cluster, tmp_path, quick_env):
    folder = tmp_path / "student"
    shutil.copytree(ROOT / "jobs", folder / "jobs")
    sites.apply(sites.load_profile("slurm-cpu"), folder / "jobs")
    run = subprocess.run(
        ["qsub", "-j", "oe", "-l", "select=1:mpiprocs=2", "jobs/run_allreduce_benchmark.sh"],
        cwd=folder,
        env=cluster.env({**quick_env, "ROUNDS": "2"}),
        capture_output=True,
        text=True,
        check=True,
    )
    job = submit.Job(run.stdout.strip(), folder, "qsub")
    assert job.wait(timeout=300, echo=None, poll=2) == 0, job.find_log().read_text()
    assert job.find_log().name == f"run_allreduce_benchmark.sh.o{job.number}"
    check_benchmark_job(folder, 2, job.find_log())
    assert {path.parent.name for path in folder.glob("runs/allreduce-*/*.json")} == {
        f"allreduce-{job.id}"
    }


class Following:
    """`python -m course submit ARGS` as a student runs it, its output read as it comes."""

    def __init__(self, folder: Path, env: dict[str, str], *args: str) -> None:
        self.lines: list[str] = []
        self._new_line = threading.Condition()
        self.process = subprocess.Popen(
            [PYTHON, "-m", "course", "submit", *args],
            cwd=folder,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout:
            with self._new_line:
                self.lines.append(line.rstrip("\n"))
                self._new_line.notify_all()

    def wait_for(self, words: str, timeout: float) -> str:
        """The first line with `words`, once it is printed (AssertionError after `timeout` s)."""

        def found() -> str | None:
            return next((line for line in self.lines if words in line), None)

        with self._new_line:
            line = self._new_line.wait_for(found, timeout)
        assert line, f"no line with {words!r} within {timeout} s: {self.lines}"
        return line

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()


def slurm(env: dict[str, str], *command: str) -> str:
    return subprocess.run(command, env=env, capture_output=True, text=True, check=True).stdout


@pytest.fixture
def short_job(tmp_path) -> Path:
    """A student's folder with the kit's jobs for this cluster and jobs/short.sh, a quick job."""
    folder = tmp_path / "student"
    shutil.copytree(ROOT / "jobs", folder / "jobs")
    sites.apply(sites.load_profile("slurm-cpu"), folder / "jobs")
    (folder / "jobs" / "short.sh").write_text("#!/bin/bash\n#PBS -l walltime=00:05:00\necho ran\n")
    return folder


def test_a_job_beyond_the_partitions_time_limit_is_said_never_to_start(
    cluster, short_job, quick_env
):
    """Issue 28: such a job stays PENDING (PartitionTimeLimit) for ever while the kit waited
    without a word. Now the follower says why, and ends once the student cancels the job."""
    env = cluster.env(quick_env)
    partition = f"PartitionName={slurm_cluster.PARTITION}"
    slurm(env, "scontrol", "update", partition, "MaxTime=1")  # one minute
    follow = Following(short_job, env, "jobs/short.sh")
    try:
        said = follow.wait_for("PartitionTimeLimit", timeout=300)
        number = re.search(r"submitted jobs/short.sh as job (\d+)", "\n".join(follow.lines))[1]
        assert said == (
            f"[job {number} is still pending: the partition's time limit (00:01:00) is below the "
            "walltime asked for (00:05:00) (Slurm reason PartitionTimeLimit); it will never "
            f"start: cancel it (scancel {number}) and ask for less time (-l walltime=HH:MM:SS)]"
        )
        slurm(env, "scancel", number)
        follow.wait_for("left the queue without a log", timeout=300)
        assert follow.process.wait(timeout=60) != 0
        waits = [line for line in follow.lines if "is still pending" in line]
        assert said in waits and len(set(waits)) == len(waits), waits  # each reason once
    finally:
        follow.stop()
        slurm(env, "scontrol", "update", partition, "MaxTime=INFINITE")


def test_a_job_waiting_for_a_drained_node_is_told_once_with_the_admins_reason(
    cluster, short_job, monkeypatch
):
    monkeypatch.chdir(short_job)
    env = cluster.env(dict(__import__("os").environ))
    slurm(env, "scontrol", "update", "NodeName=localhost", "State=DRAIN", "Reason=course-test")
    job = None
    try:
        said: list[str] = []
        job = submit.submit("jobs/short.sh", echo=said.append)
        # Ten polls of the scheduler, the node drained all along: each of its reasons said once
        # (Slurm 22 says ReqNodeNotAvail first, then "Nodes required for job are DOWN, ...").
        assert job.wait(timeout=10, echo=said.append, poll=1) is None
        waits = [line for line in said if "is still pending" in line]
        assert waits and len(set(waits)) == len(waits), said
        for line in waits:
            assert line.startswith(
                f"[job {job.id} is still pending: nodes it needs are not available: localhost "
                "drained (course-test) (Slurm reason "
            ) and line.endswith(
                "it starts when the nodes are back; if it waits long, tell your instructor]"
            ), line
    finally:
        if job is not None:
            slurm(env, "scancel", job.number)
        slurm(env, "scontrol", "update", "NodeName=localhost", "State=RESUME")
        deadline = time.monotonic() + 120
        while slurm(env, "sinfo", "-h", "-N", "-o", "%T").split() != ["idle"]:
            assert time.monotonic() < deadline, "the node did not come back"
            time.sleep(0.5)


def test_a_walltime_beyond_the_queues_maximum_is_refused_before_qsub(cluster, short_job, quick_env):
    text = (ROOT / "sites" / "slurm-cpu.toml").read_text()
    profile = short_job / "limits.toml"
    profile.write_text(
        text.replace(
            "gpus_per_node = 0", 'gpus_per_node = 0\nmax_walltime = { course = "00:40:00" }', 1
        )
    )
    (short_job / "jobs" / "short.sh").unlink()
    sites.apply(sites.load_profile(str(profile)), short_job / "jobs")
    (short_job / "jobs" / "short.sh").write_text(
        "#!/bin/bash\n#PBS -l walltime=00:05:00\necho ran\n"
    )
    env = cluster.env(quick_env)
    run = subprocess.run(
        [PYTHON, "-m", "course", "submit", "-l", "walltime=01:00:00", "jobs/short.sh"],
        cwd=short_job,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stdout + run.stderr
    assert (
        "the job asks for walltime 01:00:00, more than queue course allows (00:40:00)" in run.stderr
    )
    assert "ask for at most -l walltime=00:40:00" in run.stderr
    assert slurm(env, "squeue", "-h", "-n", "short.sh") == ""  # nothing was queued


def test_a_rank_abort_under_slurm_ends_with_the_jobs_own_exit_status(cluster, tmp_path, quick_env):
    """prterun's MPI_Abort report ends with a NUL byte; the end line after it is still read."""
    folder = tmp_path / "student"
    shutil.copytree(ROOT / "jobs", folder / "jobs")
    sites.apply(sites.load_profile("slurm-cpu"), folder / "jobs")
    (folder / "abort.py").write_text(RANK_ABORTS)
    (folder / "jobs" / "abort.sh").write_text(
        "#!/bin/bash\n#PBS -l select=1:mpiprocs=2\nset -eo pipefail\n"
        'cd "$SLURM_SUBMIT_DIR"\nsource jobs/site_env.sh\n'
        "python -m course launch -- python abort.py\n"
    )
    job = cluster.start_qsub(folder, quick_env, "jobs/abort.sh")
    assert job.wait(timeout=300, echo=None, poll=1) == 1, job.find_log().read_text()[-400:]
    assert job.diagnosis().startswith("RuntimeError: rank 1 fails on purpose")


@pytest.mark.parametrize(
    "how", ["scontrol requeue", pytest.param("node down", marks=pytest.mark.extended)]
)
def test_a_job_slurm_reruns_keeps_each_attempts_output_and_the_kit_says_so(
    cluster, tmp_path, quick_env, how
):
    """An administrator requeues a running job, or its node goes DOWN: Slurm reruns it as the same
    job into the same log. The kit keeps following it and says so, and the log keeps both
    attempts."""
    folder = student_folder(tmp_path, "student")
    sites.apply(sites.load_profile("slurm-cpu"), folder / "jobs")
    args = "--model vgg --width 8 --batchsize 32 --epoch 3 --warmup 2"
    env = cluster.env({**quick_env, "COURSE_TRAIN_ARGS": args})
    job = cluster.start_qsub(
        folder, {**quick_env, "COURSE_TRAIN_ARGS": args}, "jobs/run_single_gpu_training.sh"
    )
    said: list[str] = []
    node = ["scontrol", "update", "nodename=localhost"]
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(job.wait, 900, said.append, 1)

        def until(condition, what: str) -> None:
            deadline = time.monotonic() + 600
            while not condition():
                assert time.monotonic() < deadline and not waiting.done(), (what, said)
                time.sleep(0.5)

        until(lambda: any(line.startswith("course: run ") for line in said), "the run started")
        if how == "node down":
            subprocess.run([*node, "state=down", "reason=test"], env=env, check=True)
        else:
            subprocess.run(["scontrol", "requeue", job.number], env=env, check=True)
        rerun = f"[the scheduler is rerunning job {job.id} (attempt 2);"
        until(lambda: any(line.startswith(rerun) for line in said), "the kit says Slurm reruns it")
        if how == "node down":  # ReturnToService=2 may have put it back already: then no error
            subprocess.run([*node, "state=resume"], env=env, capture_output=True)
        # Slurm holds a requeued job for about two minutes (BeginTime) before it runs it again.
        subprocess.run(
            ["scontrol", "update", f"jobid={job.number}", "starttime=now"], env=env, check=True
        )
        assert waiting.result(timeout=900) == 0, said
    text = job.log_text()
    assert [number for number, _ in jobend.attempts(text)] == [1, 2], text
    for number in (1, 2):
        [header] = joblog.run_headers(jobend.attempt(text, number) or "")
        assert header["job"] == job.id
    assert jobend.end(jobend.attempt(text, 1) or "").kind in ("requeued", "node_failed")
    assert said[-1].startswith(f"[job {job.id} ended with exit status 0 in attempt 2;"), said
    assert not any("submit it again" in line for line in said)
    runs = evidence.runs("single_gpu", folder)
    traced = [run_ for run_ in runs if run_.traced]
    assert [run_.record["job"].get("attempt") for run_ in traced] == [2], [r.problems for r in runs]

"""Job requests, the embedded local scheduler and `course submit`, with real processes."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from course.cluster import localsched, pbs, submit
from course.cluster.job import Job
from course.cluster.plan import comparison_plan, profile_plan
from course.cluster.siteenv import SiteSettings
from course.errors import JobError
from tests.helpers import PYTHON, ROOT

SCRIPT = """#!/bin/bash
# a test job
#PBS -l select=1:mpiprocs=3
#PBS -l walltime=00:05:00
#PBS -N probe
echo "id=$PBS_JOBID workdir=$PBS_O_WORKDIR pwd=$PWD queue=$PBS_QUEUE greeting=$GREETING"
cat "$PBS_NODEFILE" | wc -l
echo "to stderr" >&2
exit 3
#PBS -q ignored-after-the-first-command
"""


def test_directives_are_read_until_the_first_command():
    request = pbs.read_request(SCRIPT)
    assert (request.nodes, request.mpiprocs, request.walltime, request.name) == (1, 3, 300, "probe")
    assert request.queue is None


def test_command_line_options_win_over_directives():
    request = pbs.read_request(
        SCRIPT, ["-l", "select=2:mpiprocs=2:ngpus=2", "-v", "A=1,B=two", "-q", "h-short"]
    )
    assert (request.nodes, request.mpiprocs, request.ngpus, request.ranks) == (2, 2, 2, 4)
    assert request.variables == {"A": "1", "B": "two"} and request.queue == "h-short"


@pytest.mark.parametrize(
    "option,message",
    [
        ("-l select=two", "node count must come first"),
        ("-l walltime=1:xx", "not HH:MM:SS"),
        ("-Z 1", "unknown qsub option"),
        ("-v 1A=b", "not a variable name"),
        ("-l ngpus=abc", "ngpus must be a number"),
    ],
)
def test_bad_requests_say_what_is_wrong(option, message):
    with pytest.raises(JobError, match=message):
        pbs.read_request("#!/bin/bash\n", option.split())
    with pytest.raises(JobError, match="#PBS"):
        pbs.read_request(f"#!/bin/bash\n#PBS {option}\n")


@pytest.fixture
def state(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    return tmp_path


@pytest.mark.integration
def test_local_job_runs_like_pbs(state):
    workdir = state / "submit"
    workdir.mkdir()
    script = workdir / "job.sh"
    script.write_text(SCRIPT)
    job = localsched.start(script, ["-v", "GREETING=hello"], workdir)
    assert job.wait(timeout=60) == 3
    assert job.log == workdir / f"probe.o{job.number}"  # -N names the log, -j oe joins the streams
    text = job.log.read_text()
    assert (
        f"id={job.number}.local workdir={workdir} pwd={state / 'home'} queue=local greeting=hello"
        in text
    )
    assert "\n3\n" in text and "to stderr" in text  # three slots in the node file; stderr joined
    assert localsched.start(script, [], workdir).number == job.number + 1


@pytest.mark.integration
def test_walltime_is_enforced(state):
    script = state / "slow.sh"
    script.write_text(
        "#!/bin/bash\n#PBS -l walltime=00:00:02\necho started\nsleep 60\necho never\n"
    )
    job = localsched.start(script, [], state)
    assert job.wait(timeout=60) == localsched.WALLTIME_EXIT
    text = job.log.read_text()
    assert "started" in text and "never" not in text and "walltime 00:00:02 exceeded" in text


@pytest.mark.integration
def test_a_lost_job_ends_the_wait_and_a_reset_counter_keeps_old_logs(state):
    script = state / "job.sh"
    script.write_text("#!/bin/bash\nsleep 3\n")
    job = localsched.start(script, [], state)
    job.supervisor.kill()  # as if the machine killed the scheduler's process
    lines = []
    assert job.wait(timeout=30, echo=lines.append) == localsched.LOST_EXIT
    assert "was lost" in lines[-1]
    (
        localsched.state_dir() / "job-counter"
    ).unlink()  # e.g. a new home folder: numbering starts again
    job.log.write_text("the first job's log")
    again = localsched.start(script, [], state)
    assert again.number != job.number and job.log.read_text() == "the first job's log"
    assert again.wait(timeout=30) == 0


def test_a_gpu_request_this_machine_cannot_meet_is_refused_before_it_runs(state):
    script = state / "gpu.sh"
    script.write_text("#!/bin/bash\n#PBS -l ngpus=2\ntouch ran\n")
    with pytest.raises(JobError, match="asks for 2 GPU"):
        localsched.start(script, [], state)
    assert not (state / "home" / "ran").exists()


@pytest.mark.integration
def test_wait_echoes_the_log_and_explains_a_failure(state):
    script = state / "fail.sh"
    script.write_text(
        "#!/bin/bash\necho step one\npython3 -c 'raise ValueError(\"bad batch size\")'\n"
    )
    local = localsched.start(script, [], state)
    job = Job(local.id, state, "local", local.log, local)
    lines = []
    assert job.wait(echo=lines.append) == 1
    assert "step one" in lines
    assert (
        lines[-1]
        == "[what went wrong: ValueError: bad batch size (the traceback above it in the log shows "
        "where)]"
    )


@pytest.fixture
def assignment(tmp_path, monkeypatch):
    """A copy of the released assignment folder with its submit."""
    folder = tmp_path / "distributed_training"
    shutil.copytree(ROOT / "notebooks" / "distributed_training", folder)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    return folder


@pytest.mark.integration
def test_submit_refuses_missing_or_unfinished_training_scripts(assignment):
    with pytest.raises(JobError, match="does not exist yet"):
        submit.submit("jobs/run_single_gpu_training.sh", workdir=assignment, echo=None)
    (assignment / "train_cifar_single.py").write_text(
        "def make_iterators(train, test, batchsize):\n    # PUT YOUR CODE HERE\n    raise "
        "NotImplementedError()\n"
        "def main():\n    pass\n"
    )
    with pytest.raises(NotImplementedError, match="stubs in make_iterators"):
        submit.submit("jobs/run_single_gpu_training.sh", workdir=assignment, echo=None)
    (
        assignment / "train_cifar_single.py"
    ).write_text(  # the comment may stay above the student's code
        "def make_iterators(train, test, batchsize):\n    # PUT YOUR CODE HERE\n    return train, "
        "test\n"
        "def main():\n    raise SystemExit(3)\n\nmain()\n"
    )
    assert (
        submit.submit("jobs/run_single_gpu_training.sh", workdir=assignment, echo=None).wait() == 3
    )
    with pytest.raises(JobError, match="no job script"):
        submit.submit("jobs/nope.sh", workdir=assignment, echo=None)


def test_submit_is_a_no_op_under_nbgrader(assignment, monkeypatch):
    monkeypatch.setenv("NBGRADER_EXECUTION", "validate")
    assert submit.submit("jobs/run_single_gpu_training.sh", workdir=assignment, echo=None) is None


def test_qsub_options_and_the_sites_limits():
    settings = SiteSettings(
        select="{nodes}:mpiprocs={ranks_per_node}",
        queues=("h-regular", "h-tutorial"),
        gpus_per_node=2,
    )
    options = submit.qsub_options(
        settings, 2, 2, {"COMMUNICATOR": "pure_nccl", "ALLREDUCE": "ring"}
    )
    assert options == ["-l", "select=2:mpiprocs=2", "-v", "COMMUNICATOR=pure_nccl,ALLREDUCE=ring"]
    script = ROOT / "jobs" / "run_multi_node_training.sh"
    submit.check_site_request(script, options, settings)
    with pytest.raises(JobError, match="is not one of this site's"):
        submit.check_site_request(script, ["-q", "debug"], settings)
    with pytest.raises(JobError, match="nodes have 2 GPUs"):
        submit.check_site_request(script, ["-l", "select=1:mpiprocs=4"], settings)


def test_the_comparison_plan_follows_the_site_profile(assignment, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # the CPU plan, on a GPU workstation too
    plan = comparison_plan(assignment)
    assert [
        (r.nodes, r.per_node, r.communicator, r.allreduce, r.lr_rule, r.batch_per_worker)
        for r in plan
    ] == [
        (1, 1, "naive", "", "warmup", None),
        (1, 2, "naive", "", "warmup", None),
        (1, 2, "naive", "ring", "warmup", None),
        (1, 2, "naive", "", "constant", None),
        (1, 2, "naive", "", "linear", None),
        (1, 2, "naive", "", "constant", 32),
    ]  # strong scaling: the local profile's batch of 64 over 2 ranks
    assert (
        plan[2]
        .describe()
        .endswith(
            "qsub -j oe -l select=1:mpiprocs=2 -v COMMUNICATOR=naive,ALLREDUCE=ring,"
            "LR_RULE=warmup jobs/run_multi_node_training.sh"
        )
    )
    assert (
        plan[-1]
        .describe()
        .endswith(
            "-v COMMUNICATOR=naive,LR_RULE=constant,BATCHSIZE=32 jobs/run_multi_node_training.sh"
        )
    )
    profiled = profile_plan(
        assignment
    )  # one rank and the most, with the setting that names an algorithm
    assert [(r.nodes, r.per_node, r.allreduce, r.env.get("PROFILE")) for r in profiled] == [
        (1, 1, "ring", "1"),
        (1, 2, "ring", "1"),
    ]


@pytest.mark.integration
def test_course_submit_returns_the_jobs_exit_status(state):
    (state / "jobs").mkdir()
    shutil.copy(ROOT / "jobs" / "site_env.sh", state / "jobs")
    (state / "jobs" / "quick.sh").write_text(
        "#!/bin/bash\n#PBS -l walltime=00:01:00\n"
        'cd "$PBS_O_WORKDIR"\nsource jobs/site_env.sh\nexit 4\n'
    )
    run = subprocess.run(
        [PYTHON, "-m", "course", "submit", "jobs/quick.sh"],
        cwd=state,
        capture_output=True,
        text=True,
        env={**__import__("os").environ},
    )
    assert run.returncode == 4, run.stdout + run.stderr
    assert "ended with exit status 4" in run.stdout
    run = subprocess.run(
        [PYTHON, "-m", "course", "submit", "jobs/missing.sh"],
        cwd=state,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 2 and "Traceback" not in run.stderr and "no job script" in run.stderr


@pytest.mark.integration
def test_a_job_asking_for_missing_gpus_is_skipped_with_a_message_only_when_asked(
    state, monkeypatch
):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # no GPU, on a GPU workstation too
    monkeypatch.chdir(state)
    (state / "jobs").mkdir()
    shutil.copy(ROOT / "jobs" / "site_env.sh", state / "jobs")
    (state / "jobs" / "gpus.sh").write_text(
        "#!/bin/bash\n#PBS -l select=1:mpiprocs=1\n#PBS -l ngpus=2\nexit 0\n"
    )
    said = []
    assert (
        submit.submit("jobs/gpus.sh", skip_without_gpus=True, scheduler="local", echo=said.append)
        is None
    )
    assert said == [
        "NOT SUBMITTED: this machine has no GPU and jobs/gpus.sh asks for 2 GPU(s) per node, so "
        "its "
        "job cannot run here. Submit it on a GPU node of a cluster: qsub -j oe jobs/gpus.sh. The "
        "rest "
        "of this notebook runs here: read on."
    ]
    assert not list(state.glob("gpus.sh.o*")), "nothing ran"
    with pytest.raises(JobError, match="asks for 2 GPU"):  # without the flag: an error, as before
        submit.submit("jobs/gpus.sh", scheduler="local", echo=None)
    # A job that can run is submitted as usual, and its failure is still its exit status.
    (state / "jobs" / "fails.sh").write_text("#!/bin/bash\n#PBS -l walltime=00:01:00\nexit 4\n")
    job = submit.submit("jobs/fails.sh", skip_without_gpus=True, scheduler="local", echo=None)
    assert job.wait(timeout=60, echo=None) == 4


def test_job_scripts_name_no_absolute_paths():
    for script in (ROOT / "jobs").glob("*.sh"):
        text = script.read_text()
        assert "/work/" not in text and "/home/" not in text and Path.home().as_posix() not in text


def test_variables_for_slurm_are_taken_off_in_both_forms():
    # Slurm's qsub wrapper would turn -v into sbatch --export; submit moves them into the
    # environment.
    rest, variables = submit._split_variables(["-l", "select=1", "-v", "A=1", "-vB=2", "-N", "x"])
    assert rest == ["-l", "select=1", "-N", "x"]
    assert pbs.apply_options(variables).variables == {"A": "1", "B": "2"}


def test_waiting_on_qsub_ends_at_the_schedulers_kill_notice(tmp_path, monkeypatch):
    monkeypatch.setattr(
        "course.cluster.job.paths.find_program", lambda name, **kw: None
    )  # no qstat to ask
    log = tmp_path / "run_multi_node_training.sh.o42"
    log.write_text("epoch 1\n=>> PBS: job killed: walltime 00:30:05 exceeded limit 00:30:00\n")
    lines = []
    job = Job("42.pbs01", tmp_path, "qsub", log)
    assert job.wait(timeout=30, echo=lines.append, poll=0.1) == localsched.WALLTIME_EXIT
    assert lines[-2].startswith("[job 42.pbs01 was killed at its walltime (exit status 271)")
    assert "the walltime ran out" in lines[-1] and "qstat" not in lines[-1]

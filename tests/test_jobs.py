"""Job requests, the embedded local scheduler and `course submit`, with real processes."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
from pathlib import Path

import pytest

from course.cluster import accounting, localsched, pbs, pending, submit
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
        ("-l -N x", "option -l needs a value"),  # argparse: a value never begins with "-"
        ("-N x -l", "option -l needs a value"),
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


def job_script(state: Path, name: str, text: str) -> Path:
    """The job script `name` in `state`, holding `text`."""
    script = state / name
    script.write_text(text)
    return script


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
    script = job_script(
        state,
        "slow.sh",
        "#!/bin/bash\n#PBS -l walltime=00:00:02\necho started\nsleep 60\necho never\n",
    )
    job = localsched.start(script, [], state)
    assert job.wait(timeout=60) == localsched.WALLTIME_EXIT
    text = job.log.read_text()
    assert "started" in text and "never" not in text and "walltime 00:00:02 exceeded" in text


@pytest.mark.integration
def test_a_lost_job_ends_the_wait_and_a_reset_counter_keeps_old_logs(state):
    script = job_script(state, "job.sh", "#!/bin/bash\nsleep 3\n")
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
    script = job_script(state, "gpu.sh", "#!/bin/bash\n#PBS -l ngpus=2\ntouch ran\n")
    with pytest.raises(JobError, match="asks for 2 GPU"):
        localsched.start(script, [], state)
    assert not (state / "home" / "ran").exists()


@pytest.mark.integration
def test_wait_echoes_the_log_and_explains_a_failure(state):
    script = job_script(
        state,
        "fail.sh",
        "#!/bin/bash\necho step one\npython3 -c 'raise ValueError(\"bad batch size\")'\n",
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
        "its job cannot run here. The checks that grade this job's run (its speedup and "
        "efficiency) earn their points only once a run of it is in runs/: submit it from this "
        "folder on a GPU node of a cluster (qsub -j oe jobs/gpus.sh) before you hand in. The "
        "exercises and the rest of this notebook run here: read on."
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


def folder_with(state: Path, script: str, **settings) -> Path:
    """`state` as an assignment folder: jobs/site_env.sh of the kit (with `settings` changed), and
    jobs/job.sh holding `script`."""
    (state / "jobs").mkdir()
    applied = SiteSettings.read(ROOT / "jobs" / "site_env.sh")
    (state / "jobs" / "site_env.sh").write_text(dataclasses.replace(applied, **settings).to_shell())
    (state / "jobs" / "job.sh").write_text(script)
    return state


@pytest.mark.parametrize(
    "options,message,hint",
    [
        (
            [],
            "walltime=1:00 is 1 minute (PBS reads [[hours:]minutes:]seconds): too short for a "
            "training job, so it was not submitted",
            "for 1 hour write 01:00:00, for 1 minute 00:01:00",
        ),
        (  # minutes, as Slurm reads --time=90; PBS: seconds
            ["-l", "walltime=90"],
            "walltime=90 is 1 minute 30 seconds (PBS reads [[hours:]minutes:]seconds): too short",
            "for 1 hour 30 minutes write 01:30:00, for 1 minute 30 seconds 00:01:30",
        ),
    ],
)
def test_a_short_walltime_without_hours_is_refused_with_what_it_means(
    state, options, message, hint
):
    """Issue 28: `#PBS -l walltime=1:00` was taken as 60 s without a word."""
    folder = folder_with(state, "#!/bin/bash\n#PBS -l walltime=1:00\necho ran\n")
    with pytest.raises(JobError) as caught:
        submit.submit("jobs/job.sh", options=options, scheduler="local", workdir=folder, echo=None)
    assert caught.value.message.startswith(message) and caught.value.hint == hint
    assert not list(folder.glob("job.sh.o*")), "nothing ran"


def test_a_walltime_beyond_the_sites_maximum_is_refused_before_it_is_queued(state):
    folder = folder_with(
        state,
        "#!/bin/bash\n#PBS -l walltime=00:30:00\necho ran\n",
        max_walltime=(("", "00:20:00"),),
    )
    with pytest.raises(JobError) as caught:
        submit.submit("jobs/job.sh", scheduler="local", workdir=folder, echo=None)
    assert caught.value.message == (
        "the job asks for walltime 00:30:00, more than this site allows (00:20:00)"
    )
    assert caught.value.hint.startswith("ask for at most -l walltime=00:20:00;")
    assert not list(folder.glob("job.sh.o*")), "nothing ran"


@pytest.mark.integration
def test_a_longer_walltime_without_hours_runs_and_says_what_pbs_makes_of_it(state):
    folder = folder_with(state, "#!/bin/bash\n#PBS -l walltime=30:00\necho ran\n")
    said: list[str] = []
    job = submit.submit("jobs/job.sh", scheduler="local", workdir=folder, echo=said.append)
    assert said[0] == (
        "warning: walltime=30:00 is 30 minutes (PBS reads [[hours:]minutes:]seconds); "
        "for 30 hours write 30:00:00, for 30 minutes 00:30:00"
    )
    assert job.wait(timeout=120, echo=None) == 0
    said.clear()  # the same with its hours: nothing to say
    job = submit.submit(
        "jobs/job.sh",
        options=["-l", "walltime=00:30:00"],
        scheduler="local",
        workdir=folder,
        echo=said.append,
    )
    assert said == [f"submitted jobs/job.sh as job {job.id} (local)"]
    assert job.wait(timeout=120, echo=None) == 0


# `qstat -f` of queued jobs, written in PBS Professional's format (`key = value`, long values go on
# after a tab) with comments from OpenPBS's scheduler (src/scheduler/job_info.cpp): no PBS server
# runs here, so this is the one test of PBS's side.
# qstat -f -F json, in the format of PBS Professional's JSON output (its prolog shortened).
QSTAT_OFFLINE = """{
    "pbs_server":"reedbush-pbsadmin0",
    "Jobs":{
        "4243.reedbush-pbsadmin0":{
            "Job_Name":"run_multi_node_training.sh",
            "Job_Owner":"s1234@reedbush-h-login1",
            "job_state":"Q",
            "queue":"h-regular",
            "server":"reedbush-pbsadmin0",
            "ctime":"Tue Nov 24 10:02:11 2026",
            "Resource_List":{
                "select":"2:mpiprocs=2",
                "walltime":"00:20:00"
            },
            "comment":"Not Running: Node is in an ineligible state: offline",
            "etime":"Tue Nov 24 10:02:11 2026"
        }
    }
}
"""
QSTAT_NEVER = """{
    "pbs_server":"reedbush-pbsadmin0",
    "Jobs":{
        "4244.reedbush-pbsadmin0":{
            "Job_Name":"run_multi_node_training.sh",
            "Job_Owner":"s1234@reedbush-h-login1",
            "job_state":"Q",
            "queue":"h-regular",
            "Resource_List":{
                "select":"64:mpiprocs=2"
            },
            "comment":"Can Never Run: Not enough total nodes available (R: 64 A: 2 T: 2)"
        }
    }
}
"""


def test_why_a_pbs_job_waits_is_read_from_its_comment():
    job = accounting.qstat_job(QSTAT_OFFLINE)
    assert pending.pbs_comment(job["comment"]).says("4243.reedbush-pbsadmin0") == (
        "job 4243.reedbush-pbsadmin0 is still pending: a node it needs is offline (PBS comment "
        "Not Running: Node is in an ineligible state: offline); it starts when the nodes are "
        "back; if it waits long, tell your instructor"
    )
    never = pending.pbs_comment(accounting.qstat_job(QSTAT_NEVER)["comment"])
    assert never.never and never.says("4244.reedbush-pbsadmin0").endswith(
        "(PBS comment Can Never Run: Not enough total nodes available (R: 64 A: 2 T: 2)); it will "
        "never start: cancel it (qdel 4244.reedbush-pbsadmin0) and ask for what the site has "
        "(python -m course site show)"
    )


@pytest.mark.parametrize(
    "reason,says",
    [
        (
            "Priority",
            "jobs of higher priority come first (Slurm reason Priority); it starts when "
            "its turn comes",
        ),
        (
            "Resources",
            "the nodes it asks for are busy (Slurm reason Resources); it starts when they are free",
        ),
        ("QOSMaxJobsPerUserLimit", "you have as many jobs or resources in use as allowed"),
        (
            "PartitionNodeLimit",
            "it will never start: cancel it (scancel 7) and ask for fewer nodes",
        ),
    ],
)
def test_slurms_normal_waits_are_said_plainly_and_hopeless_ones_with_the_fix(reason, says):
    assert says in pending.slurm_reason(reason, "7").says("7")
    assert pending.slurm_reason("None", "7") is None  # not looked at yet: nothing to say

"""The decisive test of the cluster modules' marking (issue 23): what a student reads when a job is
submitted or refused, waits, fails or is diagnosed, under the pseudo-locale, where `_()` wraps each
line of a translated message in markers. Every such line must be one message between them, end to
end (a frame the kit put around it aside: brackets, a hint's arrow): a line without is one that
never went through `_()` and would stay English in the Japanese edition, and a phrase put into a
message is checked to be one too. The cases are those
the modules' own tests build, read from their parametrizations (tests/test_joblog_end.py's logs and
notices, tests/test_jobs.py's pending reasons and refusals) or made with their fixtures
(tests/test_budget.py's budget, tests/test_prediction_record.py's site); with the markers taken off,
a message is the English those tests expect.

Not the cluster modules' words, and left out: course.contracts' messages (course.cluster.pbs's,
such as the hint of a walltime written without hours, are tests/test_i18n_pseudo_sites.py's too).
The log's own lines (the job's output, the schedulers' notices, the kit's protocol lines) stay
English by design."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from course import gpu, i18n, paths
from course.cluster import (
    accounting,
    diagnosis,
    launch,
    localsched,
    pbs,
    pending,
    submit,
    submit_command,
    usage,
)
from course.cluster import job as following
from course.cluster.job import Job
from course.cluster.siteenv import SiteSettings
from course.contracts import jobend
from course.errors import JobError
from tests import test_joblog_end, test_jobs, test_launch
from tests.test_budget import budgeted  # noqa: F401  (a fixture)
from tests.test_jobs import folder_with, state  # noqa: F401  (state: a fixture)
from tests.test_prediction_record import SINGLE_GPU_JOB, site  # noqa: F401  (site: a fixture)

AT = test_joblog_end.AT


def cases(test) -> list:
    """The parameter sets of `test`'s parametrization."""
    [mark] = [mark for mark in test.pytestmark if mark.name == "parametrize"]
    return list(mark.args[1])


@pytest.fixture(autouse=True)
def pseudo_locale(monkeypatch):
    monkeypatch.setenv(i18n.VARIABLE, i18n.PSEUDO)


def unwrapped(text: str) -> list[str]:
    """The non-blank lines of `text` that are not one translated message, between the markers
    from end to end: all but the frames the kit puts around one (a hint's arrow, brackets). Where
    a message holds another, a frame left unmarked shows too, not only a line without markers."""
    found = []
    for line in text.splitlines():
        inner = line.strip().removeprefix("-> ").removeprefix("[").removesuffix("]")
        if line.strip() and not (
            inner.startswith(i18n.MARK_OPEN) and inner.endswith(i18n.MARK_CLOSE)
        ):
            found.append(line)
    return found


def plain(text: str) -> str:
    """`text` without the markers: the English."""
    return text.replace(i18n.MARK_OPEN, "").replace(i18n.MARK_CLOSE, "")


def translated(text: str) -> str:
    """`text`, once it is checked that every line of it is a translated message."""
    assert text and not unwrapped(text), text
    return text


def whole(part: str) -> str:
    """`part` of a message (a phrase put into another), once it is checked that it is one
    translated message: a phrase left unmarked inside a marked one shows no other way."""
    assert part.startswith(i18n.MARK_OPEN) and part.endswith(i18n.MARK_CLOSE), part
    return part


# --- why a job failed (course.cluster.diagnosis) -------------------------------------------------


@pytest.mark.parametrize(
    "log,cause", cases(test_joblog_end.test_the_diagnosis_names_the_cause_the_log_shows)
)
def test_every_diagnosis_of_a_failed_jobs_log_is_translated(log, cause):
    said = diagnosis.explain(
        f"course launch: job 9.local (local); 2 slot(s) on 1 node(s): n1 x2\n{log}",
        "9.local",
        local=True,
    )
    assert plain(translated(said)).startswith(cause)


@pytest.mark.parametrize(
    "notice,status,kind",
    cases(test_joblog_end.test_a_schedulers_kill_notice_wins_over_an_end_line_that_says_0),
)
@pytest.mark.parametrize("local", [True, False])
def test_a_schedulers_kill_notice_is_explained_in_the_students_language(
    notice, status, kind, local
):
    translated(diagnosis.explain(f"{notice}\n", "7.x", local=local))
    said = jobend.end(f"{notice}\n").says
    assert plain(translated(diagnosis.how_ended(said))) == said


@pytest.mark.parametrize(
    "notice,cause", cases(test_joblog_end.test_a_job_slurm_requeued_is_not_to_be_submitted_again)
)
def test_a_requeue_and_a_failed_node_are_explained_in_the_students_language(notice, cause):
    ending = test_joblog_end.FIRST_ATTEMPT.split(test_joblog_end.REQUEUE_NOTICE)[1]  # its end lines
    stopped = f"{test_joblog_end.HEADER}{notice}{ending}"
    assert plain(translated(diagnosis.explain(stopped, "1", local=False))).startswith(cause)
    rerun = stopped + test_joblog_end.RERUN.replace("status 0", "status 1")
    assert plain(translated(diagnosis.explain(rerun, "1", local=False))).startswith(
        "the log names no cause"
    )


@pytest.mark.parametrize("hang", cases(test_joblog_end.test_the_watchdogs_line_round_trips))
def test_the_watchdogs_finding_is_translated_and_its_english_is_the_watchdogs(hang, monkeypatch):
    said = diagnosis.explain(f"{hang.format()}\n{jobend.end_line('9.x', 124, AT)}\n", "9.x", True)
    finding = hang.format().removeprefix("course: watchdog: ").removesuffix("; the job was ended")
    assert plain(translated(said)).startswith(f"{finding}; the watchdog ended the job")
    # the finding, and how the rank hung in it, are each a message
    assert whole(diagnosis._hang_finding(hang)).endswith(i18n.MARK_CLOSE * 2)
    monkeypatch.delenv(i18n.VARIABLE)
    assert diagnosis.explain(f"{hang.format()}\n", "9.x", True).startswith(f"{finding}; ")


@pytest.mark.parametrize("local", [True, False])
def test_an_end_without_a_cause_or_by_a_signal_is_explained_in_the_students_language(local):
    for log in (
        jobend.end_line("9.pbs01", 1, AT),
        jobend.killed_line("9.pbs01", "TERM", AT),
        "cat: data.npz: No such file or directory\n" + jobend.end_line("9.pbs01", 1, AT),
    ):
        translated(diagnosis.explain(log, "9.pbs01", local=local))
        translated(diagnosis.explain(log, "9.pbs01", local=local, log="job.sh.o9"))
    said = diagnosis.explain(jobend.end_line("9.pbs01", 1, AT), "9.pbs01", local=local)
    assert f"{i18n.MARK_OPEN}the log{i18n.MARK_CLOSE} names no cause" in said


@pytest.mark.parametrize(
    "says",
    [
        "ended with exit status 3",
        "was killed by SIGTERM",
        "was killed at its walltime",
        "was cancelled",
        "was lost: its scheduler process died",
        "could not start",  # the local scheduler's record
        "ended",
    ],
)
def test_how_a_job_ended_is_said_in_the_students_language(says, monkeypatch):
    assert plain(translated(diagnosis.how_ended(says))) == says
    monkeypatch.delenv(i18n.VARIABLE)
    assert diagnosis.how_ended(says) == says


# --- why a job waits (course.cluster.pending) ----------------------------------------------------


@pytest.mark.parametrize(
    "reason,says",
    cases(test_jobs.test_slurms_normal_waits_are_said_plainly_and_hopeless_ones_with_the_fix),
)
def test_slurms_reasons_of_the_jobs_tests_are_said_in_the_students_language(reason, says):
    assert says in plain(translated(pending.slurm_reason(reason, "7").says("7")))


@pytest.mark.parametrize(
    "reason",
    [
        *pending._slurm_reasons(),
        "QOSMaxJobsPerUserLimit",  # a limit on what is in use
        "Nodes required for job are DOWN, DRAINED or reserved for jobs in higher priority",
        "SomeReasonOfANewerSlurm",
    ],
)
def test_every_slurm_reason_is_said_in_the_students_language(reason):
    waits = pending.slurm_reason(reason, "7", "00:30:00", "01:00:00", "n1 drained (disk)")
    translated(waits.says("7.slurm"))
    assert whole(waits.means) and whole(waits.next)


@pytest.mark.parametrize(
    "comment",
    [
        accounting.qstat_job(test_jobs.QSTAT_OFFLINE)["comment"],
        accounting.qstat_job(test_jobs.QSTAT_NEVER)["comment"],
        "Can Never Run: Job walltime exceeds the queue's maximum walltime",
        "Not Running: Insufficient amount of resource: ngpus",
        "Not Running: Job would conflict with reservation or top job",
        "Not Running: User has reached server running job limit.",
        "Not Running: Queue not started.",
        "Not Running: Job held, too many failed attempts to run",
        "Not Running: a reason of a newer PBS",
    ],
)
def test_every_pbs_comment_is_said_in_the_students_language(comment):
    waits = pending.pbs_comment(comment)
    translated(waits.says("4244.reedbush-pbsadmin0"))
    assert whole(waits.means) and whole(waits.next)


# --- following a job (course.cluster.job) --------------------------------------------------------


@pytest.fixture
def no_scheduler(monkeypatch):
    """No qstat, squeue or scontrol to ask."""
    monkeypatch.setattr(paths, "find_program", lambda name, **kw: None)


def kit_lines(lines: list[str]) -> list[str]:
    """The lines the kit says about a job (between brackets), not the log's."""
    return [line for line in lines if plain(line).startswith("[")]


def test_the_end_of_a_job_killed_at_its_walltime_is_said_in_the_students_language(
    tmp_path, no_scheduler
):
    log = tmp_path / "run_multi_node_training.sh.o42"
    log.write_text("epoch 1\n=>> PBS: job killed: walltime 00:30:05 exceeded limit 00:30:00\n")
    lines: list[str] = []
    Job("42.pbs01", tmp_path, "qsub", log).wait(timeout=30, echo=lines.append, poll=0.1)
    said = kit_lines(lines)
    assert len(said) == 2 and translated("\n".join(said))
    assert plain(said[0]).startswith("[job 42.pbs01 was killed at its walltime (exit status 271)")


def test_the_end_of_a_rerun_job_is_said_in_the_students_language(tmp_path, no_scheduler):
    text = test_joblog_end.FIRST_ATTEMPT + test_joblog_end.RERUN.replace("status 0", "status 1")
    log = tmp_path / "job.sh.o1"
    log.write_text(text)
    lines: list[str] = []
    Job("1", tmp_path, "qsub", log).wait(timeout=30, echo=lines.append, poll=0.1)
    said = kit_lines(lines)  # the rerun, how it ended, why
    assert len(said) == 3 and translated("\n".join(said))
    assert plain(said[1]).startswith("[job 1 ended with exit status 1 in attempt 2; log: ")


def test_a_wait_a_rerun_and_a_stop_are_said_in_the_students_language(tmp_path, monkeypatch):
    monkeypatch.setattr(following, "qstat_state", lambda job_id: "queued")
    monkeypatch.setattr(pending, "ask", lambda job_id: pending.slurm_reason("Priority", "7"))
    lines: list[str] = []
    Job("7", tmp_path, "qsub").wait(timeout=0.2, echo=lines.append, poll=0.05)
    (tmp_path / "job.sh.o7").write_text(f"{jobend.end_line('7', 0, AT)}\n")
    monkeypatch.setattr(Job, "rerun_attempt", lambda self, text: 2)
    Job("7", tmp_path, "qsub").wait(timeout=0.2, echo=lines.append, poll=0.05)
    for scheduler in ("qsub", "local"):
        Job("7", tmp_path, scheduler)._interrupted(lines.append)
    said = kit_lines(lines)
    assert len(said) == 4, said  # the wait said once, the rerun, two stops
    translated("\n".join(said))


def test_a_job_without_a_log_is_said_in_the_students_language(tmp_path):
    class Ended:
        def wait(self, *args, **kwargs) -> int:
            return 0

    lines: list[str] = []
    Job("8.local", tmp_path, "local", None, Ended()).wait(echo=lines.append)
    translated("\n".join(lines))
    for scheduler in ("qsub", "local"):
        translated(Job("8.local", tmp_path, scheduler).diagnosis())


# --- the local scheduler (course.cluster.localsched) ---------------------------------------------


def test_the_local_schedulers_refusals_and_warnings_are_translated(
    state,  # noqa: F811
    monkeypatch,
):
    for job_id in ("4243.reedbush-pbsadmin0", "77.local"):
        with pytest.raises(JobError) as raised:
            localsched.find(job_id)
        translated(str(raised.value))
    too_many = pbs.read_request(f"#PBS -l select=1:mpiprocs={(os.cpu_count() or 1) + 1}\n")
    assert [translated(warning) for warning in localsched.check_request(too_many)]
    for names in ([], ["Tesla P100"]):
        monkeypatch.setattr(gpu, "visible_gpus", lambda names=names: gpu.VisibleGpus(names))
        with pytest.raises(JobError) as raised:
            localsched.check_request(pbs.read_request("#PBS -l ngpus=2\n"))
        translated(str(raised.value))
    with pytest.raises(JobError) as raised:
        localsched.start(state / "missing.sh", [], state)
    translated(str(raised.value))


def ended_local_job(number: int, record: dict) -> localsched.LocalJob:
    """A local job of the state folder whose status file holds `record`."""
    folder = localsched.state_dir() / "jobs" / str(number)
    folder.mkdir(parents=True)
    job = localsched.LocalJob(
        number, "job.sh", folder / f"job.sh.o{number}", folder / "status.json"
    )
    (folder / "spec.json").write_text(
        json.dumps({"log": str(job.log), "status": str(job.status_file)})
    )
    job.status_file.write_text(json.dumps(record))
    return job


def test_a_lost_or_ended_local_job_is_said_in_the_students_language(
    state,  # noqa: F811
    capsys,
    monkeypatch,
):
    gone = subprocess.Popen(["true"])
    gone.wait()  # a supervisor that is no more
    lost = ended_local_job(3, {"supervisor": gone.pid})
    lines: list[str] = []
    assert lost.wait(timeout=5, echo=lines.append) == localsched.LOST_EXIT
    translated("\n".join(lines))
    cancelled = ended_local_job(4, {"exit_status": 130, "says": "was cancelled"})
    with pytest.raises(JobError) as raised:
        localsched.cancel(cancelled.id)
    assert plain(translated(str(raised.value))).startswith(
        "job 4.local has already ended: it was cancelled\n"
    )
    monkeypatch.setattr(localsched, "cancel", lambda job_id: cancelled)
    assert localsched.main(["4.local"]) == 0
    translated(capsys.readouterr().out)


# --- submitting (course.cluster.submit, submit_command, usage, launch) ---------------------------


@pytest.mark.parametrize(
    "options,message,hint",
    cases(test_jobs.test_a_short_walltime_without_hours_is_refused_with_what_it_means),
)
def test_a_walltime_without_hours_is_refused_in_the_students_language(
    state,  # noqa: F811
    options,
    message,
    hint,
):
    folder = folder_with(state, "#!/bin/bash\n#PBS -l walltime=1:00\necho ran\n")
    with pytest.raises(JobError) as raised:
        submit.submit("jobs/job.sh", options=options, scheduler="local", workdir=folder, echo=None)
    # the hint, what to write instead, is course.cluster.pbs's
    assert plain(translated(raised.value.message)).startswith(message)
    assert plain(translated(raised.value.hint)) == hint
    settings = SiteSettings.read(folder / "jobs" / "site_env.sh")
    warning = submit.check_walltime(folder / "jobs" / "job.sh", ["-l", "walltime=30:00"], settings)
    translated(warning)


def test_what_the_site_cannot_give_is_refused_in_the_students_language(
    state,  # noqa: F811
    monkeypatch,
):
    folder = folder_with(
        state,
        "#!/bin/bash\n#PBS -l walltime=00:30:00\necho ran\n",
        max_walltime=(("", "00:20:00"), ("h-short", "00:10:00")),
    )
    settings = SiteSettings.read(folder / "jobs" / "site_env.sh")
    script = folder / "jobs" / "job.sh"
    for options in ([], ["-q", "h-short"]):
        with pytest.raises(JobError) as raised:
            submit.check_walltime(script, options, settings)
        translated(str(raised.value))
    limited = SiteSettings(
        select="{nodes}:mpiprocs={ranks_per_node}", queues=("h-regular",), gpus_per_node=2
    )
    for options in (["-q", "debug"], ["-l", "select=1:mpiprocs=4"]):
        with pytest.raises(JobError) as raised:
            submit.check_site_request(script, options, limited)
        translated(str(raised.value))
    with pytest.raises(JobError) as raised:
        submit.qsub_options(limited, 1, 1, {"NAMES": "a,b"})
    translated(str(raised.value))
    monkeypatch.setattr(paths, "find_program", lambda name, **kw: None)
    with pytest.raises(JobError) as raised:
        submit._qsub(Path("jobs/job.sh"), [], folder, settings)
    translated(str(raised.value))
    with pytest.raises(JobError) as raised:
        submit.submit("jobs/job.sh", scheduler="pbs", workdir=folder, echo=None)
    translated(str(raised.value))
    with pytest.raises(JobError) as raised:
        submit.submit("jobs/missing.sh", workdir=folder, echo=None)
    translated(str(raised.value))


def test_a_training_script_missing_or_with_stubs_is_refused_in_the_students_language(tmp_path):
    script = tmp_path / "job.sh"
    script.write_text("python train_cifar_single.py\n")
    with pytest.raises(JobError) as raised:
        submit.check_training_scripts(script, tmp_path)
    translated(str(raised.value))
    (tmp_path / "train_cifar_single.py").write_text(
        "def make_iterators(train, test, batchsize):\n    # PUT YOUR CODE HERE\n"
        "    raise NotImplementedError()\n"
    )
    with pytest.raises(NotImplementedError) as stubbed:
        submit.check_training_scripts(script, tmp_path)
    assert "PUT YOUR CODE HERE" in translated(str(stubbed.value))


def test_what_submit_says_is_in_the_students_language(
    state,  # noqa: F811
    monkeypatch,
    capsys,
):
    folder = folder_with(state, "#!/bin/bash\n#PBS -l walltime=00:30:00\necho ran\n")

    def start(script, options, workdir, **kwargs) -> localsched.LocalJob:
        return localsched.LocalJob(5, "job.sh", workdir / "job.sh.o5", workdir / "status.json")

    monkeypatch.setattr(localsched, "start", start)  # nothing runs
    said: list[str] = []
    submit.submit("jobs/job.sh", scheduler="local", workdir=folder, echo=said.append)
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    submit.submit("jobs/job.sh", scheduler="local", workdir=folder, echo=said.append)
    monkeypatch.delenv("NBGRADER_EXECUTION")
    (folder / "jobs" / "gpus.sh").write_text("#!/bin/bash\n#PBS -l ngpus=2\nexit 0\n")
    for names in ([], ["Tesla P100"]):
        monkeypatch.setattr(gpu, "visible_gpus", lambda names=names: gpu.VisibleGpus(names))
        assert (
            submit.submit(
                "jobs/gpus.sh",
                scheduler="local",
                workdir=folder,
                echo=said.append,
                skip_without_gpus=True,
            )
            is None
        )
    assert len(said) == 4, said
    assert plain(translated("\n".join(said))).startswith("submitted jobs/job.sh as job 5.local")
    monkeypatch.setattr(submit, "submit", lambda *args, **kwargs: Job("5.local", folder, "local"))
    assert submit_command.main(["--no-wait", "jobs/job.sh"]) == 0
    assert plain(translated(capsys.readouterr().out)) == "follow it with: tail -f <script>.o5\n"


def test_the_prediction_submitted_with_a_job_is_said_in_the_students_language(
    site,  # noqa: F811
):
    def predict_run(train_size, batchsize, epochs):
        raise NotImplementedError()

    with pytest.raises(NotImplementedError) as stubbed:
        submit.submit(SINGLE_GPU_JOB, workdir=site, predict=predict_run, echo=None)
    translated(str(stubbed.value))

    def predicted(train_size, batchsize, epochs):
        return {
            "updates_per_epoch": 4,
            "iterations": 12,
            "snapshots_written": 3,
            "snapshots_kept": 1,
        }

    _, said = submit._recorded(SINGLE_GPU_JOB, predicted, site)
    assert plain(translated(said)).startswith("your prediction for (200, 64, 3), recorded")


def test_the_budget_is_said_in_the_students_language(
    budgeted,  # noqa: F811
):
    settings = SiteSettings.read(budgeted / "jobs" / "site_env.sh")
    quick = budgeted / "jobs" / "quick.sh"
    _, left = usage.check(budgeted, quick, [], settings)
    assert plain(translated(left)).startswith("budget on site local-budget: 0.008 of 0.050")
    with pytest.raises(JobError) as raised:  # 0.008 + 10 minutes: more than 0.050
        usage.check(budgeted, quick, ["-l", "walltime=00:10:00"], settings)
    assert f"{i18n.MARK_OPEN}node-hours{i18n.MARK_CLOSE}" in translated(str(raised.value))
    # a job not ended (its scheduler cannot say otherwise): it counts, and waiting is a way out
    usage.record("99.pbs", "qsub", budgeted, usage.Usage("quick.sh", 1, 0, 120, "walltime"))
    with pytest.raises(JobError) as raised:
        usage.check(budgeted, quick, [], settings)
    assert f"{i18n.MARK_OPEN}job 99.pbs (not ended){i18n.MARK_CLOSE}" in translated(
        str(raised.value)
    )
    (budgeted / "jobs" / "none.sh").write_text("#!/bin/bash\necho\n")
    with pytest.raises(JobError) as raised:
        usage.check(budgeted, budgeted / "jobs" / "none.sh", [], settings)
    translated(str(raised.value))


def test_launchs_refusals_are_translated(tmp_path):
    job = test_launch.pbs_job(tmp_path, ["localhost"])
    for command, template, allreduce in (
        ([], "mpiexec -n {nprocs}", ""),
        (["true"], "mpiexec -n {nprocs}", "butterfly"),
        (["true"], "srun-that-does-not-exist -n {nprocs}", ""),
        (["true"], "mpiexec -n {ranks}", ""),
    ):
        with pytest.raises(JobError) as raised:
            launch.build(job, command, template, tmp_path / "h", allreduce=allreduce)
        message = str(raised.value)
        if command:  # "nothing to launch"'s hint is the command line to type
            translated(message)
        else:
            translated(message.split("\n")[0])

"""The site profile's per-student budget ([budget]): its schema, `course plan` showing it, and
`course submit` counting the student's runs and jobs against it on the local scheduler."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from course.cluster import localsched, siteenv, sites, submit, usage
from course.errors import SiteError
from course.instructor import allocation
from tests.helpers import PYTHON, ROOT, make_run


def profile_with(folder: Path, budget: str, base: str = "local") -> Path:
    """sites/<base>.toml with `budget` (TOML lines) as its [budget] table, written into `folder`."""
    path = folder / f"{base}-budget.toml"
    path.write_text((ROOT / "sites" / f"{base}.toml").read_text() + f"\n[budget]\n{budget}\n")
    return path


@pytest.mark.parametrize(
    "budget,message,hint",
    [
        (
            "node_hours_per_student = 0",
            ":58: `budget.node_hours_per_student` = 0 is not a number of hours above 0, e.g. 12.5",
            "fix the profile, or leave the key out for no budget",
        ),
        (
            "gpu_hours_per_student = -4.5",
            ":58: `budget.gpu_hours_per_student` = -4.5 is not a number of hours above 0"
            ", e.g. 12.5",
            "fix the profile, or leave the key out for no budget",
        ),
        (
            'node_hours_per_student = "ten"',
            ":58: `budget.node_hours_per_student` should be a number, not 'ten'",
            "fix the profile",
        ),
        (
            "node_hours_per_student = nan",
            ":58: `budget.node_hours_per_student` = nan is not a number of hours above 0"
            ", e.g. 12.5",
            "fix the profile, or leave the key out for no budget",
        ),
        (
            "node_hour_per_student = 10",
            ":58: unknown key `budget.node_hour_per_student`",
            "did you mean `node_hours_per_student`? [budget] takes node_hours_per_student, "
            "gpu_hours_per_student",
        ),
        (
            "",
            ":57: [budget] sets nothing",
            "e.g. node_hours_per_student = 12.5 and/or gpu_hours_per_student = 25, or leave the "
            "table out",
        ),
    ],
)
def test_a_bad_budget_is_refused_with_the_line_and_the_fix(tmp_path, budget, message, hint):
    path = profile_with(tmp_path, budget)
    with pytest.raises(SiteError) as caught:
        sites.load_profile(str(path))
    assert caught.value.message == f"{path}{message}"
    assert caught.value.hint == hint


def test_a_budget_travels_through_site_env_and_none_changes_nothing(tmp_path):
    path = profile_with(tmp_path, "node_hours_per_student = 40\ngpu_hours_per_student = 2.5")
    settings = siteenv.SiteSettings.from_profile(sites.load_profile(str(path)))
    text = settings.to_shell()
    assert "export COURSE_NODE_HOURS_PER_STUDENT=40.0" in text
    read = siteenv.SiteSettings.from_shell(text)
    assert read == settings
    assert usage.limits(read) == {usage.NODE_HOURS: 40.0, usage.GPU_HOURS: 2.5}
    plain = siteenv.SiteSettings.from_profile(sites.load_profile("local"))
    assert usage.limits(plain) == {} and "PER_STUDENT" not in plain.to_shell()


@pytest.fixture
def applied(tmp_path, monkeypatch):
    """A kit folder with a site profile (`budget` added) applied to its jobs/."""
    monkeypatch.delenv("COURSE_TRAIN_ARGS", raising=False)

    def apply(base: str, budget: str) -> Path:
        shutil.copytree(ROOT / "jobs", tmp_path / "jobs", dirs_exist_ok=True)
        sites.apply(
            sites.load_profile(str(profile_with(tmp_path, budget, base))), tmp_path / "jobs"
        )
        return tmp_path

    return apply


def test_plan_shows_the_budget_and_warns_where_its_estimate_exceeds_it(applied):
    # Reedbush-H's plan: 13 node-hours and 20 GPU-hours per student (tests/test_allocation.py).
    folder = applied("reedbush-h", "node_hours_per_student = 10\ngpu_hours_per_student = 24")
    said = allocation.render(allocation.budget(folder, students=30))
    assert "per student: 13.0 node-hours, 20.0 GPU-hours\n" in said
    assert (
        "site budget per student ([budget] of the site profile): 10.0 node-hours, 24.0 GPU-hours\n"
    ) in said
    warnings = [line for line in said.splitlines() if line.startswith("warning:")]
    assert warnings == [
        "warning: the plan's 13.0 node-hours per student exceed the budget's 10.0: `course "
        "submit` would refuse students jobs before the course's end; raise the budget in the site "
        "profile, or plan shorter walltimes or fewer resubmissions (--resubmit)"
    ]
    within = allocation.render(
        allocation.budget(applied("reedbush-h", "node_hours_per_student = 14"), 30)
    )
    assert "node-hours, 20.0 GPU-hours\nsite budget per student" in within
    assert "warning:" not in within


def test_what_a_job_and_a_run_use_on_a_gpu_site(applied):
    """The GPUs of a job as `course plan` counts them: stage 2 takes the node's, the benchmark
    none, stage 3 one per rank; a resumed run counts its earlier job up to its last snapshot."""
    folder = applied("reedbush-h", "gpu_hours_per_student = 1")
    settings = siteenv.of_folder(folder)

    def job(script: str, *options: str) -> tuple[int, int, float]:
        asked = usage.job_usage(folder / "jobs" / script, options, settings)
        return asked.nodes, asked.gpus, asked.seconds

    assert job("run_multi_gpu_training.sh") == (1, 2, 1200)
    assert job("run_multi_node_training.sh", "-l", "select=2:mpiprocs=2") == (2, 4, 1200)
    assert job("run_allreduce_benchmark.sh") == (2, 0, 600)
    assert job("run_model_parallel.sh") == (1, 0, 600)  # notebook 05's: CPU ranks only
    assert job("run_single_gpu_training.sh", "-l", "walltime=00:06:00") == (1, 1, 360)
    run = {
        "stage": "multi_node",
        "hosts": ["n1", "n1", "n2", "n2"],
        "devices": ["@cupy:0", "@cupy:1"] * 2,
        "device_kind": "gpu",
        "wall_seconds": 600.0,
        "segments": [
            {"started_at": "2026-01-01T10:00:00+00:00", "snapshot_at": "2026-01-01T10:15:00+00:00"},
            {"started_at": "2026-01-01T11:00:00+00:00", "snapshot_at": None},
        ],
        "_path": str(folder / "runs" / "multi_node-7.x" / "results.json"),
    }
    used = usage.run_usage(run)
    assert (used.nodes, used.gpus, used.seconds, used.source) == (
        2,
        4,
        1500.0,
        "runs/multi_node-7.x",
    )
    assert used.gpu_hours == pytest.approx(4 * 1500 / 3600)


QUICK = """#!/bin/bash
#PBS -l select=1:mpiprocs=1
#PBS -l walltime=00:02:00
cd "$PBS_O_WORKDIR"
source jobs/site_env.sh
{command}
"""


@pytest.fixture
def budgeted(tmp_path, monkeypatch):
    """A student's folder on the local profile with a budget of 0.05 node-hours (3 node-minutes),
    a run of 30 s already in runs/, and two job scripts of 2 minutes' walltime: one that sleeps
    until it is cancelled, one that ends at once."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    folder = tmp_path / "student"
    (folder / "jobs").mkdir(parents=True)
    profile = sites.load_profile(str(profile_with(tmp_path, "node_hours_per_student = 0.05")))
    (folder / "jobs" / siteenv.FILE).write_text(
        siteenv.SiteSettings.from_profile(profile).to_shell()
    )
    (folder / "jobs" / "sleeper.sh").write_text(QUICK.format(command="sleep 300"))
    (folder / "jobs" / "quick.sh").write_text(QUICK.format(command="echo done"))
    make_run(folder, "single_gpu", 900, 100.0, device_kind="cpu", wall_seconds=30.0, log=False)
    return folder


def course_submit(folder: Path, *arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [PYTHON, "-m", "course", "submit", *arguments],
        cwd=folder,
        capture_output=True,
        text=True,
        env=dict(os.environ),
        timeout=120,
    )


@pytest.mark.integration
def test_course_submit_counts_runs_and_pending_jobs_against_the_budget(budgeted):
    # 30 s of the run (0.008 node-hours) + 2 minutes asked (0.033) of 0.05: accepted.
    first = course_submit(budgeted, "--no-wait", "jobs/sleeper.sh")
    assert first.returncode == 0, first.stdout + first.stderr
    job_id = first.stdout.split(" as job ")[1].split()[0]
    assert (
        "budget on site local-budget: 0.008 of 0.050 node-hours used, this job up to 0.033, "
        "0.008 left after it\n"
    ) in first.stdout
    ledger = usage.ledger_path().read_text()
    # The sleeper may use its whole walltime while it runs: 0.075 with another 2 minutes.
    refused = course_submit(budgeted, "jobs/quick.sh")
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert refused.stderr == (
        "course submit: quick.sh was NOT SUBMITTED: it would take your node-hours to 0.075 of the "
        "0.050 each student has on site local-budget. You have used 0.042 (runs/single_gpu-"
        f"900.local: 0.008, job {job_id} (not ended): 0.033); this job may use 0.033 (1 node(s), "
        "0 GPU(s), walltime 00:02:00).\n"
        "  -> ask for less (0.008 node-hours are left): a shorter walltime "
        "(-l walltime=HH:MM:SS) or fewer nodes (-l select=NODES:mpiprocs=RANKS), or wait for your "
        "jobs that have not ended (each counts its whole walltime till then); or ask your "
        "instructor for more\n"
    )
    assert not list(budgeted.glob("quick.sh.o*")), "nothing ran"
    assert usage.ledger_path().read_text() == ledger, "nothing was recorded"
    # Once the sleeper has ended (without a run), only what its runs used counts: 0.008 + 0.033.
    assert localsched.cancel(job_id).exit_status() is not None
    again = course_submit(budgeted, "jobs/quick.sh")
    assert again.returncode == 0, again.stdout + again.stderr
    assert (
        "0.008 of 0.050 node-hours used, this job up to 0.033, 0.008 left after it" in again.stdout
    )


@pytest.mark.integration
def test_without_a_budget_submit_says_and_records_nothing(budgeted):
    plain = sites.load_profile("local")
    (budgeted / "jobs" / siteenv.FILE).write_text(
        siteenv.SiteSettings.from_profile(plain).to_shell()
    )
    said: list[str] = []
    job = submit.submit("jobs/quick.sh", scheduler="local", workdir=budgeted, echo=said.append)
    assert job is not None and job.wait(timeout=60, echo=None) == 0
    assert said == [f"submitted jobs/quick.sh as job {job.id} (local)"]
    assert not usage.ledger_path().exists()


def test_the_runs_of_every_folder_the_student_submitted_from_count(budgeted, tmp_path):
    """A fresh copy of the assignment does not start the count again: the ledger names the folder
    of each job, and a job whose log shows its end counts by its run, not its walltime."""
    other = tmp_path / "copy"
    make_run(other, "multi_node", 77, 100.0, workers=2, device_kind="cpu", wall_seconds=60.0)
    usage.record("77.local", "qsub", other, usage.Usage("multi_node", 2, 0, 1200, "walltime"))
    runs, jobs = usage.used(budgeted)
    assert jobs == []
    assert sorted((run.source, run.nodes, run.seconds) for run in runs) == [
        ("runs/multi_node-77.local", 1, 60.0),  # both ranks on n1: one node
        ("runs/single_gpu-900.local", 1, 30.0),
    ]


WHOLE_ENTRY = {
    "id": "5.local",
    "scheduler": "local",
    "folder": "/nowhere",
    "what": "single_gpu",
    "nodes": 1,
    "gpus": 0,
    "seconds": 120,
    "source": "walltime",
}


@pytest.mark.integration
@pytest.mark.parametrize(
    "text,problem",
    [
        (
            json.dumps([WHOLE_ENTRY], indent=1)[:40],
            "is not whole JSON (cut short, or edited by hand)",
        ),
        ("", "is empty"),
        (
            json.dumps([{k: v for k, v in WHOLE_ENTRY.items() if k != "folder"}]),
            "has 1 of 1 entries without what the budget needs (id, scheduler, folder, what, "
            "nodes, gpus, seconds)",
        ),
    ],
    ids=["truncated", "empty", "wrong-keys"],
)
def test_a_damaged_ledger_is_named_and_set_aside_and_the_job_submitted(budgeted, text, problem):
    ledger = usage.ledger_path()
    ledger.parent.mkdir(parents=True)
    ledger.write_text(text)
    done = course_submit(budgeted, "jobs/quick.sh")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert f"warning: the ledger of your submitted jobs {ledger} {problem}." in done.stdout, (
        done.stdout
    )
    assert "the scheduler's own accounting is the real limit" in done.stdout
    (kept,) = ledger.parent.glob(f"{usage.LEDGER}.damaged-*")
    assert f"The file is kept as {kept}, and a new ledger starts with the 0 job(s)" in done.stdout
    assert kept.read_text() == text, "the damaged ledger is kept as it was"
    job_id = done.stdout.split(" as job ")[1].split()[0]
    assert [entry["id"] for entry in json.loads(ledger.read_text())] == [job_id]
    assert "budget on site local-budget: 0.008 of 0.050 node-hours used" in done.stdout
    again = course_submit(budgeted, "jobs/quick.sh")
    assert again.returncode in (0, 2), again.stdout + again.stderr
    assert "warning: the ledger" not in again.stdout + again.stderr, "said once: it is whole now"

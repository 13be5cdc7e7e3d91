"""Runs checked as evidence (course.evidence): one line of each kind per job, the ranks `course
launch` started, GPUs for stage 2, and the scheduler's records where the grader reaches them (a real
Slurm cluster below)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from course import comparison, evidence, paths
from course.cluster import accounting
from course.contracts import jobend, joblog, results
from course.instructor import scoring
from tests import slurm_cluster
from tests.helpers import ROOT, make_run

GRADING = """
[efficiency.multi_node]
tiers = [[0.7, 1.0], [0.5, 0.5]]
"""
pytestmark = pytest.mark.usefixtures("grading_config")


def trace(path, **checked) -> evidence.Run:
    return evidence.trace(path, accounting=accounting.Accounting(**checked) if checked else None)


def edit_log(folder, name, change) -> None:
    log = folder / name
    log.write_text(change(log.read_text()))


# --- one line of each kind per job ---------------------------------------------------------------


def test_a_forged_second_throughput_line_is_refused(folder):
    path, _ = make_run(folder, "single_gpu", 1, 50.0)
    edit_log(
        folder,
        "run_single_gpu_training.sh.o1",
        lambda text: text.replace(
            "course: results", f"{joblog.throughput_line(80.0, 40, 5, 3)}\ncourse: results"
        ),
    )
    assert trace(path).problems == [
        "the log run_single_gpu_training.sh.o1 shows 2 Throughput lines (50.00, 80.00); "
        "a job prints one: the log was edited"
    ]


def test_a_second_results_line_for_the_same_run_file_is_refused(folder):
    path, digest = make_run(folder, "single_gpu", 1, 50.0)
    forged = joblog.results_line(path.relative_to(folder), "f" * 64)
    edit_log(
        folder,
        "run_single_gpu_training.sh.o1",
        lambda text: text.replace("course: job", f"{forged}\ncourse: job"),
    )
    assert trace(path).problems == [
        "the log run_single_gpu_training.sh.o1 names single_gpu-1.local/results.json "
        "2 times; a job writes one results line: the log was edited"
    ]


def test_a_second_run_header_for_the_job_is_refused(folder):
    path, _ = make_run(folder, "single_gpu", 1, 50.0)
    edit_log(
        folder, "run_single_gpu_training.sh.o1", lambda text: text.splitlines()[0] + "\n" + text
    )
    assert (
        "the log run_single_gpu_training.sh.o1 shows 2 run headers of job 1.local; a job starts "
        "one run" in trace(path).problems[0]
    )


# --- the ranks course launch started -------------------------------------------------------------


def relabel_as_two_ranks(text: str) -> str:
    """A stage-1 log edited to read as a 2-rank stage-3 job, as a forger would who does not know the
    launch lines."""
    return text.replace("1 worker(s)", "2 worker(s)").replace("@numpy |", "@numpy, @numpy |")


def rerun(folder, first: Path, images_per_sec: float) -> Path:
    """Job 1 requeued after it wrote `first`, and its second attempt writing another run: the
    results file and a log appended with both attempts, as a Slurm job's log holds them."""
    record = results.load(first)
    record["job"] = {**record["job"], "attempt": 2}
    record["throughput"] = {**record["throughput"], "images_per_sec": images_per_sec}
    second = folder / results.RUNS_DIR / f"{first.parent.name}-attempt2" / results.FILENAME
    kept = {k: v for k, v in record.items() if k not in ("seal", "schema") and k[0] != "_"}
    digest = results.write(second, kept)
    log = folder / "run_single_gpu_training.sh.o1"
    lines = log.read_text().splitlines()
    at = datetime.now(UTC)
    rerun = [
        "slurmstepd-n1: error: *** JOB 1 ON n1 CANCELLED AT 2026-11-25T01:07:20 DUE TO JOB "
        "REQUEUE ***",
        jobend.killed_line("1.local", "TERM", at),
        jobend.attempt_line("1.local", 2, at),
        lines[0],  # the run header
        joblog.throughput_line(images_per_sec, 40, 5, 3),
        joblog.results_line(second.relative_to(folder), digest),
        jobend.end_line("1.local", 0, at),
    ]
    log.write_text("\n".join(lines[:-1] + rerun) + "\n")
    return second


def test_each_run_of_a_job_slurm_reran_traces_to_the_attempt_that_wrote_it(folder):
    first, _ = make_run(folder, "single_gpu", 1, 50.0)
    second = rerun(folder, first, 60.0)
    assert [(trace(path).traced, trace(path).images_per_sec) for path in (first, second)] == [
        (True, 50.0),
        (True, 60.0),
    ], [trace(path).problems for path in (first, second)]


def test_a_run_naming_an_attempt_its_log_does_not_show_is_refused(folder):
    first, _ = make_run(folder, "single_gpu", 1, 50.0)
    second = rerun(folder, first, 60.0)
    edit_log(folder, "run_single_gpu_training.sh.o1", lambda text: text.split("slurmstepd")[0])
    assert trace(second).problems == [
        "the log run_single_gpu_training.sh.o1 does not show attempt 2 of job 1.local, which "
        "wrote this results file: hand in the log the scheduler wrote"
    ]


def two_rank_run(folder, change) -> Path:
    """A stage-3 run of job 3.local on 2 CPU ranks whose log `change` edits; its results file."""
    path, _ = make_run(
        folder, "multi_node", 3, 180.0, workers=2, device_kind="cpu", communicator="naive"
    )
    edit_log(folder, "run_multi_node_training.sh.o3", change)
    return path


def test_workers_that_course_launch_did_not_start_are_refused(folder):
    path = two_rank_run(
        folder,
        lambda text: text.replace(
            "2 slot(s) on 1 node(s): n1 x2", "1 slot(s) on 1 node(s): n1 x1"
        ).replace("-n 2", "-n 1"),
    )
    assert trace(path).problems == [
        "the results file says 2 worker(s), but course launch started 1 rank(s) in job 3.local"
    ]


def test_a_launcher_command_starting_other_ranks_than_the_slots_is_refused(folder):
    path = two_rank_run(folder, lambda text: text.replace("-n 2", "-n 1"))
    assert trace(path).problems == [
        "the launcher's command in run_multi_node_training.sh.o3 starts 1 rank(s), "
        "not the 2 slot(s) course launch names"
    ]


def test_a_stage_3_run_without_its_launch_is_refused(folder):
    path = two_rank_run(
        folder,
        lambda text: "".join(
            line for line in text.splitlines(True) if not line.startswith("course launch")
        ),
    )
    assert trace(path).problems == [
        "the log run_multi_node_training.sh.o3 does not show course launch starting the "
        "ranks of job 3.local (stage 3 runs through jobs/run_multi_node_training.sh, "
        "which prints it)"
    ]


def test_the_reference_logs_show_the_ranks_their_runs_had():
    for stage in ("single_gpu", "multi_node"):
        for run in evidence.runs(stage, ROOT / "docs" / "reference-logs" / "cpu-2core"):
            assert run.traced, (run.path, run.problems)


# --- devices and GPUs ----------------------------------------------------------------------------


def test_a_header_naming_other_devices_than_the_results_is_refused(folder):
    path, _ = make_run(folder, "single_gpu", 1, 50.0)
    edit_log(
        folder, "run_single_gpu_training.sh.o1", lambda text: text.replace(" (Tesla P100)", "")
    )
    assert trace(path).problems == [
        "the log's run header shows devices @cupy:0 (GPU model none), the results file "
        "@cupy:0 (GPU model Tesla P100)"
    ]


def test_a_stage_2_run_on_gpus_with_its_model_in_both_files_traces(folder):
    path, _ = make_run(folder, "multi_gpu", 2, 180.0, workers=2)
    assert trace(path).traced


# --- the scheduler's records ---------------------------------------------------------------------

# Real output of Debian's Slurm (slurm-wlm 22.05) on tests/slurm_cluster.py's cluster, which has no
# slurmdbd.
SCONTROL = (
    "JobId=1 JobName=wrap UserId=root(0) GroupId=root(0) MCS_label=N/A Priority=4294901759 Nice=0 "
    "Account=(null) QOS=(null) JobState=COMPLETED Reason=None Dependency=(null) Requeue=1 "
    "Restarts=0 "
    "BatchFlag=1 Reboot=0 ExitCode=0:0 RunTime=00:00:03 TimeLimit=UNLIMITED TimeMin=N/A "
    "SubmitTime=2026-11-22T08:32:21 StartTime=2026-11-22T08:32:24 EndTime=2026-11-22T08:32:27 "
    "Partition=course AllocNode:Sid=localhost:29481 NodeList=localhost BatchHost=localhost "
    "NumNodes=1 "
    "NumCPUs=2 NumTasks=2 CPUs/Task=1 ReqB:S:C:T=0:0:*:* TRES=cpu=2,node=1,billing=2 Socks/Node=* "
    "WorkDir=/work/helpers/evidence StdOut=/work/helpers/evidence/slurm-1.out Power= \n"
)
# sacct -X -n -P -o User,NNodes,AllocTRES,ElapsedRaw, in the format of Slurm's sacct manual (-P: '|'
# between fields)
SACCT = "s1234|2|billing=8,cpu=8,gres/gpu:p100=4,gres/gpu=4,mem=64G,node=2|612\n"
# qstat -x -f -F json, in the format of PBS Professional's JSON output (its prolog shortened):
# resources are objects, counts numbers
QSTAT = """{
    "pbs_server":"reedbush-pbsadmin0",
    "Jobs":{
        "4242.reedbush-pbsadmin0":{
            "Job_Name":"run_multi_node_training.sh",
            "Job_Owner":"s1234@reedbush-h-login1",
            "resources_used":{
                "walltime":"00:10:12"
            },
            "job_state":"F",
            "exec_host":"a087/0*2+a088/0*2",
            "Resource_List":{
                "ngpus":4,
                "nodect":2,
                "select":"2:ncpus=36:ngpus=2:mpiprocs=2:ompthreads=1:host=a087+a088"
            }
        }
    }
}
"""


def test_the_schedulers_records_are_read_from_their_own_formats():
    assert accounting.parse_scontrol(SCONTROL) == accounting.JobAccount(
        "root", 1, 0, 3.0, "scontrol show job"
    )
    assert accounting.parse_sacct(SACCT) == accounting.JobAccount("s1234", 2, 4, 612.0, "sacct")
    assert (
        accounting.parse_sacct("s1234|1|billing=2,cpu=2,mem=4G,node=1|60\n").gpus is None
    )  # GPUs not recorded
    assert accounting.parse_sacct("") is None
    assert accounting.parse_qstat(QSTAT) == accounting.JobAccount(
        "s1234", 2, 4, 612.0, "qstat -x -f"
    )
    assert accounting.parse_qstat("qstat: Unknown Job Id 4242.reedbush-pbsadmin0\n") is None
    assert accounting.parse_qstat('{"pbs_server":"reedbush-pbsadmin0"}\n') is None  # no job


# What OpenPBS 23.06 printed (`qstat -x -f -F json`) for a job of the reedbush-h profile's select on
# the test server (tests/pbs_cluster.py), shortened: a select without ngpus records no
# Resource_List.ngpus.
OPENPBS_QSTAT = """{
	"timestamp":	1796176727,
	"pbs_version":	"23.06.06",
	"pbs_server":	"10.213.47.2",
	"Jobs":	{
		"0.pnode1":	{
			"Job_Name":	"job.sh",
			"Job_Owner":	"root@vm",
			"resources_used":	{
				"cpupercent":	0,
				"ncpus":	1,
				"walltime":	"00:00:04"
			},
			"job_state":	"F",
			"queue":	"workq",
			"exec_host":	"pnode1/0",
			"exec_vnode":	"(pnode1:ncpus=1)",
			"Resource_List":	{
				"mpiprocs":	1,
				"ncpus":	1,
				"nodect":	1,
				"place":	"scatter:excl",
				"select":	"1:mpiprocs=1",
				"walltime":	"00:20:00"
			},
			"Variable_List":	{
				"PBS_O_HOME":	"/root",
				"PBS_O_LANG":	"C.UTF-8",
				"PBS_O_WORKDIR":	"/tmp/libs-pbs-vcdxw3hb/job",
				"PBS_O_HOST":	"vm"
			},
			"Exit_status":	0
		}
	}
}
"""


def test_a_pbs_job_that_asked_for_no_ngpus_has_its_gpus_unrecorded_not_zero(folder):
    """Reedbush-H gave nodes whole (select=N:mpiprocs=M, no ngpus): reading the missing
    Resource_List.ngpus as 0 GPUs made every GPU run of that profile someone else's."""
    account = accounting.parse_qstat(OPENPBS_QSTAT, "qstat -x -f 0.pnode1")
    assert account == accounting.JobAccount("root", 1, None, 4.0, "qstat -x -f 0.pnode1")
    run = gpu_run(folder)
    run.record["wall_seconds"] = 3.0
    problems, notes = accounting.Accounting("alice", "root", records=records(account)).check(run)
    assert problems == [] and "GPUs not recorded, so not checked" in notes[0]


def records(account: accounting.JobAccount | None, why: str = "", absent: bool = False):
    return lambda scheduler, job_id: accounting.Lookup(account, why, absent)


def gpu_run(folder) -> evidence.Run:
    """A traced 2-rank GPU run of 60 s on one node, as the records would be asked about it."""
    path, _ = make_run(folder, "multi_node", 7, 180.0, workers=2, communicator="pure_nccl")
    run = evidence.trace(path)
    run.record.update(
        devices=["@cupy:0", "@cupy:1"], wall_seconds=60.0
    )  # what a real run on 2 GPUs records
    return run


@pytest.mark.parametrize(
    "account,problem",
    [
        (
            accounting.JobAccount("s9999", 1, 2, 100.0, "sacct"),
            "job 7.local ran as user s9999 (sacct), not as s1234, the "
            "user of alice: it is someone else's job",
        ),
        (
            accounting.JobAccount("s1234", 1, 0, 100.0, "sacct"),
            "the run names 2 GPU(s), but job 7.local had 0 (sacct)",
        ),
        (
            accounting.JobAccount("s1234", 1, 2, 10.0, "sacct"),
            "job 7.local ran 10 s (sacct), less than the run's own 60 s",
        ),
        (
            None,
            "job 7.local is not in the scheduler's records (sacct -j 7.local knows no such job): "
            "it did not run on "
            "this cluster",
        ),
    ],
)
def test_a_job_the_records_contradict_does_not_count(folder, account, problem):
    run = gpu_run(folder)
    problems, _ = accounting.Accounting(
        "alice",
        "s1234",
        records=records(account, "sacct -j 7.local knows no such job", absent=account is None),
    ).check(run)
    assert problems == [problem]


def test_a_job_the_records_agree_with_says_what_was_checked(folder):
    run = gpu_run(folder)
    found = accounting.JobAccount("s1234", 2, None, 61.0, "sacct -j 7.local")
    assert accounting.Accounting("alice", "s1234", records=records(found)).check(run) == (
        [],
        [
            "job 7.local checked against sacct -j 7.local: user s1234, 2 node(s), GPUs not "
            "recorded, so not checked, 61 s"
        ],
    )
    _, notes = accounting.Accounting("alice", records=records(found)).check(run)
    assert notes[0] == (
        "job 7.local ran as user s1234 (sacct -j 7.local); whose job it was is not compared: "
        "grading.toml [accounting] users maps no user to alice"
    )


def test_what_cannot_be_checked_is_said_and_costs_nothing(folder, capsys):
    path, _ = make_run(folder, "single_gpu", 1, 50.0)
    run = trace(path, student="alice", user="s1234")
    assert run.traced and run.notes == [
        "job 1.local was not checked against the scheduler's records: the local "
        "scheduler keeps no accounting"
    ]
    run = trace(path, enabled=False)
    assert run.notes == [
        "job 1.local was not checked against the scheduler's records: grading.toml [accounting] "
        "has "
        "enabled = false"
    ]


def test_the_grader_maps_the_nbgrader_folder_to_the_student_s_cluster_user(
    tmp_path, grading_config
):
    grading_config.write_text(GRADING + '\n[accounting]\nusers = { alice = "s1234" }\n')
    folder = tmp_path / "autograded" / "alice" / paths.ASSIGNMENT
    folder.mkdir(parents=True)
    assert scoring.accounting(folder) == accounting.Accounting("alice", "s1234")
    assert scoring.accounting(tmp_path) == accounting.Accounting(None, None)


@pytest.mark.slurm
@pytest.mark.slow
def test_a_slurm_job_is_checked_against_the_clusters_own_records(
    cluster,  # noqa: F811
    solved_assignment,
    tmp_path,
    quick_env,
):
    """This cluster has no slurmdbd: sacct answers that accounting storage is disabled, and the
    check falls back on scontrol, which holds a finished job for MinJobAge (300 s)."""
    folder = slurm_cluster.assignment(solved_assignment, tmp_path / paths.ASSIGNMENT)
    job = cluster.qsub(folder, quick_env, "jobs/run_single_gpu_training.sh")
    [path] = folder.glob("runs/single_gpu-*/results.json")
    run = trace(path, student="alice", user="root")
    assert run.traced, run.problems
    [note] = run.notes
    assert note.startswith(
        f"job {job.id} checked against scontrol show job: user root, 1 node(s), 0 GPU(s), "
    )
    assert trace(path, student="alice", user="s1234").problems == [
        f"job {job.id} ran as user root (scontrol show job), not as s1234, the user of alice: it "
        "is someone else's job"
    ]
    gone = accounting.lookup("slurm", "999999")
    assert (gone.account, gone.absent) == (None, False)
    assert (
        gone.why
        == "sacct: Slurm accounting storage is disabled; scontrol no longer holds job 999999"
    )


# --- weak and strong scaling
# -----------------------------------------------------------------------


def sized(workers: int, per_worker: int, **record) -> evidence.Run:
    base = {
        "device_kind": "cpu",
        "gpu_model": None,
        "model": {"name": "vgg", "width": 16},
        "dataset": {"name": "synthetic"},
        "workers": workers,
    }
    return evidence.Run(
        ROOT / "runs" / "x" / "results.json",
        {**base, "batch_size": {"per_worker": per_worker, "total": per_worker * workers}, **record},
    )


@pytest.mark.parametrize(
    "run, kind",
    [
        (sized(2, 64), "weak"),  # each rank stage 1's batch
        (sized(4, 16), "strong"),  # stage 1's 64 split over 4 ranks
        (sized(2, 48), None),  # neither: the runs do not compare
        (sized(1, 64), "weak"),
        (
            sized(2, 32, model={"name": "vgg", "width": 64}),
            None,
        ),  # the same split of another network
    ],
)
def test_a_stage_3_run_compares_with_stage_1_by_weak_or_strong_scaling(run, kind):
    base = sized(1, 64)
    assert comparison.scaling(run, base) == kind
    if kind is None:
        assert comparison.comparable(run, base) and comparison.comparable(run, base, "strong")
    elif kind == "strong":
        assert comparison.comparable(run, base) == ["batch per worker: 16 here, 64 in stage 1"]

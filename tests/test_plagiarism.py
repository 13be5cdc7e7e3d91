"""The plagiarism table (course.instructor.plagiarism): what two submissions of one grading run
share."""

from __future__ import annotations

import csv
import json
import shutil

from course.contracts import results
from course.instructor import plagiarism
from tests.helpers import make_run


def find(folders: dict, tmp_path) -> list[plagiarism.Flag]:
    """The table of `folders`, for an assignment without notebooks (see test_code_similarity.py)."""
    return plagiarism.find(folders, source=tmp_path / "source", release=tmp_path / "release")


def submission(
    tmp_path, student: str, scheduler: str = "pbs", first: int = 1, speed: float = 100.0
):
    """A student's folder with a stage-1 and a stage-3 run and their logs, as jobs <first> and
    <first + 1> (`speed`: their images/sec, which makes two students' runs of the same job numbers
    differ)."""
    folder = tmp_path / student / "distributed_training"
    folder.mkdir(parents=True)
    for number, stage in enumerate(("single_gpu", "multi_node"), start=first):
        path, _ = make_run(
            folder, stage, number, speed + number, communicator="naive" if number > first else None
        )
        record = json.loads(path.read_text())
        if scheduler != "local":  # the same run as a PBS job
            record["job"]["scheduler"] = scheduler
            results.write(path, {k: v for k, v in record.items() if k not in ("seal", "schema")})
    return folder


def test_distinct_submissions_share_nothing(tmp_path):
    folders = {
        "alice": submission(tmp_path, "alice", first=1),
        "bob": submission(tmp_path, "bob", first=11),
    }
    assert find(folders, tmp_path) == []


def test_byte_identical_submissions_are_flagged_on_every_kind(tmp_path):
    alice = submission(tmp_path, "alice")
    bob = tmp_path / "bob" / "distributed_training"
    shutil.copytree(alice, bob)
    flags = find({"alice": alice, "bob": bob}, tmp_path)
    assert {flag.kind for flag in flags} == {
        "job id",
        "run folder",
        "results seal",
        "results file",
        "job log",
    }
    assert all(flag.students == ("alice", "bob") for flag in flags)
    [job] = [flag for flag in flags if flag.kind == "job id" and flag.value == "pbs:1.local"]
    assert job.files == (
        "alice: runs/single_gpu-1.local/results.json",
        "bob: runs/single_gpu-1.local/results.json",
    )
    assert len([flag for flag in flags if flag.kind == "job log"]) == 2


def test_a_classmate_s_run_among_one_s_own_is_flagged(tmp_path):
    alice, carol = submission(tmp_path, "alice"), submission(tmp_path, "carol", first=21)
    shutil.copytree(alice / "runs" / "multi_node-2.local", carol / "runs" / "multi_node-2.local")
    shutil.copy(alice / "run_multi_node_training.sh.o2", carol)
    flags = find(
        {"alice": alice, "bob": submission(tmp_path, "bob", first=11), "carol": carol}, tmp_path
    )
    assert {(flag.kind, flag.students) for flag in flags} == {
        (kind, ("alice", "carol"))
        for kind in ("job id", "run folder", "results seal", "results file", "job log")
    }


def test_the_local_scheduler_s_job_numbers_are_not_flagged(tmp_path):
    """Every student of the embedded scheduler has a job 1.local: only their copied files tell."""
    folders = {
        "alice": submission(tmp_path, "alice", "local"),
        "bob": submission(tmp_path, "bob", "local", speed=90.0),
    }
    assert find(folders, tmp_path) == []


def test_the_table_names_the_shared_item_the_students_and_their_files(tmp_path):
    alice = submission(tmp_path, "alice")
    bob = tmp_path / "bob" / "distributed_training"
    shutil.copytree(alice, bob)
    table = tmp_path / "grades-plagiarism.csv"
    plagiarism.write_csv(find({"alice": alice, "bob": bob}, tmp_path), table)
    with open(table) as f:
        rows = list(csv.DictReader(f))
    assert {
        "kind": "job id",
        "shared": "pbs:2.local",
        "students": "alice bob",
        "files": "alice: runs/multi_node-2.local/results.json; bob: "
        "runs/multi_node-2.local/results.json",
    } in rows


def test_a_junk_results_file_naming_a_classmate_s_job_does_not_list_the_classmate(tmp_path):
    """Job ids are public: a results file of bob's that names alice's PBS job, without the job's
    log, is not a shared job; with alice's log copied beside it, it is."""
    alice, bob = submission(tmp_path, "alice"), submission(tmp_path, "bob", first=11)
    theirs = json.loads((alice / "runs" / "single_gpu-1.local" / "results.json").read_text())
    junk = bob / "runs" / "single_gpu-1.local" / "results.json"
    junk.parent.mkdir()
    junk.write_text(json.dumps({"job": theirs["job"], "segments": [{"job": theirs["job"]}]}))
    assert find({"alice": alice, "bob": bob}, tmp_path) == []
    shutil.copy(alice / "run_single_gpu_training.sh.o1", bob)
    flags = find({"alice": alice, "bob": bob}, tmp_path)
    assert {flag.kind for flag in flags} == {"job id", "run folder", "job log"}
    assert all(flag.students == ("alice", "bob") for flag in flags)

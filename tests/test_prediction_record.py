"""A prediction counts only if it was made before its job ran (course.contracts.prediction).

The contract's writer and reader side by side (course.submit's check and encoding, the job's log
line, the results field); course.evidence tracing a run's prediction, and the planted attacks on
it: the function edited after the runs, the results file's prediction edited (resealed or not),
the log's prediction line edited, runs submitted without a prediction. Each loses exactly the
comparison's two choice thirds, with its own words; the run itself stays traced. Last, a real job
submitted through the local scheduler with a prediction, then graded.
"""

from __future__ import annotations

import json
import os
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from course import evidence
from course.cluster import plan, submit
from course.contracts import jobend, joblog, results
from course.contracts import prediction as contract
from course.errors import JobError
from course.notebook.checks import predictions
from course.runtime import data_prepare
from tests.helpers import local_site, student_folder
from tests.test_predictions import (
    GRADING,
    choosing,
    comparison,
    made,
    solved,
    stage_1_run,
    stage_3_run,
)

RIGHT = {"updates_per_epoch": 31.25, "iterations": 94}
SINGLE_GPU_JOB = "jobs/run_single_gpu_training.sh"


@pytest.fixture(autouse=True)
def rules(tmp_path, monkeypatch):
    path = tmp_path / "grading.toml"
    path.write_text(GRADING)
    monkeypatch.setenv("COURSE_GRADING_CONFIG", str(path))


# --- the contract: course.submit's side and the job's side ------------------------------------


def test_a_prediction_is_checked_stamped_and_travels_without_commas():
    answers = {**RIGHT, "faster_setting": "naive/ring", "more_accurate_rule": "warmup"}
    checked = contract.check("multi_node", answers)
    assert checked == answers and checked is not answers
    value = contract.encode(contract.stamped(checked))
    assert "," not in value and "=" not in value  # qsub -v takes neither in a value
    back = contract.decode(value)
    assert back["answers"] == answers and back["made_at"].endswith("+00:00")
    line = joblog.prediction_line(contract.canonical(back))
    assert joblog.predictions(f"header\n{line}\nThroughput: 1\n") == [contract.canonical(back)]
    assert joblog.predictions(joblog.prediction_line(None)) == [None]
    assert results.problems({"prediction": back}) == results.problems({})  # a declared field
    assert "prediction" in " ".join(results.problems({"prediction": {"answers": {}}}))


class Number(float):
    """A float that says it equals anything: not plain JSON."""

    def __eq__(self, other):
        return True

    __hash__ = float.__hash__


@pytest.mark.parametrize(
    "stage, answers, words",
    [
        ("multi_node", [1, 2], "the prediction is a list, not a dict"),
        ("multi_gpu", {"updates_per_epoch": 1}, "has exactly updates_per_epoch, iterations"),
        ("single_gpu", {**RIGHT, "snapshots_written": 3, "snapshots_kept": 2, "x": 1}, "exactly"),
        ("multi_gpu", {"updates_per_epoch": float("nan"), "iterations": 3}, "plain numbers"),
        ("multi_gpu", {"updates_per_epoch": Number(1), "iterations": 3}, "plain numbers"),
        ("multi_gpu", {"updates_per_epoch": True, "iterations": 3}, "plain numbers"),
        ("multi_gpu", {"updates_per_epoch": "x" * 101, "iterations": 3}, "100 characters"),
        ("jobs/run_allreduce_benchmark.sh", {}, "takes no prediction"),
    ],
)
def test_what_is_not_a_plain_prediction_is_refused_saying_why(stage, answers, words):
    with pytest.raises(JobError, match=words):
        contract.check(stage, answers)


@pytest.mark.parametrize("value", ["not base64!", "e30", "eyJhbnN3ZXJzIjpbXX0"])  # {}, answers []
def test_the_job_refuses_a_prediction_that_course_submit_did_not_write(value):
    with pytest.raises(ValueError, match=contract.ENV):
        contract.decode(value)


# --- the judge: the recorded prediction, not the function's current answer --------------------


def grade(tmp_path, function_source: str | None = None) -> float:
    replaced = {"predict_comparison": function_source} if function_source else {}
    module = solved(tmp_path, "multi_node", **replaced)
    return predictions.comparison_prediction(module.predict_comparison, 3, tmp_path)


def test_the_recorded_prediction_earns_every_point(tmp_path, capsys):
    comparison(tmp_path, naive=80.0, ring=140.0, predicted=made("naive/ring"))
    right_now = choosing("naive/ring", "warmup")
    assert grade(tmp_path, right_now) == 3
    assert "naive/ring wins beyond the noise, as predicted" in capsys.readouterr().out


def test_the_function_edited_after_the_runs_is_not_what_is_graded(tmp_path, capsys):
    comparison(tmp_path, naive=80.0, ring=140.0, predicted=made("naive", "linear"))
    assert grade(tmp_path, choosing("naive/ring", "warmup")) == 1
    said = capsys.readouterr().out
    assert (
        "faster_setting: your function now answers naive/ring, but the prediction recorded when "
        "multi_node-11.local (job 11.local) was submitted (2026-11-20T09:00:00+00:00) says naive: "
        "that one is graded" in said
    )
    assert "naive/ring wins beyond the noise (0.4); your recorded choice was naive" in said


def test_later_runs_submitted_with_another_prediction_do_not_replace_the_first(tmp_path, capsys):
    """The first run is the one that started first (sealed), not the file touched last."""
    comparison(
        tmp_path,
        naive=80.0,
        ring=140.0,
        predicted=made("naive", "linear"),
        later=made("naive/ring"),
    )
    first = next(tmp_path.glob("runs/multi_node-11*/results.json"))
    os.utime(first, (first.stat().st_mtime + 1000,) * 2)  # results.find: now the newest
    assert evidence.runs("multi_node", tmp_path)[-1].path == first
    assert grade(tmp_path, choosing("naive/ring", "warmup")) == 1
    assert (
        "recorded when multi_node-11.local (job 11.local) was submitted" in capsys.readouterr().out
    )


def edit_results(path: Path, answers: dict, reseal: bool) -> None:
    data = json.loads(path.read_text())
    data["prediction"]["answers"].update(answers)
    if reseal:  # as anyone who reads course/contracts/results.py can
        data["seal"] = results.compute_seal(data)
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")


@pytest.mark.parametrize("reseal", [False, True], ids=["as edited", "resealed"])
def test_a_prediction_edited_in_the_results_file_loses_the_choices(tmp_path, capsys, reseal):
    comparison(tmp_path, naive=80.0, ring=140.0, predicted=made("naive", "linear"))
    better = {"faster_setting": "naive/ring", "more_accurate_rule": "warmup"}
    for path in tmp_path.glob("runs/*/results.json"):
        edit_results(path, better, reseal)
    [first, *_] = found = evidence.runs("multi_node", tmp_path)
    assert all(run.traced for run in found), [run.problems for run in found]  # still the job's run
    assert first.prediction is None
    assert grade(tmp_path, choosing("naive/ring", "warmup")) == 1
    said = capsys.readouterr().out
    assert (
        "the prediction recorded with multi_node-11.local (job 11.local) does not count: the "
        "prediction in multi_node-11.local/results.json was changed after job 11.local wrote it"
        in said
    )
    assert "cannot be changed after its job ran" in said


def test_the_results_file_edited_beyond_its_prediction_is_no_run(tmp_path):
    comparison(tmp_path, naive=80.0, ring=140.0, predicted=made("naive/ring"))
    path = next(tmp_path.glob("runs/multi_node-11*/results.json"))
    data = json.loads(path.read_text())
    data["throughput"]["images_per_sec"] = 1000.0
    data["prediction"]["answers"]["faster_setting"] = "naive"
    data["seal"] = results.compute_seal(data)
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    [first] = [run for run in evidence.runs("multi_node", tmp_path) if run.path == path]
    assert any("results file differs from the one job 11.local" in p for p in first.problems)


@pytest.mark.parametrize(
    "edit, words",
    [
        (
            lambda line: line.replace('"naive"', '"naive/ring"'),
            "the prediction line in run_multi_node_training.sh.o11 is not the prediction "
            "multi_node-11.local/results.json records: the log was edited",
        ),
        (
            lambda line: "",
            "run_multi_node_training.sh.o11 shows no prediction line, but "
            "multi_node-11.local/results.json records one: the log was edited",
        ),
        (
            lambda line: line + "\n" + line,
            "run_multi_node_training.sh.o11 shows 2 prediction lines; a job prints one",
        ),
    ],
    ids=["changed", "removed", "repeated"],
)
def test_a_prediction_line_edited_in_the_log_loses_the_choices(tmp_path, capsys, edit, words):
    comparison(tmp_path, naive=80.0, ring=140.0, predicted=made("naive", "linear"))
    log = tmp_path / "run_multi_node_training.sh.o11"
    lines = log.read_text().splitlines()
    [at] = [i for i, line in enumerate(lines) if "prediction submitted" in line]
    lines[at] = edit(lines[at])
    log.write_text("\n".join(lines) + "\n")
    assert grade(tmp_path, choosing("naive/ring", "warmup")) == 1
    said = capsys.readouterr().out
    assert words in said


@pytest.mark.parametrize("predicted", [None, ...], ids=["submitted without", "kit before"])
def test_runs_submitted_without_a_prediction_earn_no_choice(tmp_path, capsys, predicted):
    for number, speed, accuracy, setting in (
        (11, 80.0, 0.896, {}),
        (12, 140.0, 0.896, {"allreduce": "ring"}),
        (13, 120.0, 0.816, {"rule": "linear"}),
    ):
        stage_3_run(tmp_path, number, speed, accuracy, predicted=predicted, **setting)
    assert grade(tmp_path) == 1
    said = capsys.readouterr().out
    assert (
        "no prediction was recorded with multi_node-11.local (job 11.local), the first run this "
        "question compares: it was submitted without one" in said
    )
    assert "run the cell that defines your prediction, then the cell that submits the jobs" in said


def test_stage_1_grades_its_derivations_from_the_function_and_shows_the_recorded_one(
    tmp_path, capsys
):
    answers = {
        "updates_per_epoch": 62.5,
        "iterations": 186,
        "snapshots_written": 3,
        "snapshots_kept": 2,
    }
    stage_1_run(tmp_path, predicted={"made_at": "2026-11-20T09:00:00+00:00", "answers": answers})
    module = solved(tmp_path, "single_gpu")
    assert predictions.run_prediction(module.predict_run, "single_gpu", 2, tmp_path) == 2
    said = capsys.readouterr().out
    assert "recorded with single_gpu-1.local (job 1.local) when it was submitted" in said
    assert "iterations: your function now answers 188.0; when single_gpu-1.local" in said
    assert "graded from your function" in said


# --- a real job, submitted with its prediction ------------------------------------------------


@pytest.mark.integration
@pytest.mark.slow
def test_a_job_submitted_with_a_prediction_records_it_and_is_graded_on_it(
    tmp_path, quick_env, monkeypatch
):
    for name in ("CHAINER_DATASET_ROOT", "XDG_STATE_HOME", "COURSE_DATASET", "COURSE_TRAIN_ARGS"):
        monkeypatch.setenv(name, quick_env[name])
    folder = student_folder(tmp_path, "student", "single_gpu")
    module = solved(tmp_path, "single_gpu")
    said: list[str] = []
    job = submit.submit(
        "jobs/run_single_gpu_training.sh",
        scheduler="local",
        workdir=folder,
        echo=said.append,
        predict=module.predict_run,
    )
    job.wait(timeout=600, echo=None)
    assert job.exit_status() == 0, job.find_log().read_text()
    # the small set's 1024 images at 32 per step for 2 epochs (quick_env's COURSE_TRAIN_ARGS)
    expected = {"updates_per_epoch": 32.0, "iterations": 64, "snapshots_written": 2}
    assert said[0].startswith("submitted jobs/run_single_gpu_training.sh as job")
    assert said[1].startswith("your prediction for (1024, 32, 2), recorded with the job")
    [run] = evidence.runs("single_gpu", folder)
    assert run.traced, run.problems
    assert run.prediction["answers"] == {**expected, "snapshots_kept": 2}
    assert joblog.predictions(joblog.read(run.log)) == [contract.canonical(run.prediction)]
    assert predictions.run_prediction(module.predict_run, "single_gpu", 2, folder) == 2


def first_job_log(folder: Path, shown: dict) -> None:
    """The log of job 10.local, which started the run that job 11.local resumed: its header, the
    prediction submitted with it, its end."""
    header = joblog.RunHeader(
        "multi_node", "10.local", "local", 2, ["n1"] * 2, ["@numpy"] * 2, 64, 0.1
    )
    lines = [
        header.format(),
        joblog.prediction_line(contract.canonical(shown)),
        jobend.end_line("10.local", 0, datetime(2026, 11, 20, 10, 30, tzinfo=UTC)),
    ]
    (folder / "run_multi_node_training.sh.o10").write_text("\n".join(lines) + "\n")


def resumed_run(folder: Path, first: dict, second: dict) -> evidence.Run:
    """A stage-3 run started by job 10.local with `first`, resumed by 11.local with `second`."""
    job = {"name": "run_multi_node_training.sh", "scheduler": "local"}
    segments = [
        {"job": {**job, "id": "10.local"}, "snapshot_at": "2026-11-20T10:20:00+00:00"},
        {"job": {**job, "id": "11.local"}, "snapshot_at": None},
    ]
    stage_3_run(folder, 11, 80.0, 0.896, predicted=second)
    path = next(folder.glob("runs/multi_node-11*/results.json"))
    data = json.loads(path.read_text())
    data.update(segments=segments, prediction=first)  # as the job wrote it: the run's first one
    digest = results.write(path, {k: v for k, v in data.items() if k not in ("seal", "schema")})
    log = folder / "run_multi_node_training.sh.o11"
    log.write_text(re.sub(r"sha256=[0-9a-f]{64}", f"sha256={digest}", log.read_text()))
    first_job_log(folder, first)
    [run] = evidence.runs("multi_node", folder)
    return run


def test_a_resumed_run_keeps_the_prediction_of_the_job_that_started_it(tmp_path):
    run = resumed_run(tmp_path, made("naive", "linear"), made("naive/ring"))
    assert run.traced, run.problems
    assert run.prediction == made("naive", "linear")


def test_a_resumed_run_s_first_log_edited_loses_its_prediction(tmp_path):
    run = resumed_run(tmp_path, made("naive", "linear"), made("naive/ring"))
    log = tmp_path / "run_multi_node_training.sh.o10"
    log.write_text(log.read_text().replace('"naive"', '"naive/ring"'))
    [run] = evidence.runs("multi_node", tmp_path)
    assert run.traced and run.prediction is None
    assert run.prediction_problem == (
        "the prediction line in run_multi_node_training.sh.o10 is not the prediction "
        "multi_node-11.local/results.json records: the log was edited"
    )


# --- course.submit's side: what the prediction function is asked, and what it refuses ----------


@pytest.fixture
def site(tmp_path, data_root, monkeypatch):
    """A folder with the local site applied (synthetic data, 64 per step, 3 epochs) and a small
    synthetic set of 200 training images."""
    for name in ("COURSE_TRAIN_ARGS", "COURSE_DATASET"):
        monkeypatch.delenv(name, raising=False)
    data_prepare.prepare_synthetic(200, 20)
    (tmp_path / "student").mkdir()
    return local_site(tmp_path / "student")


def test_the_prediction_function_is_asked_about_the_site_s_job(site):
    assert plan.prediction_args("single_gpu", site) == [200, 64, 3]
    assert plan.prediction_args("multi_gpu", site) == [200, 64, 1, 3]  # no GPU here: one
    assert plan.prediction_args("multi_node", site) == [200, 64, 2, 3]  # the plan's most ranks


def test_a_stub_or_a_job_without_prediction_is_not_submitted(site):
    def predict_run(train_size, batchsize, epochs):
        raise NotImplementedError()

    with pytest.raises(NotImplementedError, match="predict_run is not written yet"):
        submit.submit(SINGLE_GPU_JOB, workdir=site, predict=predict_run, echo=None)
    with pytest.raises(JobError, match="takes no prediction"):
        submit.submit("jobs/run_allreduce_benchmark.sh", workdir=site, predict=dict, echo=None)
    assert not (site / results.RUNS_DIR).exists()

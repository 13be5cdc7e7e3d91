"""Predict, then run (course.notebook.checks.predictions): the solutions' predictions earn
every point against traced runs (their choices as recorded with the jobs, which
tests/test_prediction_record.py attacks); each planted mistake (a wrong derivation, a choice the
measurement contradicts beyond the noise) loses exactly its part, with words that name it, both
with the functions themselves and with Remote handles; a choice within the noise counts either
way; nothing counts without a traced run, and a stub says so before anything about the runs."""

from __future__ import annotations

import glob
from pathlib import Path

import pytest

from course.contracts import grading_rules
from course.notebook.checks import CheckFailed, predictions
from course.notebook.checks.observe import observe
from tests.helpers import make_run, notebook_module, replaced_once
from tests.remote import HANDLES, RemoteRaised
from tests.solutions import solution_functions

GRADING = """
[prediction]
throughput_noise = 0.1
accuracy_noise = 0.05
[prediction.cpu]
throughput_noise = 0.4
"""


@pytest.fixture(autouse=True)
def rules(tmp_path, monkeypatch):
    path = tmp_path / "grading.toml"
    path.write_text(GRADING)
    monkeypatch.setenv(grading_rules.OVERRIDE, str(path))


def log(epochs: int, per_epoch: float, accuracy: float = 0.9) -> list[dict]:
    """A run's log: the iteration at each epoch's end, as SerialIterator's epochs make it."""
    return [
        {
            "epoch": e,
            "iteration": -(-e * int(per_epoch * 64) // 64),
            "validation/main/accuracy": accuracy,
        }
        for e in range(1, epochs + 1)
    ]


def made(setting: str = "naive", rule: str = "warmup") -> dict:
    """The prediction a job records when the notebook's cell submits it with these choices."""
    answers = {
        "updates_per_epoch": 31.25,
        "iterations": 94,
        "faster_setting": setting,
        "more_accurate_rule": rule,
    }
    return {"made_at": "2026-11-20T09:00:00+00:00", "answers": answers}


def stage_1_run(folder, *, written: int = 3, kept: int = 2, predicted=...) -> None:
    """A traced stage-1 run of 3 epochs over 4000 images at 64 per step (62.5 updates per epoch)."""
    make_run(
        folder,
        "single_gpu",
        1,
        75.0,
        device_kind="cpu",
        predicted=predicted,
        fields={
            "batch_size": {"per_worker": 64, "total": 64},
            "dataset": {"name": "synthetic", "train_per_worker": 4000},
            "epochs_planned": 3,
            "log": log(3, 62.5),
            "snapshots": {
                "seconds": [0.2] * written,
                "files": [f"snapshot_iter_{i}" for i in range(kept)],
            },
        },
    )


def stage_3_run(
    folder,
    number,
    images_per_sec,
    accuracy,
    *,
    rule="warmup",
    allreduce=None,
    predicted=...,
    workers=2,
):
    """A traced stage-3 run on `workers` ranks: 2000 images per rank at 64 per step for 3 epochs,
    started `number` minutes past ten."""
    make_run(
        folder,
        "multi_node",
        number,
        images_per_sec,
        workers,
        device_kind="cpu",
        communicator="naive",
        allreduce=allreduce,
        age=100 - number,
        predicted=predicted,
        fields={
            "started_at": f"2026-11-20T10:{number:02d}:00+00:00",
            "batch_size": {"per_worker": 64, "total": 64 * workers},
            "dataset": {"name": "synthetic", "train_per_worker": 2000},
            "epochs_planned": 3,
            "lr_schedule": {"rule": rule, "start": 0.05, "target": 0.1, "warmup_iterations": 32},
            "log": log(3, 31.25, accuracy),
        },
    )


def comparison(
    folder, naive=145.0, ring=118.0, warmup=0.896, linear=0.816, predicted=..., later=...
) -> None:
    """Three runs submitted with `predicted` (default: the solution's choices), the later two
    with `later` where given."""
    predicted = made() if predicted is ... else predicted
    later = predicted if later is ... else later
    stage_3_run(folder, 11, naive, warmup, predicted=predicted)
    stage_3_run(folder, 12, ring, warmup, allreduce="ring", predicted=later)
    stage_3_run(folder, 13, 120.0, linear, rule="linear", predicted=later)


def profiled(folder, medians: dict | None = None) -> None:
    """A traced 2-rank profiled run: 850 ms of compute and 3 ms of exchange at 64 per rank (or
    `medians` on every rank)."""
    ranks = [
        {
            "rank": rank,
            "host": "n1",
            "steps": 40,
            "median_ms": medians
            or {"forward": 300.0, "backward": 550.0 + rank, "allreduce": 3.0 + rank},
        }
        for rank in range(2)
    ]
    make_run(
        folder,
        "multi_node",
        20,
        130.0,
        2,
        device_kind="cpu",
        communicator="naive",
        allreduce="ring",
        fields={
            "batch_size": {"per_worker": 64, "total": 128},
            "profile": {"phases": ["forward", "backward", "allreduce"], "ranks": ranks},
        },
    )


def solved(tmp_path, stage: str, **replaced: str):
    return notebook_module(tmp_path, stage, **replaced)


# --- stage 1 ----------------------------------------------------------------------------------


@HANDLES
def test_the_solution_s_prediction_holds_against_its_run(handle, tmp_path, capsys):
    stage_1_run(tmp_path)
    module = solved(tmp_path, "single_gpu")
    assert predictions.run_prediction(handle(module.predict_run), "single_gpu", 2, tmp_path) == 2
    assert (
        predictions.run_prediction(
            handle(module.predict_run), "single_gpu", 2, tmp_path, cases=[(50000, 128, 1, 4)]
        )
        == 2
    )
    assert "2 of 2 parts of your prediction hold" in capsys.readouterr().out


FLOORED = replaced_once(
    solution_functions("single_gpu")["predict_run"],
    '"iterations": -(-epochs * train_size // batchsize)',
    '"iterations": epochs * (train_size // batchsize)',
)
ALL_KEPT = replaced_once(
    solution_functions("single_gpu")["predict_run"],
    '"snapshots_kept": min(epochs, 2)',
    '"snapshots_kept": epochs',
)


@HANDLES
@pytest.mark.parametrize(
    "planted, words",
    [
        (FLOORED, "iterations: predicted 186.0, which is not what the run made"),
        (ALL_KEPT, "predicted 3.0 written and 3.0 kept, which is not what the run wrote and kept"),
    ],
    ids=["updates rounded down", "every snapshot kept"],
)
def test_a_wrong_part_of_the_stage_1_prediction_loses_its_half(
    handle, planted, words, tmp_path, capsys
):
    stage_1_run(tmp_path)
    module = solved(tmp_path, "single_gpu", predict_run=planted)
    assert predictions.run_prediction(handle(module.predict_run), "single_gpu", 2, tmp_path) == 1
    said = capsys.readouterr().out
    assert "did not hold" in said and words in said and "1 of 2 parts" in said


def test_a_prediction_right_for_the_run_but_wrong_for_other_settings_loses_the_part(tmp_path):
    """Hard-coded numbers of one's own run fail the check's own example and the grader's cases."""
    stage_1_run(tmp_path)
    hard_coded = (
        "def predict_run(train_size, batchsize, epochs):\n"
        "    return {'updates_per_epoch': 62.5, 'iterations': 188, 'snapshots_written': 3,\n"
        "            'snapshots_kept': 2}\n"
    )
    module = solved(tmp_path, "single_gpu", predict_run=hard_coded)
    assert predictions.run_prediction(module.predict_run, "single_gpu", 2, tmp_path) == 1


SNAPSHOTS_HARD_CODED = replaced_once(
    replaced_once(
        solution_functions("single_gpu")["predict_run"],
        '"snapshots_written": epochs',
        '"snapshots_written": 3',
    ),
    '"snapshots_kept": min(epochs, 2)',
    '"snapshots_kept": 2',
)


def test_snapshots_hard_coded_from_one_s_own_run_lose_their_half(tmp_path, capsys):
    """Snapshots are a derivation too: one at every epoch end, the newest two kept (add_snapshots'
    n_retains=2); the grader's cases of 4 epochs and of 1 catch 3 and 2 copied from the run."""
    stage_1_run(tmp_path)
    module = solved(tmp_path, "single_gpu", predict_run=SNAPSHOTS_HARD_CODED)
    cases = [(50000, 128, 1, 4), (777, 10, 1, 1)]
    assert predictions.run_prediction(module.predict_run, "single_gpu", 2, tmp_path) == 2
    assert (
        predictions.run_prediction(module.predict_run, "single_gpu", 2, tmp_path, cases=cases) == 1
    )
    said = capsys.readouterr().out
    assert (
        "snapshots did not hold: for (50000, 128, 4): predicted 3.0 written and 2.0 kept, which "
        "is not what this setting writes and keeps; for (777, 10, 1): predicted 3.0 written and "
        "2.0 kept, which is not what this setting writes and keeps" in said
    )


def test_without_a_traced_run_a_right_prediction_earns_nothing(tmp_path):
    module = solved(tmp_path, "multi_gpu")
    with pytest.raises(CheckFailed) as raised:
        predictions.run_prediction(module.predict_run, "multi_gpu", 2, tmp_path)
    said = str(raised.value)
    assert "there is no traced multi_gpu run" in said
    assert "right for the check's own settings" in said and "once the job" in said


def test_stage_2_s_visible_check_says_not_yet_on_a_site_without_its_run(tmp_path, capsys):
    """As its efficiency check does: the notebook runs on, the grader's check gives no points."""
    module = solved(tmp_path, "multi_gpu")
    assert (
        predictions.run_prediction(module.predict_run, "multi_gpu", 2, tmp_path, required=False)
        == 0
    )
    said = capsys.readouterr().out
    assert said.startswith("NOT YET: there is no traced multi_gpu run") and "right for" in said


@HANDLES
def test_a_stub_says_so_before_anything_about_the_runs(handle, tmp_path):
    stub = "def predict_run(train_size, batchsize, epochs):\n    raise NotImplementedError()\n"
    module = solved(tmp_path, "single_gpu", predict_run=stub)
    with pytest.raises((NotImplementedError, RemoteRaised)) as raised:
        predictions.run_prediction(handle(module.predict_run), "single_gpu", 2, tmp_path)
    assert raised.type is NotImplementedError or "NotImplementedError" in str(raised.value)


FORGED = """
class Agreeable(float):
    def __eq__(self, other):
        return True
    def __sub__(self, other):
        return 0.0
    __hash__ = float.__hash__


class Answers(dict):
    def get(self, key, default=None):
        return Agreeable(0)
    def items(self):
        return [(key, Agreeable(0)) for key in ("updates_per_epoch", "iterations")]


def predict_run(train_size, batchsize, epochs):
    return Answers(updates_per_epoch=Agreeable(0), iterations=Agreeable(0), snapshots_written=3,
                   snapshots_kept=2)
"""


@HANDLES
def test_numbers_that_agree_with_anything_are_read_as_what_they_are(handle, tmp_path, capsys):
    stage_1_run(tmp_path)
    module = solved(tmp_path, "single_gpu", predict_run=FORGED)
    assert predictions.run_prediction(handle(module.predict_run), "single_gpu", 2, tmp_path) == 1
    assert "updates per epoch: predicted 0.0" in capsys.readouterr().out


# --- stage 3: the comparison ------------------------------------------------------------------


@HANDLES
def test_the_solution_s_comparison_prediction_holds(handle, tmp_path, capsys):
    comparison(tmp_path)
    module = solved(tmp_path, "multi_node")
    assert (
        predictions.comparison_prediction(
            handle(module.predict_comparison), 3, tmp_path, cases=[(60000, 100, 4, 2)]
        )
        == 3
    )
    said = capsys.readouterr().out
    assert "faster setting: naive 145; naive/ring 118: within the noise (0.4)" in said
    assert "warmup wins beyond the noise, as predicted" in said


def choosing(setting: str, rule: str) -> str:
    source = solution_functions("multi_node")["predict_comparison"]
    source = replaced_once(source, '"faster_setting": "naive"', f'"faster_setting": "{setting}"')
    return replaced_once(
        source, '"more_accurate_rule": "warmup"', f'"more_accurate_rule": "{rule}"'
    )


@HANDLES
@pytest.mark.parametrize("setting", ["naive", "naive/ring"])
def test_a_choice_within_the_noise_counts_either_way(handle, setting, tmp_path):
    comparison(
        tmp_path,
        naive=140.0,
        ring=110.0,
        warmup=0.90,
        linear=0.88,
        predicted=made(setting, "linear"),
    )
    module = solved(tmp_path, "multi_node", predict_comparison=choosing(setting, "linear"))
    assert predictions.comparison_prediction(handle(module.predict_comparison), 3, tmp_path) == 3


@HANDLES
def test_a_choice_the_measurement_contradicts_beyond_the_noise_loses_its_third(
    handle, tmp_path, capsys
):
    # the ring 75% faster; warmup 8 points ahead
    comparison(tmp_path, naive=80.0, ring=140.0, predicted=made("naive", "linear"))
    module = solved(tmp_path, "multi_node", predict_comparison=choosing("naive", "linear"))
    assert predictions.comparison_prediction(handle(module.predict_comparison), 3, tmp_path) == 1
    said = capsys.readouterr().out
    assert "naive/ring wins beyond the noise (0.4); your recorded choice was naive" in said
    assert "warmup wins beyond the noise (0.05); your recorded choice was linear" in said


def test_a_choice_that_is_no_setting_of_the_comparison_misses(tmp_path, capsys):
    comparison(tmp_path, predicted=made("pure_nccl", "warmup"))
    module = solved(tmp_path, "multi_node", predict_comparison=choosing("pure_nccl", "warmup"))
    assert predictions.comparison_prediction(module.predict_comparison, 3, tmp_path) == 2
    assert "you chose pure_nccl, which is not one of those compared: naive, naive/ring" in (
        capsys.readouterr().out
    )


def test_a_comparison_with_one_setting_cannot_grade_the_choice(tmp_path, capsys):
    stage_3_run(tmp_path, 11, 145.0, 0.896, predicted=made())
    stage_3_run(tmp_path, 13, 120.0, 0.816, rule="linear", predicted=made())
    module = solved(tmp_path, "multi_node")
    assert predictions.comparison_prediction(module.predict_comparison, 3, tmp_path) == 2
    said = capsys.readouterr().out
    assert "only the setting naive has traced runs on 2 ranks; the comparison needs two" in said


def test_an_honest_run_more_on_more_ranks_never_lowers_the_score(tmp_path, capsys):
    """Issue 44: the comparison made on 2 ranks, then one warm-up run on 4 (one setting only
    there): still every point, judged on the 2 ranks' comparison. Once the 4 ranks hold a whole
    comparison that grades as well, they are the ones judged (the most ranks)."""
    comparison(tmp_path)
    stage_3_run(tmp_path, 20, 250.0, 0.90, predicted=made(), workers=4)
    module = solved(tmp_path, "multi_node")
    assert predictions.comparison_prediction(module.predict_comparison, 3, tmp_path) == 3
    said = capsys.readouterr().out
    assert "naive 145; naive/ring 118" in said and "only the setting" not in said
    stage_3_run(tmp_path, 21, 200.0, 0.90, allreduce="ring", predicted=made(), workers=4)
    stage_3_run(tmp_path, 22, 210.0, 0.80, rule="linear", predicted=made(), workers=4)
    assert predictions.comparison_prediction(module.predict_comparison, 3, tmp_path) == 3
    assert "naive 250; naive/ring 200" in capsys.readouterr().out


def test_updates_per_epoch_of_the_whole_set_lose_the_derivation(tmp_path, capsys):
    comparison(tmp_path)
    wrong = replaced_once(
        solution_functions("multi_node")["predict_comparison"],
        "shard = train_size // ranks",
        "shard = train_size",
    )
    module = solved(tmp_path, "multi_node", predict_comparison=wrong)
    assert predictions.comparison_prediction(module.predict_comparison, 3, tmp_path) == 2
    said = capsys.readouterr().out
    assert (
        "predicted 62.5, which is not what each worker's 2000 images in batches of 64 make" in said
    )


# --- stage 3: the compute/exchange ratio ------------------------------------------------------


@HANDLES
def test_the_solution_s_ratio_matches_the_profile(handle, tmp_path, capsys):
    profiled(tmp_path)
    module = solved(tmp_path, "multi_node")
    assert (
        predictions.exchange_ratio(
            handle(module.compute_to_exchange), 2, tmp_path, cases=[(12.5, 40.0, 64)]
        )
        == 2
    )
    # medians of the two ranks (sorted, the upper one): 851 ms of compute, 4 ms of exchange
    assert "compute 851.0 ms, exchange 4.00 ms per step at 64 images per rank" in (
        capsys.readouterr().out
    )


@HANDLES
def test_a_ratio_upside_down_loses_the_points(handle, tmp_path):
    profiled(tmp_path)
    upside_down = replaced_once(
        solution_functions("multi_node")["compute_to_exchange"],
        "ratio = compute_ms / exchange_ms",
        "ratio = exchange_ms / compute_ms",
    )
    module = solved(tmp_path, "multi_node", compute_to_exchange=upside_down)
    with pytest.raises((CheckFailed, RemoteRaised)) as raised:
        predictions.exchange_ratio(handle(module.compute_to_exchange), 2, tmp_path)
    assert "ratio for compute 120 ms, exchange 30 ms, batch 32: 0.25 is not it" in str(raised.value)


def test_without_a_profiled_run_the_ratio_earns_nothing(tmp_path):
    comparison(tmp_path)
    module = solved(tmp_path, "multi_node")
    with pytest.raises(CheckFailed, match="no traced stage-3 run with a step profile"):
        predictions.exchange_ratio(module.compute_to_exchange, 2, tmp_path)


@pytest.mark.parametrize(
    "medians, words",
    [
        (
            {"forward": None, "backward": None, "allreduce": None},
            "has no median time for forward, backward, allreduce on rank(s) 0, 1: they made no "
            "step past the warm-up ones",
        ),
        (
            {"forward": 300.0, "backward": 550.0, "allreduce": 0.0},
            "times the gradient exchange at 0.0 ms per step",
        ),
    ],
    ids=["no steady step", "no exchange"],
)
def test_a_profile_without_medians_or_exchange_fails_saying_what_to_do(medians, words, tmp_path):
    """runtime/profile.py writes None medians for a rank without a steady step; rounded to the
    microsecond, an exchange can read 0.0 ms: a clear failure, never a TypeError or a division
    by zero."""
    profiled(tmp_path, medians)
    module = solved(tmp_path, "multi_node")
    with pytest.raises(CheckFailed) as raised:
        predictions.exchange_ratio(module.compute_to_exchange, 2, tmp_path)
    said = str(raised.value)
    assert words in said and "submit the profiled runs again" in said


# --- a prediction runs away from the runs it predicts -----------------------------------------

READS_RUNS = """
def predict_run(train_size, batchsize, epochs):
    import glob
    if train_size == 0:
        raise ValueError("no images")
    return {"runs": len(glob.glob("runs/*/*")), "here": len(glob.glob("*"))}
"""


@HANDLES
def test_a_prediction_cannot_read_the_runs_beside_it(handle, tmp_path, monkeypatch):
    stage_1_run(tmp_path)
    monkeypatch.chdir(tmp_path)
    module = solved(tmp_path, "single_gpu", predict_run=READS_RUNS)
    assert glob.glob("runs/*/*")  # the run is there, relative to here
    facts = observe(predictions.predicted, handle(module.predict_run), args=[1000, 32, 3])
    assert facts == {"returned": {"runs": 0.0, "here": 0.0}}
    with pytest.raises((ValueError, RemoteRaised)):
        observe(predictions.predicted, handle(module.predict_run), args=[0, 32, 3])
    assert Path.cwd() == tmp_path  # given back, after an exception too

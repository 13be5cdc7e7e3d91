"""The marking of the prediction checks (course.notebook.checks.predictions and the words of
prediction_words, which course.notebook.checks.recorded prints too), as tests/test_i18n_pseudo.py
does stage 1's: the planted mistakes and the situations of tests/test_predictions.py and
tests/test_prediction_record.py, built with their helpers, under the pseudo-locale. Every line a
student sees carries the markers: what the check prints (the parts that hold or not, the runs'
numbers, the recorded prediction) and its failures."""

from __future__ import annotations

import pytest

from course import i18n
from course.contracts import grading_rules
from course.notebook.checks import CheckFailed, predictions
from tests import test_predictions
from tests.helpers import replaced_once
from tests.solutions import solution_functions
from tests.test_i18n_pseudo import unmarked
from tests.test_i18n_pseudo_scaling import bare, table
from tests.test_predictions import (
    SNAPSHOTS_HARD_CODED,
    choosing,
    comparison,
    made,
    profiled,
    solved,
    stage_1_run,
    stage_3_run,
)

PLANTED = table(
    test_predictions.test_a_wrong_part_of_the_stage_1_prediction_loses_its_half, "planted, words"
)
NOT_A_DICT = "def predict_run(train_size, batchsize, epochs):\n    return [train_size, batchsize]\n"
NO_KEYS = "def predict_run(train_size, batchsize, epochs):\n    return {'iterations': 1}\n"


def _stage_1(tmp_path, source=None, **kwargs):
    module = solved(tmp_path, "single_gpu", **({"predict_run": source} if source else {}))
    return predictions.run_prediction(module.predict_run, "single_gpu", 2, tmp_path, **kwargs)


def _comparison(tmp_path, source=None):
    replaced = {"predict_comparison": source} if source else {}
    module = solved(tmp_path, "multi_node", **replaced)
    return predictions.comparison_prediction(module.predict_comparison, 3, tmp_path)


def _ratio(tmp_path, source=None):
    module = solved(tmp_path, "multi_node", **({"compute_to_exchange": source} if source else {}))
    return predictions.exchange_ratio(module.compute_to_exchange, 2, tmp_path)


def _recorded_stage_1(tmp_path):
    answers = {"updates_per_epoch": 62.5, "iterations": 186, "snapshots_written": 3}
    stage_1_run(tmp_path, predicted={"made_at": "2026-11-20T09:00:00+00:00", "answers": answers})
    return _stage_1(tmp_path)


def _unrecorded_comparison(tmp_path):
    for number, speed, accuracy, setting in (
        (11, 80.0, 0.896, {}),
        (12, 140.0, 0.896, {"allreduce": "ring"}),
        (13, 120.0, 0.816, {"rule": "linear"}),
    ):
        stage_3_run(tmp_path, number, speed, accuracy, predicted=None, **setting)
    return _comparison(tmp_path)


UPSIDE_DOWN = replaced_once(
    solution_functions("multi_node")["compute_to_exchange"],
    "ratio = compute_ms / exchange_ms",
    "ratio = exchange_ms / compute_ms",
)
WHOLE_SET = replaced_once(
    solution_functions("multi_node")["predict_comparison"],
    "shard = train_size // ranks",
    "shard = train_size",
)
# What a student runs, on runs made with tests/test_predictions.py's helpers, and words of what
# the check says then (the same as in English, between the markers).
SITUATIONS = {
    **{
        f"stage 1, {words}": (
            lambda tmp_path, planted=planted: (stage_1_run(tmp_path), _stage_1(tmp_path, planted)),
            words,
        )
        for planted, words in PLANTED
    },
    "stage 1, the snapshots of one's own run": (
        lambda tmp_path: (
            stage_1_run(tmp_path),
            _stage_1(tmp_path, SNAPSHOTS_HARD_CODED, cases=[(50000, 128, 1, 4), (777, 10, 1, 1)]),
        ),
        "which is not what this setting writes and keeps",
    ),
    "stage 1, the prediction recorded with the run": (
        _recorded_stage_1,
        "iterations: your function now answers 188.0; when single_gpu-1.local",
    ),
    "stage 1, no dict": (
        lambda tmp_path: _stage_1(tmp_path, NOT_A_DICT),
        "predict_run returned a list, not a dict",
    ),
    "stage 1, no keys": (
        lambda tmp_path: _stage_1(tmp_path, NO_KEYS),
        "predict_run(1000, 32, 3) has no updates_per_epoch, snapshots_written, snapshots_kept",
    ),
    "stage 2, no run": (
        lambda tmp_path: predictions.run_prediction(
            solved(tmp_path, "multi_gpu").predict_run, "multi_gpu", 2, tmp_path
        ),
        "there is no traced multi_gpu run",
    ),
    "stage 2, not yet": (
        lambda tmp_path: predictions.run_prediction(
            solved(tmp_path, "multi_gpu").predict_run, "multi_gpu", 2, tmp_path, required=False
        ),
        "NOT YET: there is no traced multi_gpu run",
    ),
    "stage 3, as predicted": (
        lambda tmp_path: (comparison(tmp_path), _comparison(tmp_path)),
        "warmup wins beyond the noise, as predicted",
    ),
    "stage 3, contradicted": (
        lambda tmp_path: (
            comparison(tmp_path, naive=80.0, ring=140.0, predicted=made("naive", "linear")),
            _comparison(tmp_path, choosing("naive", "linear")),
        ),
        "naive/ring wins beyond the noise (0.4); your recorded choice was naive",
    ),
    "stage 3, no such setting": (
        lambda tmp_path: (
            comparison(tmp_path, predicted=made("pure_nccl", "warmup")),
            _comparison(tmp_path, choosing("pure_nccl", "warmup")),
        ),
        "you chose pure_nccl, which is not one of those compared: naive, naive/ring",
    ),
    "stage 3, one setting": (
        lambda tmp_path: (
            stage_3_run(tmp_path, 11, 145.0, 0.896, predicted=made()),
            stage_3_run(tmp_path, 13, 120.0, 0.816, rule="linear", predicted=made()),
            _comparison(tmp_path),
        ),
        "only the setting naive has traced runs on 2 ranks",
    ),
    "stage 3, the whole set": (
        lambda tmp_path: (comparison(tmp_path), _comparison(tmp_path, WHOLE_SET)),
        "predicted 62.5, which is not what each worker's 2000 images in batches of 64 make",
    ),
    "stage 3, submitted without a prediction": (
        _unrecorded_comparison,
        "no prediction was recorded with multi_node-11.local (job 11.local)",
    ),
    "ratio, as profiled": (
        lambda tmp_path: (profiled(tmp_path), _ratio(tmp_path)),
        "compute 851.0 ms, exchange 4.00 ms per step at 64 images per rank",
    ),
    "ratio, upside down": (
        lambda tmp_path: (profiled(tmp_path), _ratio(tmp_path, UPSIDE_DOWN)),
        "ratio for compute 120 ms, exchange 30 ms, batch 32: 0.25 is not it",
    ),
    "ratio, no profile": (
        lambda tmp_path: (comparison(tmp_path), _ratio(tmp_path)),
        "no traced stage-3 run with a step profile",
    ),
    "ratio, no steady step": (
        lambda tmp_path: (
            profiled(tmp_path, {"forward": None, "backward": None, "allreduce": None}),
            _ratio(tmp_path),
        ),
        "has no median time for forward, backward, allreduce on rank(s) 0, 1",
    ),
    "ratio, no exchange": (
        lambda tmp_path: (
            profiled(tmp_path, {"forward": 300.0, "backward": 550.0, "allreduce": 0.0}),
            _ratio(tmp_path),
        ),
        "times the gradient exchange at 0.0 ms per step",
    ),
}


@pytest.fixture(autouse=True)
def pseudo_locale_and_rules(tmp_path, monkeypatch):
    rules = tmp_path / "grading.toml"
    rules.write_text(test_predictions.GRADING)
    monkeypatch.setenv(grading_rules.OVERRIDE, str(rules))
    monkeypatch.setenv(i18n.VARIABLE, i18n.PSEUDO)


@pytest.mark.parametrize("situation", SITUATIONS)
def test_every_line_a_prediction_check_shows_is_translated(situation, tmp_path, capsys):
    run, words = SITUATIONS[situation]
    try:
        run(tmp_path)
        failure = ""
    except CheckFailed as failed:
        failure = str(failed)
    shown = capsys.readouterr().out + failure
    assert words in bare(shown), shown  # the same words as in English
    assert not unmarked(shown), shown

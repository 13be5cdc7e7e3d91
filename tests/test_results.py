from __future__ import annotations

import json

import pytest

from course.contracts import results
from course.errors import ResultsError

# The smallest record a training run could write.
RECORD = {
    "stage": "single_gpu",
    "workers": 1,
    "job": {"id": None},
    "hosts": ["h"],
    "devices": ["@numpy"],
    "log": [],
    "complete": True,
    "throughput": {"images_per_sec": 51.12},
    "script": {"name": "train.py"},
}


def test_round_trip_with_seal_and_digest(tmp_path):
    path = tmp_path / "runs" / "single_gpu-1" / "results.json"
    digest = results.write(path, RECORD)
    data = results.load(path)
    assert data["schema"] == results.SCHEMA and results.seal_ok(data)
    assert len(digest) == 64 and digest != data["seal"]
    assert results.find(tmp_path) == [path]
    assert results.find(tmp_path, "multi_node") == []


def test_an_edit_breaks_the_seal(tmp_path):
    path = tmp_path / "results.json"
    results.write(path, RECORD)
    raw = json.loads(path.read_text())
    raw["throughput"]["images_per_sec"] = 99.0
    path.write_text(json.dumps(raw))
    assert not results.seal_ok(results.load(path))


@pytest.mark.parametrize(
    "content,message",
    [
        ("{not json", "not a readable results file"),
        ('{"schema": "other"}', "not a course results file"),
        ("[]", "not a course results file"),
        (
            '{"schema": "course-results/2", "stage": "single_gpu", "job": null}',
            "lacks what every results file holds .*job",
        ),
    ],
)
def test_bad_files_are_named(tmp_path, content, message):
    path = tmp_path / "results.json"
    path.write_text(content)
    with pytest.raises(ResultsError, match=message):
        results.load(path)


def test_missing_file_says_to_run_the_job(tmp_path):
    with pytest.raises(ResultsError) as caught:
        results.load(tmp_path / "nope.json")
    assert "run the stage's job" in caught.value.hint

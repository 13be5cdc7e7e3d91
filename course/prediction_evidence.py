"""The prediction a traced run recorded: the results file's `prediction` beside its job log's line.

A job writes the prediction course.submit gave it twice (course.contracts.prediction): once into
its log, once into its results file, which the seal and the log's digest of the file cover. The
prediction counts only where both show the same. A results file whose only edit is its
prediction (the log's digest matches the file rebuilt with the log's prediction) still traces as
a run: only its prediction does not count, and course.evidence says why.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from course.contracts import jobend, joblog, results
from course.contracts import prediction as contract
from course.i18n import _


def edited_in_results(file: str, job: str) -> str:
    """Why the prediction of a results file whose only edit is its prediction does not count."""
    return _(
        "the prediction in {file} was changed after job {job} wrote it (its log shows the one "
        "submitted with the job)"
    ).format(file=file, job=job)


def _parsed(line: str) -> dict:
    try:
        return json.loads(line)
    except json.JSONDecodeError:  # not what a job prints: it matches no results file
        return {"unreadable": line}


def first_job(folder: Path, segments: list[dict], text: str, log: Path) -> tuple[str, str]:
    """(the log text that shows a run's prediction, that log's name): the text of the job that
    started the run (a resumed run keeps its prediction), `text` of `log` for a run of one job."""
    job = (segments[0].get("job") or {}) if len(segments) > 1 else {}
    found = joblog.find(folder, job["id"], job.get("name")) if job.get("id") else None
    if found is None:  # one job, or a first log course.evidence already misses
        return text, log.name
    started = jobend.attempt(joblog.read(found), job.get("attempt", 1)) or ""
    return jobend.until_end(started), found.name


def logged(text: str) -> list[dict | None]:
    """Every prediction a log shows (None: the job was submitted without one), parsed."""
    return [None if line is None else _parsed(line) for line in joblog.predictions(text)]


def written_but_prediction(record: dict, text: str, digest: str) -> bool:
    """Whether `record`, with the prediction its log shows put back, is the file of `digest`: the
    job wrote everything but the prediction it holds now."""
    shown = logged(text)
    if len(shown) != 1:
        return False
    body = {k: v for k, v in record.items() if k != "seal" and not k.startswith("_")}
    body["prediction"] = shown[0]
    if shown[0] is None and "prediction" not in record:
        del body["prediction"]
    return hashlib.sha256(results.sealed_bytes(body)).hexdigest() == digest


def recorded(record: dict, text: str, file: str, log: str) -> tuple[dict | None, str | None]:
    """(the prediction the run recorded, None without one; why it does not count, None if it
    does) of a results file whose log shows `text`."""
    shown, kept = logged(text), record.get("prediction")
    if len(shown) > 1:
        return None, _(
            "{log} shows {count} prediction lines; a job prints one: the log was edited"
        ).format(log=log, count=len(shown))
    if not shown:  # a kit before predictions prints no line: then nothing was submitted
        if kept is None:
            return None, None
        return None, _(
            "{log} shows no prediction line, but {file} records one: the log was edited"
        ).format(log=log, file=file)
    as_logged = None if shown[0] is None else contract.canonical(shown[0])
    if as_logged != (None if kept is None else contract.canonical(kept)):
        return None, _(
            "the prediction line in {log} is not the prediction {file} records: the log was edited"
        ).format(log=log, file=file)
    return kept, None

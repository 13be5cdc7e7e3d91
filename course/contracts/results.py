"""The results file a training run leaves behind: what ran, where, how fast, how well.

One JSON file per run, ``runs/<stage>-<tag>/results.json``, written atomically (at every epoch
end and at the end, so a killed job still leaves valid partial results). A ``seal`` (SHA-256
of the rest, in canonical form) shows whether the file was edited after the run wrote it; the
job log records the file's own digest (course.contracts.joblog), which course.evidence compares.

The record's one declaration is RECORD_SCHEMA (JSON Schema): the writer is
course.runtime.recorder, the readers course.evidence and the notebooks' report. Fields a hand-made
record may lack are declared but not required; the harness writes all of them, `profile` only for
--profile runs (tests/test_training.py checks this on a real run).
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import fastjsonschema

from course import i18n
from course.contracts import prediction
from course.errors import ResultsError
from course.fileio import atomic_file
from course.i18n import _

# Bumped whenever a field is added, renamed or retyped: a reader meets only records of its own kit.
SCHEMA = "course-results/2"
FILENAME = "results.json"
RUNS_DIR = "runs"

_STR = {"type": "string"}
_INT = {"type": "integer"}
_NUMBER = {"type": "number"}
_OPT_STR = {"type": ["string", "null"]}
_OPT_INT = {"type": ["integer", "null"]}
_OPT_NUMBER = {"type": ["number", "null"]}
_JOB = {  # a scheduler job; every part is None outside a job
    "type": "object",
    "properties": {
        "id": _OPT_STR,
        "scheduler": _OPT_STR,
        "name": _OPT_STR,
        "attempt": {"type": "integer", "minimum": 2},  # only where the scheduler reran the job
    },
    "additionalProperties": False,
}

RECORD_SCHEMA: dict[str, Any] = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": SCHEMA,
    "type": "object",
    # What every reader relies on without a fallback.
    "required": [
        "schema",
        "seal",
        "stage",
        "workers",
        "job",
        "hosts",
        "devices",
        "log",
        "complete",
        "throughput",
        "script",
    ],
    "additionalProperties": False,
    "properties": {
        "schema": {"const": SCHEMA},
        "seal": _STR,
        "stage": _STR,
        "script": {
            "type": "object",
            "properties": {"name": _STR, "sha256": _OPT_STR},
            "additionalProperties": False,
        },
        "job": _JOB,
        "hosts": {"type": "array", "items": _STR},
        "workers": _INT,
        "devices": {"type": "array", "items": _STR},
        "device_kind": {"enum": ["cpu", "gpu"]},
        "gpu_model": _OPT_STR,
        "updater": _STR,
        "communicator": _OPT_STR,
        "allreduce": _OPT_STR,  # COURSE_ALLREDUCE of a ChainerMN run (e.g. "ring"), else None
        "batch_size": {
            "type": "object",
            "properties": {"per_worker": _INT, "total": _INT},
            "additionalProperties": False,
        },
        "learning_rate": _OPT_NUMBER,  # the rate the run aims at (after any warm-up)
        "lr_schedule": {  # the learning-rate rule's plan; None for a script's own optimizer
            "type": ["object", "null"],
            "properties": {
                "rule": _STR,
                "start": _NUMBER,
                "target": _NUMBER,
                "warmup_iterations": _INT,
                "drop_from_iteration": _OPT_INT,
            },
            "additionalProperties": False,
        },
        "optimizer": {
            "type": "object",
            "properties": {"name": _STR, "lr": _OPT_NUMBER},
            "additionalProperties": False,
        },
        "model": {
            "type": "object",
            "properties": {
                "name": _STR,
                "width": _OPT_INT,
                "parameters": _INT,
                "arrays": {"type": "array", "items": _INT},  # each parameter array's size
                "weights_sha256": _OPT_STR,  # the trained weights' digest (complete runs)
            },
            "additionalProperties": False,
        },
        "dataset": {
            "type": "object",
            "properties": {"name": _STR, "train_per_worker": _INT},
            "additionalProperties": False,
        },
        "epochs_planned": _INT,
        "seed": _OPT_INT,
        "versions": {  # library versions; CUDA's may be numbers or None (not usable)
            "type": "object",
            "additionalProperties": {"type": ["string", "integer", "null"]},
        },
        "started_at": _STR,  # ISO 8601; the first job's start for a resumed run
        "finished_at": _STR,
        "wall_seconds": _NUMBER,
        "complete": {"type": "boolean"},
        "error": _OPT_STR,  # how the run failed, when it did
        "throughput": {  # course.runtime.throughput.Stats; None before any counted iteration
            "type": ["object", "null"],
            "properties": {"images_per_sec": _NUMBER},
            "additionalProperties": _OPT_NUMBER,
        },
        "segments": {  # the jobs that worked on a resumable run (course.runtime.checkpoint)
            "type": ["array", "null"],
            "items": {"type": "object", "properties": {"job": _JOB}},
        },
        "prediction": prediction.FIELD,  # what course.submit gave the job; None: nothing
        "snapshots": {
            "type": ["object", "null"],
            "properties": {
                "seconds": {"type": "array", "items": _NUMBER},
                "files": {"type": "array", "items": _STR},
            },
            "additionalProperties": False,
        },
        "profile": {  # --profile runs only: each rank's step phases (course.runtime.profile)
            "type": "object",
            "properties": {
                "phases": {"type": "array", "items": _STR},
                "ranks": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        # the share of a core the rank got over its steady steps; older runs have
                        # none (unknown), None where no steady step was profiled
                        "properties": {"cpu_share": _OPT_NUMBER},
                    },
                },
            },
            "additionalProperties": False,
        },
        # LogReport's entries: epoch, iteration, elapsed_time and the reported means.
        "log": {"type": "array", "items": {"type": "object", "additionalProperties": _NUMBER}},
    },
}


@functools.cache
def _validator():
    # fastjsonschema for the check: records are loaded by grading checks, each in a fresh process,
    # and jsonschema takes seconds to import where fastjsonschema takes milliseconds.
    return fastjsonschema.compile(RECORD_SCHEMA)


def compute_seal(data: dict) -> str:
    """SHA-256 of the record, leaving out the seal and what the loader adds (keys starting with
    _)."""
    body = {k: v for k, v in data.items() if k != "seal" and not k.startswith("_")}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(canonical.encode()).hexdigest()


def seal_ok(data: dict) -> bool:
    return data.get("seal") == compute_seal(data)


def sealed_bytes(data: dict, schema: str = SCHEMA) -> bytes:
    """The file `write` makes of `data`: sealed, in its one serialisation (course.evidence rebuilds
    a record from it to see which field was edited)."""
    sealed = {**data, "schema": schema}
    sealed["seal"] = compute_seal(sealed)
    return (json.dumps(sealed, indent=1, sort_keys=True) + "\n").encode()


def write(
    path: Path,
    data: dict,
    schema: str = SCHEMA,
    announce: Callable[[str], None] | None = None,
) -> str:
    """Seal and write `data` to `path` atomically as a file of `schema`; return the SHA-256 of the
    file written. `announce` is given that digest before the file takes its place: a job that a
    walltime kills in between leaves the record it replaces (an unfinished run resumes), never a
    record that its log does not vouch for."""
    content = sealed_bytes(data, schema)
    digest = hashlib.sha256(content).hexdigest()
    if announce is not None:
        announce(digest)
    with atomic_file(path, "wb") as f:
        f.write(content)
    return digest


def problems(data: dict) -> list[str]:
    """What in `data` breaks RECORD_SCHEMA, one line per field (none for a valid record)."""
    try:
        _validator()(data)
        return []
    except fastjsonschema.JsonSchemaValueException:
        pass
    # Only a broken record gets here: jsonschema lists every problem, not just the first.
    import jsonschema

    checker = jsonschema.Draft7Validator(RECORD_SCHEMA)
    return [
        f"{'.'.join(str(part) for part in error.absolute_path) or '(record)'}: {error.message}"
        for error in sorted(checker.iter_errors(data), key=lambda e: list(e.absolute_path))
    ]


def read_json(
    path: Path,
    schema: str,
    *,
    name: str,
    kind: str,
    rerun: str,
    source: str,
    missing: str | None = None,
) -> dict:
    """The JSON object of `schema` at `path` (a results or benchmark file); ResultsError when it is
    not one. The messages name the file "a readable `name`" and "`kind`"; the fixes: `rerun` for
    an unreadable file, `source` for another file, `missing` (if given) where there is none (all
    of them in the student's language: the caller translates them)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        if missing is not None and isinstance(e, FileNotFoundError):
            raise ResultsError(_("{path} does not exist").format(path=path), missing) from None
        raise ResultsError(
            # TRANSLATORS: {name} is the kind of file, e.g. "results file"; {error} is Python's
            _("{path} is not a readable {name} ({error})").format(path=path, name=name, error=e),
            rerun,
        ) from None
    if not isinstance(data, dict) or data.get("schema") != schema:
        raise ResultsError(
            # TRANSLATORS: {kind} is what the file should be, e.g. "a course results file"
            _("{path} is not {kind} (schema {schema} expected)").format(
                path=path, kind=kind, schema=schema
            ),
            source,
        )
    return data


def load(path: Path) -> dict:
    """Read a results file; ResultsError when it is missing, not JSON, or not a results file."""
    path = Path(path)
    data = read_json(
        path,
        SCHEMA,
        name=_("results file"),
        kind=_("a course results file"),
        rerun=_("run the job again; do not edit results files by hand"),
        source=_("pass the results.json that a training job wrote"),
        missing=_("run the stage's job first"),
    )
    wrong = problems(data)
    if wrong:
        raise ResultsError(
            # TRANSLATORS: {problems} are the schema's findings, in JSON Schema's English
            _("{path} lacks what every results file holds ({problems})").format(
                path=path, problems=i18n.listed(wrong, "; ")
            ),
            _("run the job again; do not edit results files by hand"),
        )
    data["_path"] = str(path)
    return data


def find(folder: Path = Path("."), stage: str | None = None) -> list[Path]:
    """Results files under folder/runs, oldest first; only `stage`'s when given."""
    pattern = f"{stage}-*/{FILENAME}" if stage else f"*/{FILENAME}"
    paths = list((Path(folder) / RUNS_DIR).glob(pattern))
    return sorted(paths, key=lambda p: (p.stat().st_mtime, str(p)))

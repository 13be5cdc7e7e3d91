"""The results file a training run leaves behind: what ran, where, how fast, how well.

One JSON file per run, ``runs/<stage>-<tag>/results.json``, written atomically (at every epoch
end and at the end, so a killed job still leaves valid partial results). A ``seal`` (SHA-256
of the rest, in canonical form) shows whether the file was edited after the run wrote it; the
job log records the file's own digest (course.joblog), which course.evidence compares.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from course.errors import ResultsError
from course.fileio import atomic_file, sha256_file

SCHEMA = "course-results/1"
FILENAME = "results.json"
RUNS_DIR = "runs"
# What readers rely on, and its type (None where a run may lack it, e.g. no job id outside a job).
SHAPE = {
    "stage": str,
    "workers": int,
    "job": dict,
    "hosts": list,
    "devices": list,
    "log": list,
    "complete": bool,
    "throughput": (dict, type(None)),
    "script": dict,
}


def compute_seal(data: dict) -> str:
    """SHA-256 of the record, leaving out the seal and what the loader adds (keys starting with _)."""
    body = {k: v for k, v in data.items() if k != "seal" and not k.startswith("_")}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(canonical.encode()).hexdigest()


def seal_ok(data: dict) -> bool:
    return data.get("seal") == compute_seal(data)


def write(path: Path, data: dict, schema: str = SCHEMA) -> str:
    """Seal and write `data` to `path` atomically as a file of `schema`; return the SHA-256 of the file written."""
    sealed = {**data, "schema": schema}
    sealed["seal"] = compute_seal(sealed)
    with atomic_file(path, "w") as f:
        json.dump(sealed, f, indent=1, sort_keys=True)
        f.write("\n")
    return sha256_file(path)


def load(path: Path) -> dict:
    """Read a results file; ResultsError when it is missing, not JSON, or not a results file."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise ResultsError(f"{path} does not exist", "run the stage's job first") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ResultsError(
            f"{path} is not a readable results file ({e})",
            "run the job again; do not edit results files by hand",
        ) from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise ResultsError(
            f"{path} is not a course results file (schema {SCHEMA} expected)",
            "pass the results.json that a training job wrote",
        )
    wrong = [key for key, kinds in SHAPE.items() if not isinstance(data.get(key), kinds)]
    if wrong:
        raise ResultsError(
            f"{path} lacks what every results file holds ({', '.join(wrong)})",
            "run the job again; do not edit results files by hand",
        )
    data["_path"] = str(path)
    return data


def find(folder: Path = Path("."), stage: str | None = None) -> list[Path]:
    """Results files under folder/runs, oldest first; only `stage`'s when given."""
    pattern = f"{stage}-*/{FILENAME}" if stage else f"*/{FILENAME}"
    paths = list((Path(folder) / RUNS_DIR).glob(pattern))
    return sorted(paths, key=lambda p: (p.stat().st_mtime, str(p)))

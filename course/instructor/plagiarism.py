"""The plagiarism table of one grading run: job outputs, notebooks and code that two or more
submissions share.

A traced run proves that a results file and a log agree, not whose they are: a classmate's runs/ and
logs copied whole trace as well as one's own. What two students cannot both have made is flagged
here, by hashing files (nothing is trained or re-run):

| kind | shared | why it cannot be two students' own |
|---|---|---|
| job id | a PBS or Slurm job of a run (or of a segment it resumed from) | the scheduler gives each
job its own id |
| run folder | runs/<stage>-<job id> with a PBS or Slurm job id | the same, as the folder name |
| results seal | the seal of a results file | it covers start times, hosts and the loss curve |
| results file | a results file's SHA-256 | the same, byte for byte |
| job log | a job log's SHA-256 | it holds times, hosts and the job id |
| notebook | a notebook's SHA-256 (not the release's) | its outputs hold times and runs |
| solution code | code alike beyond the solution | few right answers, but not the same odd ones |

Solution code is compared by course.instructor.code_similarity (copydetect), across editions, and
its report of the shared passages is written beside the table. The kit's local scheduler
numbers jobs per machine from 1, so its job ids and run folders are the same for every student who
used it: they are not flagged (their seals and logs are). A job id (and its run folder) counts only
where the submission also holds that job's log and the log names the run's results file: job ids
are public (qstat shows them), so a results file that merely names a classmate's job proves nothing
of the classmate.
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from course.contracts import joblog, results
from course.fileio import atomic_file, sha256_file
from course.instructor import code_similarity

SCHEDULED = ("pbs", "slurm")  # schedulers whose job ids are unique across students
_LOG = re.compile(r"\.o\d+$")


@dataclass(frozen=True)
class Flag:
    kind: str  # job id, run folder, results seal, results file, job log
    value: str
    students: tuple[str, ...]
    files: tuple[str, ...]  # student: path in their folder, for each file that shares it


def _keys(folder: Path) -> list[tuple[str, str, Path]]:
    """(kind, value, file) for everything in one submission that must be its own."""
    found = []
    for path in results.find(folder):
        found.append(("results file", sha256_file(path), path))
        try:
            record = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, ValueError):
            continue  # an unreadable file still has its digest above
        if not isinstance(record, dict):
            continue
        if record.get("seal"):
            found.append(("results seal", str(record["seal"]), path))
        jobs = [
            record.get("job"),
            *((segment or {}).get("job") for segment in record.get("segments") or []),
        ]
        scheduled = {
            f"{job['scheduler']}:{job['id']}"
            for job in jobs
            if isinstance(job, dict)
            and job.get("id")
            and job.get("scheduler") in SCHEDULED
            and _logged(folder, job, path.parent.name)
        }
        found += [("job id", key, path) for key in sorted(scheduled)]
        job = record.get("job")
        if not isinstance(job, dict):
            job = {}
        if f"{job.get('scheduler')}:{job.get('id')}" in scheduled:
            found.append(
                ("run folder", f"{path.parent.name} (job {job['scheduler']}:{job['id']})", path)
            )
    found += [
        ("job log", sha256_file(log), log)
        for log in sorted(Path(folder).glob("*.o*"))
        if _LOG.search(log.name) and log.is_file()
    ]
    return found


def _logged(folder: Path, job: dict, run_folder: str) -> bool:
    """Whether `folder` holds the log of `job` and it names a results file of runs/`run_folder`."""
    log = joblog.find(folder, str(job["id"]), str(job.get("name") or "") or None)
    return log is not None and bool(
        joblog.results_digests(joblog.read(log), run_folder, results.FILENAME)
    )


def _notebooks(folder: Path, release: Path) -> list[tuple[str, str, Path]]:
    """(kind, digest, file) of each handed-in notebook that is not the release's own copy."""
    found = []
    for path in sorted(Path(folder).glob("*.ipynb")):
        digest = sha256_file(path)
        given = release / path.name
        if path.is_file() and not (given.is_file() and sha256_file(given) == digest):
            found.append(("notebook", digest, path))
    return found


def _shared(submissions: dict[str, Path], keys: Callable[[Path], list]) -> list[Flag]:
    """The keys (kind, value, file) that two or more of `submissions` share."""
    shared: dict[tuple[str, str], dict[str, list[str]]] = {}
    for student, folder in sorted(submissions.items()):
        for kind, value, path in keys(Path(folder)):
            shared.setdefault((kind, value), {}).setdefault(student, []).append(
                str(path.relative_to(folder))
            )
    return [
        Flag(
            kind,
            value,
            tuple(owners),
            tuple(f"{student}: {file}" for student in owners for file in owners[student]),
        )
        for (kind, value), owners in sorted(shared.items())
        if len(owners) > 1
    ]


def shared_outputs(submissions: dict[str, Path]) -> list[Flag]:
    """The job outputs two or more of `submissions` ({student: their assignment folder}, of any
    edition: a run is the same run in every language) share."""
    return _shared(submissions, _keys)


def shared_notebooks(submissions: dict[str, Path], release: Path) -> list[Flag]:
    """The notebooks two or more of `submissions` hand in byte for byte (the untouched `release`,
    their edition's student notebooks, left out)."""
    return _shared(submissions, lambda folder: _notebooks(folder, release))


def shared_code(
    submissions: dict[str, Path], bases: list[Path], report: Path | None = None
) -> list[Flag]:
    """The solution code beyond the solution two of `submissions` ({student: their assignment
    folder}, of any edition) share; `bases` are every edition's instructor and student notebooks,
    `report` where copydetect's report of the shared passages goes."""
    return [
        Flag(
            "solution code",
            f"{pair.notebook}: {pair.similarity:.0%} alike beyond the solution "
            f"({pair.shared} characters of normalised code in common)",
            pair.students,
            tuple(f"{student}: {pair.notebook}" for student in pair.students),
        )
        for pair in code_similarity.similar_pairs(submissions, bases, report)
    ]


def find(submissions: dict[str, Path], source: Path, release: Path) -> list[Flag]:
    """What two or more of `submissions` ({student: their assignment folder}) of one edition
    share, by kind, then value; `source` and `release` are its instructor and student notebooks."""
    return (
        shared_outputs(submissions)
        + shared_notebooks(submissions, release)
        + shared_code(submissions, [source, release])
    )


def write_csv(flags: list[Flag], path: Path) -> None:
    """One row per shared item: kind, value, the students, and their files."""
    with atomic_file(path, "w") as f:
        writer = csv.writer(f)
        writer.writerow(["kind", "shared", "students", "files"])
        for flag in flags:
            writer.writerow([flag.kind, flag.value, " ".join(flag.students), "; ".join(flag.files)])

"""The allreduce micro-benchmark's results file and its job-log line: the one writer and reader of
each.

One sealed JSON file per mpiexec burst, ``runs/allreduce-<job
id>/<algorithm>-<ranks>r-<round>.json``: a job that alternates algorithms
(jobs/run_allreduce_benchmark.sh) leaves one file per burst in one folder, so that the reader can
pool the rounds of each (ranks, algorithm). The seal is the results file's
(course.contracts.results.compute_seal); the job log records each file's digest on the line below.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from course.contracts import results
from course.errors import ResultsError
from course.i18n import _

SCHEMA = "course-allreduce/1"
PREFIX = "allreduce"  # the run folder is runs/allreduce-<job id>
DEFAULT_ALGORITHM = "default"  # no --allreduce: Open MPI's own decision rules pick per size
# Not an allreduce: rank 0 gathers every rank's gradient and sends the sum back to each, one message
# at a time (course.runtime.allreduce_bench --pattern parameter_server). Its files carry it as their
# `algorithm`.
PARAMETER_SERVER = "parameter_server"
# Notebook 05's jobs (ring against the parameter server) write to runs/exchange-<job id>, so that
# notebook 04's table, which reads runs/allreduce-*, keeps its own job's series.
EXCHANGE_PREFIX = "exchange"
PREFIXES = (PREFIX, EXCHANGE_PREFIX)


def run_folder(root: Path, tag: str, prefix: str = PREFIX) -> Path:
    return Path(root) / results.RUNS_DIR / f"{prefix}-{tag}"


def next_path(folder: Path, algorithm: str, ranks: int) -> Path:
    """The first free <algorithm>-<ranks>r-<round>.json of a run folder (rounds count from 1)."""
    round_ = 1
    while (path := Path(folder) / f"{algorithm}-{ranks}r-{round_}.json").exists():
        round_ += 1
    return path


def write(path: Path, data: dict) -> str:
    """Seal and write `data` atomically (as a results file is, with this file's schema); return its
    SHA-256."""
    return results.write(path, data, SCHEMA)


def load(path: Path) -> dict:
    """One benchmark file; ResultsError when it is unreadable, not one, or edited after the run."""
    path = Path(path)
    data = results.read_json(
        path,
        SCHEMA,
        name=_("allreduce file"),
        kind=_("an allreduce benchmark file"),
        rerun=_("run {script} again").format(script="jobs/run_allreduce_benchmark.sh"),
        source=_("pass a file that {script} wrote").format(
            script="jobs/run_allreduce_benchmark.sh"
        ),
    )
    if not results.seal_ok(data):
        raise ResultsError(
            _("{path} was changed after the benchmark wrote it (its seal does not match)").format(
                path=path
            ),
            _("run {script} again; do not edit its files").format(
                script="jobs/run_allreduce_benchmark.sh"
            ),
        )
    data["_path"] = str(path)
    return data


def find(folder: Path = Path("."), prefix: str = PREFIX) -> list[Path]:
    """Every benchmark file under folder/runs/<prefix>-*, in name order."""
    return sorted((Path(folder) / results.RUNS_DIR).glob(f"{prefix}-*/*.json"))


def summarize(seconds: list[float]) -> tuple[float, float, float]:
    """(median, first quartile, third quartile): the quartiles are the spread a reader compares
    against, robust to the odd repeat a shared machine stalls."""
    q1, median, q3 = np.percentile(np.asarray(seconds, dtype=float), [25, 50, 75])
    return float(median), float(q1), float(q3)


# --- the job-log line --------------------------------------------------------------------------


def log_line(path: Path | str, sha256: str, algorithm: str, ranks: int) -> str:
    return f"course: allreduce {path} sha256={sha256} | {algorithm} on {ranks} rank(s)"


_LINE = re.compile(
    r"^course: allreduce (?P<path>\S+) sha256=(?P<sha256>[0-9a-f]{64}) \| "
    r"(?P<algorithm>\w+) on (?P<ranks>\d+) rank\(s\)$",
    re.MULTILINE,
)


def logged(text: str) -> list[dict]:
    """{path, sha256, algorithm, ranks} of every benchmark file a job log names."""
    return [{**m.groupdict(), "ranks": int(m["ranks"])} for m in _LINE.finditer(text)]

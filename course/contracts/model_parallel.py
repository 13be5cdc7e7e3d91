"""The model-parallel job's results file and its job-log line: the one writer and reader of each.

jobs/run_model_parallel.sh trains the course's VGG on the same 2 ranks two ways, in turns: data
parallel (each rank the whole network on half the batch, the gradient allreduced) and model parallel
(ChainerMN's MultiNodeChainList: rank 0 the first blocks, rank 1 the rest, the activations sent
across the cut). One sealed JSON file per job, ``runs/model_parallel-<job id>/<ranks>r-<n>.json``,
sealed as a results file is (course.contracts.results.compute_seal); the job log records its digest
on the line below, which is how a reader traces the file to its job.
"""

from __future__ import annotations

import re
from pathlib import Path

from course.contracts import results
from course.errors import ResultsError
from course.i18n import _

SCHEMA = "course-model-parallel/1"
PREFIX = "model_parallel"  # the run folder is runs/model_parallel-<job id>
JOB_SCRIPT = "run_model_parallel.sh"  # in jobs/: CPU ranks only, like the allreduce benchmark
SETTINGS = ("data_parallel", "model_parallel")  # the record's two timed settings, in turn order


def run_folder(root: Path, tag: str) -> Path:
    return Path(root) / results.RUNS_DIR / f"{PREFIX}-{tag}"


def next_path(folder: Path, ranks: int) -> Path:
    """The first free <ranks>r-<round>.json of a run folder (rounds count from 1)."""
    round_ = 1
    while (path := Path(folder) / f"{ranks}r-{round_}.json").exists():
        round_ += 1
    return path


def write(path: Path, data: dict) -> str:
    """Seal and write `data` atomically with this file's schema; return its SHA-256."""
    return results.write(path, data, SCHEMA)


def load(path: Path) -> dict:
    """One model-parallel file; ResultsError when it is unreadable, not one, or edited after."""
    path = Path(path)
    script = f"jobs/{JOB_SCRIPT}"
    data = results.read_json(
        path,
        SCHEMA,
        name=_("model-parallel file"),
        kind=_("a model-parallel run's file"),
        rerun=_("run {script} again").format(script=script),
        source=_("pass a file that {script} wrote").format(script=script),
    )
    if not results.seal_ok(data):
        raise ResultsError(
            _("{path} was changed after the job wrote it (its seal does not match)").format(
                path=path
            ),
            _("run {script} again; do not edit its files").format(script=script),
        )
    data["_path"] = str(path)
    return data


def find(folder: Path = Path(".")) -> list[Path]:
    """Every model-parallel file under folder/runs, in name order."""
    return sorted((Path(folder) / results.RUNS_DIR).glob(f"{PREFIX}-*/*.json"))


# --- the job-log line --------------------------------------------------------------------------


def log_line(path: Path | str, sha256: str, ranks: int) -> str:
    return f"course: model_parallel {path} sha256={sha256} | {ranks} rank(s)"


_LINE = re.compile(
    r"^course: model_parallel (?P<path>\S+) sha256=(?P<sha256>[0-9a-f]{64}) \| "
    r"(?P<ranks>\d+) rank\(s\)$",
    re.MULTILINE,
)


def logged(text: str) -> list[dict]:
    """{path, sha256, ranks} of every model-parallel file a job log names."""
    return [{**m.groupdict(), "ranks": int(m["ranks"])} for m in _LINE.finditer(text)]

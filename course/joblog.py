"""The job log, `<job name>.o<number>`: every line the kit writes into it, and how each is read back.

`qsub -j oe` joins a job's stdout and stderr into that one file in the submit folder. The kit
writes these lines into it, and reads them back to follow a job and to trace a run to its job:

| line | written by | read by |
|---|---|---|
| the run header `course: run ...` | the training harness (rank 0) | evidence (stage, job, workers) |
| `Throughput: ... [images/sec.]` | the training harness | evidence (equals the results file's) |
| `course: results PATH sha256=...` | the training harness | evidence (the file the job wrote) |
| `course: job ID ended with exit status N` | jobs/site_env.sh's EXIT trap | the submitter (how the job ended) |
| a walltime kill notice | the local scheduler; PBS and Slurm their own | the submitter, the diagnosis |

Each line's format and its parser stand side by side below; tests/test_joblog.py round-trips them.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

# --- the file itself ---------------------------------------------------------------------------


def log_name(job_name: str, number: int | str) -> str:
    """What PBS names the joined log of job `number` (and the local scheduler likewise)."""
    return f"{job_name}.o{number}"


def job_number(job_id: str) -> str:
    """'123.server' -> '123': the log's suffix is the number alone."""
    return job_id.split(".")[0]


def find(folder: Path, job_id: str, job_name: str | None = None) -> Path | None:
    """The joined log of a job in `folder`: <job name>.o<number>, else any *.o<number>
    (some schedulers shorten long job names in file names)."""
    number = job_number(job_id)
    named = Path(folder) / log_name(job_name or "", number)
    if job_name and named.is_file():
        return named
    found = sorted(Path(folder).glob(f"*.o{number}"))
    return found[0] if found else None


_ESCAPES = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")  # Chainer's PrintReport writes ESC[J for terminals


def clean(line: str) -> str:
    """A log line without terminal control sequences."""
    return _ESCAPES.sub("", line)


# --- the run header -----------------------------------------------------------------------------


@dataclass(frozen=True)
class RunHeader:
    stage: str
    job_id: str | None
    scheduler: str | None
    workers: int
    hosts: list[str]
    devices: list[str]
    batch_per_worker: int
    learning_rate: float | None
    seed: int | None = None
    lr_rule: str | None = None
    communicator: str | None = None
    allreduce: str | None = None

    def format(self) -> str:
        job = f"job {self.job_id} ({self.scheduler})" if self.job_id else "no job"
        comm = f" | communicator {self.communicator}" if self.communicator else ""
        if self.allreduce:
            comm += f" ({self.allreduce} allreduce)"
        lr = "n/a" if self.learning_rate is None else f"{self.learning_rate:g}"
        if self.lr_rule:
            lr += f" ({self.lr_rule})"
        return (f"course: run {self.stage} | {job} | {self.workers} worker(s) on {', '.join(sorted(set(self.hosts)))}: "
                f"{', '.join(self.devices)} | batch {self.batch_per_worker} per worker, "
                f"{self.batch_per_worker * self.workers} total | lr {lr} | seed {self.seed}{comm}")


_HEADER = re.compile(r"^course: run (?P<stage>\w+) \| (?:job (?P<job>\S+) \((?P<scheduler>\w+)\)|no job) \| "
                     r"(?P<workers>\d+) worker\(s\) on ", re.MULTILINE)


def run_headers(text: str) -> list[dict]:
    """{stage, job, scheduler, workers} of every run header in a log."""
    return [{"stage": m["stage"], "job": m["job"], "scheduler": m["scheduler"], "workers": int(m["workers"])}
            for m in _HEADER.finditer(text)]


# --- the throughput summary ---------------------------------------------------------------------

THROUGHPUT_DECIMALS = 2  # the log shows images/sec to this many decimals; readers compare at that precision


def throughput_line(images_per_sec: float, counted: int, warmup: int, excluded: int) -> str:
    return (f"Throughput: {images_per_sec:.{THROUGHPUT_DECIMALS}f} [images/sec.] over {counted} steady iterations "
            f"(warm-up {warmup}, {excluded} left out after epoch ends)")


def throughput_not_measured(warmup: int) -> str:
    return (f"Throughput: not measured: too few steady iterations (warm-up {warmup}); "
            "train longer or lower --warmup")


_THROUGHPUT = re.compile(r"^Throughput: ([\d.]+) \[images/sec\.\]", re.MULTILINE)


def throughputs(text: str) -> list[float]:
    """Every images/sec figure a log shows."""
    return [float(x) for x in _THROUGHPUT.findall(text)]


def same_throughput(logged: float, recorded: float) -> bool:
    """Whether a logged figure is a results file's figure, as the log rounds it."""
    return abs(logged - round(recorded, THROUGHPUT_DECIMALS)) < 0.6 * 10 ** -THROUGHPUT_DECIMALS


# --- the results file's digest ------------------------------------------------------------------


def results_line(path: Path | str, sha256: str) -> str:
    return f"course: results {path} sha256={sha256}"


def results_digests(text: str, run_folder: str, filename: str) -> list[str]:
    """The SHA-256 digests a log records for runs/<run_folder>/<filename>."""
    rel = re.escape(f"{run_folder}/{filename}")
    return re.findall(rf"^course: results \S*{rel} sha256=([0-9a-f]{{64}})$", text, re.MULTILINE)


# --- how the job ended --------------------------------------------------------------------------

# Bash, in jobs/site_env.sh: the EXIT trap prints the job's last line.
END_TRAP = """trap 'echo "course: job ${PBS_JOBID:-${SLURM_JOB_ID:-?}} ended with exit status $?"' EXIT"""
_END = re.compile(r"^course: job (\S+) ended with exit status (\d+)$", re.MULTILINE)


def end_line(job_id: str, status: int) -> str:
    """What END_TRAP prints (tests and the reference logs use it)."""
    return f"course: job {job_id} ended with exit status {status}"


def exit_status(text: str) -> int | None:
    """The exit status the log's last end line states, else None."""
    found = _END.findall(text)
    return int(found[-1][1]) if found else None


def walltime_notice(limit: str) -> str:
    """What the local scheduler writes when it kills a job at its walltime (PBS Pro's words)."""
    return f"=>> PBS: job killed: walltime {limit} exceeded limit {limit}"


_KILLED = re.compile(r"^(=>> PBS: job killed|slurmstepd: error: \*\*\* JOB \S+ ON \S+ CANCELLED)", re.MULTILINE)
_WALLTIME = re.compile(r"job killed: walltime|DUE TO TIME LIMIT")


def killed_by_scheduler(text: str) -> bool:
    """Whether a scheduler (PBS, Slurm or the local one) says it killed the job."""
    return _KILLED.search(text) is not None


def walltime_exceeded(text: str) -> bool:
    return _WALLTIME.search(text) is not None

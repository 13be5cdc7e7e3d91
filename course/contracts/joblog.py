"""The job log, `<job name>.o<number>`: every line the kit writes into it, and how each is read
back.

`qsub -j oe` joins a job's stdout and stderr into that one file in the submit folder. The kit
writes these lines into it, and reads them back to follow a job and to trace a run to its job:

| line | written by | read by |
|---|---|---|
| `course launch: job ID (SCHED); N slot(s) on M node(s): ...`, command | `course launch` | evidence
(stage 3's ranks) |
| `course launch: data set NAME staged to PATH: N bytes in S s` | `course launch --stage-data` |
tests, students (the copy's time) |
| the run header `course: run ...` | the training harness (rank 0) | evidence (stage, job, workers,
devices; once) |
| `course: rank R of N on HOST: intra_rank ...` | the harness (rank 0, for each rank of stage 3) |
students, tests |
| `Throughput: ... [images/sec.]` | the training harness | evidence (equals the results file's; one
per job) |
| `course: results PATH sha256=...` | the training harness | evidence (the file the job wrote; one
per run file) |
| `course: prediction submitted with the job: JSON` (or that none was) | the harness | evidence
(equals the results file's prediction; one per job) |
| `course COMMAND: MESSAGE` then `  -> FIX` | the kit's commands (course/cli.py), e.g. `course
launch` | the diagnosis |
| `... wrong MPI launcher: PATH; the kit needs PATH (...)` | every rank that another MPI's launcher
started (course.cluster.mpi), in its exception | the diagnosis |

The lines that close a job (end line, kill notices, a rerun's attempt line) are
course.contracts.jobend's. Each line's format and its parser stand side by side below;
tests/test_joblog.py round-trips them. Every reader takes the log's text from `read`, which drops
the control bytes other programs leave in it.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Collection
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
# Control bytes but tab, newline and carriage return: prterun ends an MPI_Abort report with a NUL.
_CONTROLS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def clean(line: str) -> str:
    """A log line without terminal control sequences and control bytes."""
    return _CONTROLS.sub("", _ESCAPES.sub("", line))


def read(path: Path) -> str:
    """A job log's text as its readers take it: every line clean (bytes that are not UTF-8
    replaced), so that a stray byte before a line the kit wrote cannot hide that line."""
    return clean(Path(path).read_text(errors="replace"))


# --- what `course launch` started ---------------------------------------------------------------
#
# Two lines: the job's slots (one MPI rank each), then the launcher's command as it ran. A site's
# template may name the rank count (-n, -np, --np, srun's --ntasks); where it does, the reader takes
# it.

LAUNCH_PREFIX = "course launch: "


def launch_line(job_id: str | None, scheduler: str, hosts: list[tuple[str, int]]) -> str:
    """The job's slots, from its (host, slots) list in order."""
    where = ", ".join(f"{host} x{slots}" for host, slots in hosts)
    job = f"job {job_id} ({scheduler})" if job_id else "no scheduler"
    slots = sum(slots for _, slots in hosts)
    return f"{LAUNCH_PREFIX}{job}; {slots} slot(s) on {len(hosts)} node(s): {where}"


def launch_command_line(argv: list[str]) -> str:
    return LAUNCH_PREFIX + shlex.join(argv)


_LAUNCH = re.compile(
    r"^course launch: (?:job (?P<job>\S+) \((?P<scheduler>\w+)\)|no scheduler); "
    r"(?P<slots>\d+) slot\(s\) on (?P<nodes>\d+) node\(s\): .*\n"
    r"(?:course launch: warning: .*\n)*"
    r"course launch: (?P<command>.*)$",
    re.MULTILINE,
)
_RANK_FLAGS = ("-n", "-np", "--np", "--n", "--ntasks")  # not -c: srun's cpus per task


def _words(command: str) -> list[str]:
    try:
        return shlex.split(command)
    except ValueError:  # not a line the kit wrote (shlex.join): its words as they stand
        return command.split()


def _command_ranks(words: list[str]) -> int | None:
    """The rank count a launcher's command names before the program it starts (python ...), None
    where it names none."""
    for word, following in zip(words, [*words[1:], ""]):
        if Path(word).name.startswith("python") or word.endswith(".py"):
            return None
        flag, _, value = word.partition("=")
        if flag in _RANK_FLAGS:
            count = value if value else following
            return int(count) if count.isdigit() else None
    return None


def _matches(pattern: re.Pattern[str], text: str, numbers: Collection[str] = ()) -> list[dict]:
    """The named groups of every match of `pattern` in `text`, in order; those in `numbers` as
    ints."""
    return [
        {name: int(value) if name in numbers else value for name, value in m.groupdict().items()}
        for m in pattern.finditer(text)
    ]


def launches(text: str) -> list[dict]:
    """{job, scheduler, slots, nodes, launcher, command_ranks} of every launch a log shows
    (launcher: the program that started the ranks; command_ranks: None where the launcher's command
    does not name a count)."""
    found = _matches(_LAUNCH, text, numbers=("slots", "nodes"))
    for launch in found:
        words = _words(launch.pop("command")) or [""]
        launch.update(launcher=words[0], command_ranks=_command_ranks(words))
    return found


# --- the data set staged to node-local storage ----------------------------------------------------
#
# `course launch --stage-data` copies the run's data set file before the launch line, and says how
# long the copy took.

_STAGED = re.compile(
    r"^course launch: data set (?P<name>\S+) staged to (?P<path>.+): (?P<bytes>\d+) bytes in "
    r"(?P<seconds>\d+\.\d+) s$",
    re.MULTILINE,
)


def staged_line(name: str, path: Path, size: int, seconds: float) -> str:
    """The data set `name` copied to `path`: `size` bytes in `seconds`."""
    return f"{LAUNCH_PREFIX}data set {name} staged to {path}: {size} bytes in {seconds:.3f} s"


def staged(text: str) -> list[dict]:
    """{name, path, bytes, seconds} of every data set a log shows staged."""
    return [
        {**found, "seconds": float(found["seconds"])}
        for found in _matches(_STAGED, text, numbers=("bytes",))
    ]


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
    gpu_model: str | None = None

    def format(self) -> str:
        job = f"job {self.job_id} ({self.scheduler})" if self.job_id else "no job"
        comm = f" | communicator {self.communicator}" if self.communicator else ""
        if self.allreduce:
            comm += f" ({self.allreduce} allreduce)"
        lr = "n/a" if self.learning_rate is None else f"{self.learning_rate:g}"
        if self.lr_rule:
            lr += f" ({self.lr_rule})"
        model = f" ({self.gpu_model})" if self.gpu_model else ""
        return (
            f"course: run {self.stage} | {job} | {self.workers} worker(s) on "
            f"{', '.join(sorted(set(self.hosts)))}: "
            f"{', '.join(self.devices)}{model} | batch {self.batch_per_worker} per worker, "
            f"{self.batch_per_worker * self.workers} total | lr {lr} | seed {self.seed}{comm}"
        )


_HEADER = re.compile(
    r"^course: run (?P<stage>\w+) \| (?:job (?P<job>\S+) \((?P<scheduler>\w+)\)|no job) \| "
    r"(?P<workers>\d+) worker\(s\) on [^:|]*: (?P<devices>[^|(]*?)(?: \((?P<gpu_model>[^)|]+)\))? "
    r"\| ",
    re.MULTILINE,
)


def run_headers(text: str) -> list[dict]:
    """{stage, job, scheduler, workers, devices, gpu_model} of every run header in a log (gpu_model:
    None where the header names none: CPU runs)."""
    return [
        {**header, "devices": header["devices"].split(", ")}
        for header in _matches(_HEADER, text, numbers=("workers",))
    ]


# --- where each rank of a ChainerMN run is
# ---------------------------------------------------------
#
# One line per rank, printed by rank 0 after the run header: the host the rank ran on, its place
# within that host (intra_rank: the GPU it binds) and among the hosts (inter_rank), its device and
# the training examples scatter_dataset gave it. On a cluster rank and intra_rank differ from the
# second node on.


@dataclass(frozen=True)
class RankPlace:
    rank: int
    size: int
    host: str
    intra_rank: int
    inter_rank: int
    device: str
    train_examples: int

    def format(self) -> str:
        return (
            f"course: rank {self.rank} of {self.size} on {self.host}: intra_rank "
            f"{self.intra_rank}, "
            f"inter_rank {self.inter_rank}, device {self.device}, {self.train_examples} training "
            "examples"
        )


_RANK = re.compile(
    r"^course: rank (?P<rank>\d+) of (?P<size>\d+) on (?P<host>\S+): "
    r"intra_rank (?P<intra_rank>\d+), inter_rank (?P<inter_rank>\d+), device (?P<device>\S+), "
    r"(?P<train_examples>\d+) training examples$",
    re.MULTILINE,
)


def rank_places(text: str) -> list[RankPlace]:
    """Every rank line of a log, in order."""
    numbers = ("rank", "size", "intra_rank", "inter_rank", "train_examples")
    return [RankPlace(**place) for place in _matches(_RANK, text, numbers)]


# --- the throughput summary ---------------------------------------------------------------------

THROUGHPUT_DECIMALS = (
    2  # the log shows images/sec to this many decimals; readers compare at that precision
)


def throughput_line(images_per_sec: float, counted: int, warmup: int, excluded: int) -> str:
    return (
        f"Throughput: {images_per_sec:.{THROUGHPUT_DECIMALS}f} [images/sec.] over {counted} steady "
        "iterations "
        f"(warm-up {warmup}, {excluded} left out after epoch ends): every counted image over "
        "their total time. The per-epoch throughput column is the mean of each step's rate, which "
        "slow steps pull down less, so it reads higher"
    )


def throughput_not_measured(warmup: int) -> str:
    return (
        f"Throughput: not measured: too few steady iterations (warm-up {warmup}); "
        "train longer or lower --warmup"
    )


_THROUGHPUT = re.compile(r"^Throughput: ([\d.]+) \[images/sec\.\]", re.MULTILINE)


def throughputs(text: str) -> list[float]:
    """Every images/sec figure a log shows."""
    return [float(x) for x in _THROUGHPUT.findall(text)]


def same_throughput(logged: float, recorded: float) -> bool:
    """Whether a logged figure is a results file's figure, as the log rounds it."""
    return abs(logged - round(recorded, THROUGHPUT_DECIMALS)) < 0.6 * 10**-THROUGHPUT_DECIMALS


# --- the results file's digest ------------------------------------------------------------------


def results_line(path: Path | str, sha256: str) -> str:
    return f"course: results {path} sha256={sha256}"


def results_digests(text: str, run_folder: str, filename: str) -> list[str]:
    """The SHA-256 digests a log records for runs/<run_folder>/<filename>."""
    rel = re.escape(f"{run_folder}/{filename}")
    return re.findall(rf"^course: results \S*{rel} sha256=([0-9a-f]{{64}})$", text, re.MULTILINE)


# --- the prediction submitted with the job (course.contracts.prediction) ------------------------

_PREDICTION = re.compile(
    r"^course: (?:prediction submitted with the job: (\{.*\})|(no) prediction "
    r"was submitted with this job)$",
    re.MULTILINE,
)


def prediction_line(canonical: str | None) -> str:
    """The job's prediction as its canonical text (course.contracts.prediction), or none (None)."""
    if canonical is None:
        return "course: no prediction was submitted with this job"
    return f"course: prediction submitted with the job: {canonical}"


def predictions(text: str) -> list[str | None]:
    """The canonical text of every prediction line in a log, in order (None: no prediction)."""
    return [None if none else shown for shown, none in _PREDICTION.findall(text)]


# --- resuming a run from its snapshot ----------------------------------------------------------

NO_SNAPSHOTS = (
    "course: this trainer takes no snapshots, so a job killed at its walltime starts over "
    "(add the snapshot extension: the notebook's add_snapshots exercise)"
)
_RESUMED = re.compile(
    r"^course: resuming (?P<folder>\S+) at iteration (?P<iteration>\d+) "
    r"from the snapshot job (?P<job>\S+) wrote$",
    re.MULTILINE,
)


def resumed_line(folder: Path | str, iteration: int, job_id: str | None) -> str:
    return (
        f"course: resuming {folder} at iteration {iteration} "
        f"from the snapshot job {job_id or '-'} wrote"
    )


def resumptions(text: str) -> list[dict]:
    """{folder, iteration, job} of every resume a log shows."""
    return _matches(_RESUMED, text, numbers=("iteration",))


# --- a rank that another MPI's launcher started -------------------------------------------------
#
# `course launch` tells its ranks how many it started; a rank in an MPI world of another size was
# started by a launcher of another MPI (each copy alone, "rank 0 of 1"), and stops with this error.

WRONG_LAUNCHER = re.compile(
    r"wrong MPI launcher: (?P<ran>.+?); the kit needs (?P<needed>.+?) "
    r"\(course launch started (?P<launched>\d+) rank\(s\); this one is in an MPI world of "
    r"(?P<size>\d+)\)$",
    re.MULTILINE,
)


def wrong_launcher(ran: str, needed: str, launched: int, size: int) -> str:
    """The error of a rank whose MPI world is not the `launched` ranks: `ran` started it, the kit
    needs `needed` (the mpiexec of mpi4py's MPI)."""
    return (
        f"wrong MPI launcher: {ran}; the kit needs {needed} (course launch started {launched} "
        f"rank(s); this one is in an MPI world of {size})"
    )


# --- the kit's own error messages ---------------------------------------------------------------

# course/cli.py prints a command's error as two lines, `course COMMAND: MESSAGE` and `  -> FIX`.
KIT_ERROR = re.compile(
    r"^course (?P<command>[a-z]+): (?P<message>.+)\n  -> (?P<fix>.+)$", re.MULTILINE
)

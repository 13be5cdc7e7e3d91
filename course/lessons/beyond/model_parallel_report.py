"""Notebook 08's view of the model-parallel job (jobs/run_model_parallel.sh): its runs traced to
their job logs, and the two settings side by side, time and bytes per step.

A file counts only when its seal holds and the log of its job names it with the file's SHA-256
(course.contracts.model_parallel's line): a file copied from elsewhere or edited is left out, with a
note saying why. Given the scheduler's accounting (the grader's: course.instructor.scoring), the
job must also be in its records, be the student's and have run as long as the file claims, as
course.evidence checks the stages' runs; where the records cannot be read, a note says so.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from wcwidth import ljust, rjust, width

from course import i18n
from course.cluster.accounting import Accounting
from course.contracts import joblog, model_parallel
from course.errors import ResultsError
from course.i18n import _
from course.lessons.beyond import parallelism

# The note line's English, which course/lessons/beyond/model_parallel.py formats too; `note` says
# it in the student's language.
NOTE = "note: {note}"


def note(text: str) -> str:
    """A note line: `text` (already in the student's language) after "note:"."""
    return _("note: {note}").format(note=text)


@dataclass(frozen=True)
class Run:
    """One traced model-parallel file: the setting both ways ran in, and what each took."""

    run: str  # runs/<folder>/<file>, as its log names it
    started: float
    ranks: int
    cores: int
    hosts: tuple[str, ...]
    width: int
    batch: int
    images: int
    parameters: int
    cut_after: int
    cut_shape: tuple[int, ...]
    activation_bytes: int
    gradient_bytes_per_rank: int
    data_seconds: tuple[float, ...]
    model_seconds: tuple[float, ...]

    def median(self, setting: str) -> float:
        """The median seconds of a step of `setting` (course.contracts.model_parallel.SETTINGS)."""
        seconds = self.data_seconds if setting == "data_parallel" else self.model_seconds
        return float(np.median(seconds))


def _run(record: dict, name: str) -> Run:
    return Run(
        run=name,
        started=record["started"],
        ranks=record["ranks"],
        cores=record.get("cores") or 0,
        hosts=tuple(record["hosts"]),
        width=record["model"]["width"],
        batch=record["batch"],
        images=record["images"],
        parameters=record["model"]["parameters"],
        cut_after=record["cut"]["after_block"],
        cut_shape=tuple(record["cut"]["shape"]),
        activation_bytes=record["model_parallel"]["activation_bytes"],
        gradient_bytes_per_rank=record["data_parallel"]["gradient_bytes_per_rank"],
        data_seconds=tuple(record["data_parallel"]["seconds"]),
        model_seconds=tuple(record["model_parallel"]["seconds"]),
    )


@dataclass
class _Job:
    """What the accounting reads of a file (course.cluster.accounting.TracedRun): its one job, the
    hosts it names and the seconds it ran (no device: the job runs on CPU ranks)."""

    record: dict
    segments: list[dict] = field(default_factory=list)  # one job wrote the file: nothing resumed


def _why_not(record: dict, path: Path, name: str, folder: Path, checked: Accounting | None) -> str:
    """Why the file does not count ("" when it does); what the accounting could not check is
    printed as a note."""
    job = record["job"]
    log = joblog.find(folder, job["id"] or "", job["name"]) if job["id"] else None
    if log is None:
        return _("no job log of job {job} is in this folder").format(job=job["id"] or "?")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if not any(
        line["path"] == name and line["sha256"] == digest
        for line in model_parallel.logged(joblog.read(log))
    ):
        return _(
            "the log {log} does not name this file with its SHA-256 (copied or edited?)"
        ).format(log=log.name)
    if checked is None:
        return ""
    claims = {"job": job, "hosts": record["hosts"], "wall_seconds": record["seconds_total"]}
    problems, notes = checked.check(_Job(claims))
    for said in notes:
        print(note(said))
    return i18n.listed(problems, "; ")


def sort_out(
    folder: Path = Path("."), checked: Accounting | None = None
) -> tuple[list[Run], list[str]]:
    """(the model-parallel files of folder/runs that count, why each other one does not): a file
    counts when its seal holds, its job's log names it with its SHA-256 and, with `checked`, the
    scheduler's records show that job as the student's."""
    found, left_out = [], []
    for path in model_parallel.find(folder):
        name = path.relative_to(folder).as_posix()
        try:
            record = model_parallel.load(path)
        except ResultsError as e:
            left_out.append(_("left out {path}: {why}").format(path=name, why=e.message))
            continue
        why = _why_not(record, path, name, Path(folder), checked)
        if why:
            left_out.append(_("left out {path}: {why}").format(path=name, why=why))
        else:
            found.append(_run(record, name))
    return found, left_out


def traced(folder: Path = Path("."), checked: Accounting | None = None) -> list[Run]:
    """Every model-parallel file of folder/runs that counts (sort_out); the others are left out
    with a note that says why."""
    found, left_out = sort_out(folder, checked)
    for line in left_out:
        print(note(line))
    return found


def newest(folder: Path = Path("."), checked: Accounting | None = None) -> Run | None:
    """The traced run that started last, or None."""
    runs = traced(folder, checked)
    return max(runs, key=lambda run: run.started) if runs else None


def lines(run: Run) -> list[str]:
    """The two settings side by side: time a step, images/sec, bytes a step (columns aligned in
    terminal columns, as wide as their headings)."""
    ring = parallelism.gradient_bytes(run.parameters, run.ranks)
    data, split = run.median("data_parallel"), run.median("model_parallel")
    headings = (_("ms/step"), _("images/s"), _("bytes moved a step"))
    names = (_("data parallel"), _("model parallel"))
    first = max(16, *(width(name) for name in names))
    ms, rate, moved = (max(least, width(h)) for least, h in zip((9, 9, 20), headings))

    def row(name: str, seconds: float, nbytes: int) -> str:
        return (
            f"{ljust(name, first)} {seconds * 1e3:{ms}.1f} {run.batch / seconds:{rate}.1f} "
            f"{nbytes:{moved},}"
        )

    return [
        _(
            "{run}: VGG width {width} ({parameters:,} parameters), {batch} images a step, {ranks} "
            "ranks on {nodes} node(s) of {cores} cores"
        ).format(
            run=run.run,
            width=run.width,
            parameters=run.parameters,
            batch=run.batch,
            ranks=run.ranks,
            nodes=len(set(run.hosts)),
            cores=run.cores,
        ),
        " ".join([" " * first, *(rjust(h, w) for h, w in zip(headings, (ms, rate, moved)))]),
        row(names[0], data, ring)
        + "  "
        + _("(ring allreduce of {gradient:,} bytes of gradient)").format(
            gradient=run.gradient_bytes_per_rank
        ),
        row(names[1], split, run.activation_bytes)
        + "  "
        + _("(activations {shape} per image after block {block}, forward and back)").format(
            shape=list(run.cut_shape), block=run.cut_after
        ),
        _(
            "model parallel took {times:.2f} times as long a step, moving {bytes:.2g} times the "
            "bytes"
        ).format(times=split / data, bytes=run.activation_bytes / ring),
    ]


def summary(run: Run) -> dict:
    """The figures a student's answer cites, as plain numbers."""
    return {
        "run": run.run,
        "data_parallel_ms": run.median("data_parallel") * 1e3,
        "model_parallel_ms": run.median("model_parallel") * 1e3,
        "activation_bytes": run.activation_bytes,
        "gradient_bytes": parallelism.gradient_bytes(run.parameters, run.ranks),
    }


def show(folder: Path = Path(".")) -> Run | None:
    """Print the newest traced run's comparison (or how to get one); return it."""
    run = newest(folder)
    if run is None:
        print(
            _(
                "No model-parallel run yet: submit jobs/{script} (the cell above), wait for it to "
                "end, then run this cell again."
            ).format(script=model_parallel.JOB_SCRIPT)
        )
        return None
    for line in lines(run):
        print(line)
    return run

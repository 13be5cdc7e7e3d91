"""A run as evidence: its results file traced to the job log that shows it ran.

A run counts only when it is traced: its results file is sealed and unchanged, it finished,
and the scheduler's joined log of its job (``<name>.o<number>``, beside the notebooks) shows
the same job, the same images/sec and the file's SHA-256 (course.contracts.joblog reads those
lines). The log must show each of those lines once in the part of the job's attempt that wrote
the file (a job Slurm reran holds several; course.contracts.jobend), the run header must name the
results file's devices and GPU model, and a stage-3 run's workers must be the ranks `course
launch` started. Where the grader reaches the scheduler's accounting (course.cluster.accounting),
the job must be there, be the student's, and have had the nodes, GPUs and time the run claims;
where it cannot, the run's notes say that it was not checked. Which traced runs are compared, and
how: course.comparison. The Run that tracing fills in: course.evidence_run.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from course import i18n, prediction_evidence
from course.cluster.accounting import Accounting
from course.contracts import jobend, joblog, results, stages
from course.errors import ResultsError
from course.evidence_run import Run
from course.fileio import sha256_file
from course.i18n import _


def trace(path: Path, folder: Path | None = None, accounting: Accounting | None = None) -> Run:
    """Load a results file and check it against the job log in `folder` (default: beside runs/),
    and, with `accounting`, a traced run's jobs against the scheduler's records."""
    path = Path(path)
    folder = Path(folder) if folder else path.parent.parent.parent
    record = results.load(path)
    run = Run(path, record)
    edited = _("the results file was edited after the job wrote it (its seal does not match)")
    if not results.seal_ok(record):
        run.problems.append(edited)
    if not record["complete"]:
        run.problems.append(
            _("the run did not finish ({error})").format(
                error=record.get("error") or _("no end recorded")
            )
        )
    if not record.get("throughput"):
        run.problems.append(_("the run measured no images/sec (too few steady iterations)"))
    job_id = run.job_id
    if not job_id:
        run.problems.append(
            _("it did not run as a job (no job id): submit the job script, as the notebook shows")
        )
        return run
    run.log = joblog.find(folder, job_id, record["job"].get("name"))
    if run.log is None:
        run.problems.append(
            _(
                "no job log *.o{number} beside the notebooks: hand in the log the scheduler wrote "
                "(qsub -j oe) together with runs/"
            ).format(number=joblog.job_number(job_id))
        )
        return run
    attempt = record["job"].get("attempt", 1)
    text = jobend.attempt(joblog.read(run.log), attempt)  # the attempt that wrote the run
    if text is None:
        run.problems.append(
            _(
                "the log {log} does not show attempt {attempt} of job {job}, which wrote this "
                "results file: hand in the log the scheduler wrote"
            ).format(log=run.log.name, attempt=attempt, job=job_id)
        )
        return run
    ended = jobend.ended_at(text)  # None while the job runs, or when SIGKILL left no end line
    text = jobend.until_end(
        text
    )  # what processes that outlived the job wrote after its end does not count
    finished = record.get("finished_at")
    if ended and finished and datetime.fromisoformat(finished) > ended:
        run.problems.append(
            _(
                "the results file was written at {finished}, after job {job} ended ({ended} UTC): "
                "a process of the job outlived it; run the job again"
            ).format(finished=finished, job=job_id, ended=f"{ended:%Y-%m-%d %H:%M:%S}")
        )
    digests = joblog.results_digests(text, path.parent.name, results.FILENAME)
    shown, shown_in = prediction_evidence.first_job(folder, run.segments, text, run.log)
    if not digests:
        run.problems.append(
            _("the log {log} does not name this results file").format(log=run.log.name)
        )
    elif len(digests) > 1:  # a job writes its results line once: a second one was added to the log
        run.problems.append(
            _(
                "the log {log} names {file} {count} times; a job writes one results line: the log "
                "was edited"
            ).format(
                log=run.log.name, file=f"{path.parent.name}/{results.FILENAME}", count=len(digests)
            )
        )
    elif sha256_file(path) not in digests:
        if prediction_evidence.written_but_prediction(record, shown, digests[0]):
            # the run is the job's; only its prediction was edited, and that does not count
            run.problems = [problem for problem in run.problems if problem != edited]
            run.prediction_problem = prediction_evidence.edited_in_results(
                f"{path.parent.name}/{results.FILENAME}", job_id
            )
        else:
            run.problems.append(
                _(
                    "the results file differs from the one job {job} wrote (see its sha256 in "
                    "{log})"
                ).format(job=job_id, log=run.log.name)
            )
    if run.prediction_problem is None:
        run.prediction, run.prediction_problem = prediction_evidence.recorded(
            record, shown, f"{path.parent.name}/{results.FILENAME}", shown_in
        )
    rates = joblog.throughputs(text)
    if len(rates) > 1:
        run.problems.append(
            _(
                "the log {log} shows {count} Throughput lines ({rates}); a job prints one: the log "
                "was edited"
            ).format(
                log=run.log.name, count=len(rates), rates=i18n.listed(f"{r:.2f}" for r in rates)
            )
        )
    elif run.images_per_sec and not any(
        joblog.same_throughput(rate, run.images_per_sec) for rate in rates
    ):
        run.problems.append(
            _("images/sec in the results ({rate:.2f}) is not what the log shows ({logged})").format(
                rate=run.images_per_sec, logged=i18n.listed(f"{r:.2f}" for r in rates) or _("none")
            )
        )
    run.problems += _header_problems(run, text, run.log)
    run.problems += _launch_problems(run, text, run.log)
    run.problems += _earlier_segments(run, folder)
    script = folder / record["script"].get("name", "")
    if script.is_file() and sha256_file(script) != record["script"].get("sha256"):
        run.notes.append(
            _(
                "{script} has changed since this job ran it: run the job again after your last "
                "change"
            ).format(script=script.name)
        )
    if (
        accounting is not None and run.traced
    ):  # only runs that count are worth asking the scheduler about
        problems, notes = accounting.check(run)
        run.problems += problems
        run.notes += notes
    return run


def _header_problems(run: Run, text: str, log: Path) -> list[str]:
    """Why the log's run header of this job does not show this run: one header, with the results
    file's stage, workers, devices and GPU model; a stage-2 run on GPUs."""
    record, job_id = run.record, run.record["job"]["id"]
    headers = [header for header in joblog.run_headers(text) if header["job"] == job_id]
    shown = {"stage": record["stage"], "workers": run.workers}
    if len(headers) > 1:
        return [
            _(
                "the log {log} shows {count} run headers of job {job}; a job starts one run: the "
                "log was edited"
            ).format(log=log.name, count=len(headers), job=job_id)
        ]
    if not headers or {k: headers[0][k] for k in shown} != shown:
        return [
            _("the log does not show a {stage} run of job {job} with {workers} worker(s)").format(
                stage=record["stage"], job=job_id, workers=run.workers
            )
        ]
    problems = []
    devices, model = run.devices, record.get("gpu_model")
    if (headers[0]["devices"], headers[0]["gpu_model"]) != (devices, model):
        problems.append(
            _(
                "the log's run header shows devices {logged} (GPU model {logged_model}), the "
                "results file {devices} (GPU model {model})"
            ).format(
                logged=i18n.listed(headers[0]["devices"]),
                logged_model=headers[0]["gpu_model"] or _("none"),
                devices=i18n.listed(devices),
                model=model or _("none"),
            )
        )
    gpus = (
        record.get("device_kind") == "gpu"
        and model
        and all(str(d).startswith("@cupy") for d in devices)
    )
    if record["stage"] == stages.MULTI_GPU.name and not gpus:
        problems.append(
            _(
                "a {stage} run trains on GPUs, and this one shows devices {devices} with GPU model "
                "{model}"
            ).format(stage=record["stage"], devices=i18n.listed(devices), model=model or _("none"))
        )
    return problems


def _launch_problems(run: Run, text: str, log: Path) -> list[str]:
    """Why a stage-3 run's workers are not the ranks its job's `course launch` started (other stages
    run one process, without it)."""
    job_id = run.record["job"]["id"]
    if run.record["stage"] != stages.MULTI_NODE.name:
        return []
    launched = [launch for launch in joblog.launches(text) if launch["job"] == job_id]
    if not launched:
        return [
            _(
                "the log {log} does not show course launch starting the ranks of job {job} (stage "
                "3 runs through jobs/run_multi_node_training.sh, which prints it)"
            ).format(log=log.name, job=job_id)
        ]
    if len(launched) > 1:
        return [
            _(
                "the log {log} shows course launch starting job {job} {count} times; a job "
                "launches once: the log was edited"
            ).format(log=log.name, job=job_id, count=len(launched))
        ]
    [launch] = launched
    problems = []
    if launch["slots"] != run.workers:
        problems.append(
            _(
                "the results file says {workers} worker(s), but course launch started {slots} "
                "rank(s) in job {job}"
            ).format(workers=run.workers, slots=launch["slots"], job=job_id)
        )
    if launch["command_ranks"] is not None and launch["command_ranks"] != launch["slots"]:
        problems.append(
            _(
                "the launcher's command in {log} starts {ranks} rank(s), not the {slots} slot(s) "
                "course launch names"
            ).format(log=log.name, ranks=launch["command_ranks"], slots=launch["slots"])
        )
    return problems


def _earlier_segments(run: Run, folder: Path) -> list[str]:
    """Why the jobs this run resumed from do not count: each must have left its log, shown this run,
    and written the snapshot the next job resumed from before it ended."""
    problems = []
    for segment in run.segments[:-1]:
        job = segment.get("job") or {}
        log = joblog.find(folder, job.get("id") or "", job.get("name")) if job.get("id") else None
        if log is None:
            problems.append(
                _(
                    "the run resumed from job {job}, whose log is not beside the notebooks: hand "
                    "in every job's log together with runs/"
                ).format(job=job.get("id") or _("(none)"))
            )
            continue
        text = jobend.attempt(joblog.read(log), job.get("attempt", 1)) or ""
        ended, shown = jobend.ended_at(text), jobend.until_end(text)
        if not any(
            header["job"] == job["id"] and header["stage"] == run.record["stage"]
            for header in joblog.run_headers(shown)
        ):
            problems.append(
                _(
                    "the log {log} does not show job {job} (attempt {attempt}) training this run"
                ).format(log=log.name, job=job["id"], attempt=job["attempt"])
                if job.get("attempt")
                else _("the log {log} does not show job {job} training this run").format(
                    log=log.name, job=job["id"]
                )
            )
        taken = segment.get("snapshot_at")
        if not taken or (ended and datetime.fromisoformat(taken) > ended):
            problems.append(
                _("job {job} wrote the snapshot this run resumed from after it ended").format(
                    job=job["id"]
                )
                if taken
                else _(
                    "job {job} wrote the snapshot this run resumed from at no recorded time"
                ).format(job=job["id"])
            )
    return problems


def runs(stage: str, folder: Path = Path("."), accounting: Accounting | None = None) -> list[Run]:
    """Every results file of `stage` under folder/runs, traced (against `accounting` too, when
    given), oldest first."""
    found = []
    for path in results.find(folder, stage):
        try:
            found.append(trace(path, folder, accounting))
        except ResultsError as e:
            found.append(Run(path, {"stage": stage}, problems=[e.message]))
    return found

"""`python -m course site verify`: before the class, run the course's jobs on the applied site.

Run it on a login node after `python -m course site apply PROFILE`. It submits, through the site's
own scheduler, the course's job scripts at the smallest settings (one epoch of the site's training
settings): stage 1, stage 2 (where the profile declares 2 or more GPUs per node), stage 3 over the
largest run the profile's scaling runs name, the allreduce benchmark over as many nodes, and a probe
job that reports the compute node's software, GPUs (with the GPU self-test) and data set. It waits
for them, saying each change of state, then writes report.md, report.json and a summary: per check
what ran, where, how long, and what to fix. A failed check exits 1.

Its folder (--out) holds the jobs' runs/ as a student's folder does, so that
`python -m course plan --students N --measured DIR` budgets the course from its measured times.
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from course import paths
from course.cli import command_parser
from course.cluster import pbs, siteenv, sites, submit, usage
from course.cluster.job import Job
from course.cluster.siteenv import SiteSettings
from course.contracts import lessons, stages
from course.errors import CourseError, SiteError
from course.instructor import site_checks, solution_scripts
from course.instructor.site_report import JobRun, Report

PROBE_SCRIPT = "site_verify_probe.sh"
SITE_ENV = "source jobs/site_env.sh"  # the line of every job script that sets up the site
TIMEOUT = 3600.0  # seconds for every job to end, queueing included
BENCHMARK_ENV = {"ROUNDS": "1", "BUDGET": "0.5"}  # one short burst per algorithm
_EPOCH = re.compile(r"(--epoch|-e)(=|\s+)\d+")


@dataclass(frozen=True)
class Planned:
    key: str  # site_checks.KEYS
    what: str
    script: str  # in jobs/
    nodes: int | None = None  # None: as the script asks
    per_node: int | None = None
    env: dict[str, str] = field(default_factory=dict)
    skipped: str = ""  # why it is not submitted on this site

    def request(self, settings: SiteSettings, folder: Path) -> str:
        asked = pbs.read_request(
            (folder / paths.JOBS_DIR / self.script).read_text(), extra=settings.resources
        )
        nodes = self.nodes or asked.nodes
        per_node = self.per_node or asked.mpiprocs
        return f"{nodes} node(s) x {per_node} rank(s)" + (
            f", {asked.ngpus} GPU(s) per node" if asked.ngpus else ""
        )


def with_epochs(train_args: str, epochs: int) -> str:
    """The site's training settings with `epochs` epochs."""
    if _EPOCH.search(train_args):
        return _EPOCH.sub(f"--epoch {epochs}", train_args)
    return f"{train_args} --epoch {epochs}".strip()


def plan_jobs(
    settings: SiteSettings, train_args: str, chosen: frozenset[str] = lessons.EVERY_JOB
) -> list[Planned]:
    """The jobs of a verify run on this site, the probe first: it says soonest what is missing.
    A job no lesson in `chosen` (lessons' job names) submits is skipped, said so."""
    nodes, per_node = settings.largest_run
    benchmarked = {lessons.BENCHMARK, lessons.EXCHANGE_BENCHMARK} & chosen
    training = {"COURSE_TRAIN_ARGS": train_args}
    gpus = settings.gpus_per_node
    return [
        Planned("probe", "environment probe and GPU self-test", PROBE_SCRIPT),
        Planned("stage1", "stage 1", stages.SINGLE_GPU.job_script, env=training),
        Planned(
            "stage2",
            "stage 2",
            stages.MULTI_GPU.job_script,
            env=training,
            skipped="" if gpus >= 2 else "skipped: no GPUs on these nodes (gpus_per_node < 2)",
        ),
        Planned("stage3", "stage 3", stages.MULTI_NODE.job_script, nodes, per_node, training),
        Planned(
            "benchmark",
            "allreduce benchmark",
            usage.BENCHMARK_SCRIPT,
            nodes,
            per_node,
            dict(BENCHMARK_ENV),
            skipped="" if benchmarked else f"skipped: no lesson of {lessons.FILE} runs it",
        ),
    ]


def prepare(kit: Path, folder: Path) -> SiteSettings:
    """The verify run's folder: the applied jobs/, a probe job, and the solutions' training
    scripts; the applied site's settings."""
    jobs = kit / paths.JOBS_DIR
    settings = siteenv.of_folder(kit)
    if not settings.site:
        raise SiteError(
            f"no site profile is applied in {jobs}", "python -m course site apply PROFILE first"
        )
    if (folder / "runs").exists():
        raise CourseError(
            f"{folder} already holds a verify run (runs/)",
            "give another --out, or remove that folder: `course plan --measured` reads every run",
        )
    sites.copy_jobs(jobs, folder / paths.JOBS_DIR)
    # The probe asks for what stage 1 asks for: its directives, and its lines up to site_env.sh.
    stage1 = (folder / paths.JOBS_DIR / stages.SINGLE_GPU.job_script).read_text()
    directives = stage1[stage1.index(sites.BEGIN) : stage1.index(sites.END) + len(sites.END)]
    body = stage1.split(sites.END, 1)[1].split(SITE_ENV, 1)[0]
    (folder / paths.JOBS_DIR / PROBE_SCRIPT).write_text(
        "#!/bin/bash\n# `course site verify`'s probe of a compute node, on the node stage 1 gets "
        "(course/diagnostics/probe.py).\n"
        + directives
        + body
        + f"{SITE_ENV}\n\npython -m course.diagnostics.probe\n"
    )
    solution_scripts.write(kit / "solutions" / paths.ASSIGNMENT, folder)
    return settings


@dataclass
class Tracked:
    """A planned job while verify follows it."""

    planned: Planned
    job: Job | None = None
    submitted: float | None = None
    running: float | None = None  # when its log first appeared
    ended: float | None = None
    status: int | None = None
    note: str = ""

    def state(self) -> str:
        if self.planned.skipped:
            return self.planned.skipped
        if self.job is None:
            return self.note or "waiting to be submitted"
        if self.ended is not None:
            return f"ended with exit status {self.status}" if self.status is not None else self.note
        return "running" if self.running is not None else "queued"

    def outcome(self) -> site_checks.Outcome:
        start = self.running if self.running is not None else self.submitted
        seconds = self.ended - start if self.ended is not None and start is not None else None
        return site_checks.Outcome(
            self.job, self.status, seconds, self.note or self.planned.skipped
        )


def follow(
    tracked: list[Tracked], folder: Path, timeout: float, one_at_a_time: bool, echo=print
) -> None:
    """Submit the jobs (one after another where they share this machine), wait for them, and say
    each change of state with the time since the start; at `timeout` say which still run."""
    started = time.monotonic()
    changed = threading.Condition()

    def wait(item: Tracked) -> None:
        assert item.job is not None
        left = max(1.0, timeout - (time.monotonic() - started))
        status = item.job.wait(timeout=left, echo=None, poll=2.0)
        with changed:
            item.status, item.ended = status, time.monotonic()
            if status is None:
                item.note = (
                    f"had not ended after {timeout:.0f} s: it goes on running; cancel it with "
                    f"{item.job.cancel_command()}, or give verify a longer --timeout"
                )
            changed.notify_all()

    said: dict[int, str] = {}
    while True:
        with changed:
            for item in tracked:
                if item.job is not None and item.running is None and item.job.find_log():
                    item.running = time.monotonic()
            busy = any(t.job is not None and t.ended is None for t in tracked)
            waiting = [t for t in tracked if t.job is None and not t.planned.skipped and not t.note]
            if waiting and time.monotonic() - started > timeout:  # no time left to run them
                for item in waiting:
                    item.note = f"not submitted: verify's --timeout of {timeout:.0f} s had passed"
                continue
            if waiting and not (one_at_a_time and busy):
                _submit(waiting[0], folder, echo)
                if waiting[0].job is not None:
                    threading.Thread(target=wait, args=(waiting[0],), daemon=True).start()
                continue
            for index, item in enumerate(tracked):
                state = item.state()
                if said.get(index) != state:
                    said[index] = state
                    job = f" (job {item.job.id})" if item.job else ""
                    echo(f"[{time.monotonic() - started:5.0f} s] {item.planned.what}{job}: {state}")
            if not busy and not waiting:
                return
            if time.monotonic() - started > timeout + 60:  # the waits end at the timeout
                return
            changed.wait(timeout=2.0)


def _submit(item: Tracked, folder: Path, echo) -> None:
    planned = item.planned
    item.submitted = time.monotonic()
    try:
        item.job = submit.submit(
            Path(paths.JOBS_DIR) / planned.script,
            nodes=planned.nodes,
            per_node=planned.per_node,
            env=planned.env or None,
            workdir=folder,
            echo=None,
        )
    except CourseError as e:
        item.note = f"not submitted: {e.message}" + (f" ({e.hint})" if e.hint else "")
        item.ended = time.monotonic()
        echo(f"[{planned.what}: {item.note}]")


def run(kit: Path, folder: Path, train_args: str | None, timeout: float, echo=print) -> Report:
    """A verify run of the site applied in `kit` into `folder`; its report, written there."""
    started_at = datetime.now(UTC).isoformat(timespec="seconds")
    started = time.monotonic()
    folder.mkdir(parents=True, exist_ok=True)
    settings = prepare(kit, folder)
    args = train_args or with_epochs(settings.train_args, 1)
    chosen = lessons.load(kit).jobs
    tracked = [Tracked(planned) for planned in plan_jobs(settings, args, chosen)]
    echo(f"course site verify: site {settings.site} ({settings.scheduler}); jobs from {folder}")
    follow(tracked, folder, timeout, one_at_a_time=settings.scheduler == "local", echo=echo)
    outcomes = {item.planned.key: item.outcome() for item in tracked}
    found = site_checks.evaluate(folder, settings, outcomes, kit / "grading.toml")
    jobs = [
        JobRun(
            what=item.planned.what,
            script=f"{paths.JOBS_DIR}/{item.planned.script}",
            request=item.planned.request(settings, folder),
            job_id=item.job.id if item.job else None,
            exit_status=item.status,
            seconds=outcomes[item.planned.key].seconds,
            log=_relative(item.job.find_log(), folder) if item.job else None,
            hosts=found.hosts.get(item.planned.key, []),
            note=outcomes[item.planned.key].note,
        )
        for item in tracked
    ]
    report = Report(
        site=settings.site,
        scheduler=settings.scheduler,
        folder=str(folder),
        started_at=started_at,
        seconds=time.monotonic() - started,
        train_args=args,
        dataset=found.dataset,
        jobs=jobs,
        checks=found.checks,
        versions=found.versions,
    )
    report.write(folder)
    return report


def _relative(path: Path | None, folder: Path) -> str | None:
    return str(path.relative_to(folder)) if path is not None else None


def main(argv: list[str]) -> int:
    parser = command_parser("course site verify", __doc__)
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="the verify run's folder (default: build/site-verify-<UTC time> in the kit)",
    )
    parser.add_argument(
        "--folder",
        type=Path,
        default=None,
        help="the kit's folder, site applied (default: the kit)",
    )
    parser.add_argument(
        "--train-args",
        default=None,
        help="the jobs' training settings (default: the site's, with --epoch 1)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=TIMEOUT,
        help="seconds to wait for every job, queueing included (default %(default)g)",
    )
    args = parser.parse_args(argv)
    kit = (args.folder or paths.kit_root()).resolve()
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    folder = (args.out or kit / "build" / f"site-verify-{stamp}").resolve()
    report = run(kit, folder, args.train_args, args.timeout)
    print(report.summary())
    print(f"report: {folder / 'report.md'} (and report.json); budget the course from it with:")
    print(f"  python -m course plan --students N --measured {folder}")
    return 1 if report.failed else 0

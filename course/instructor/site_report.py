"""The report of `python -m course site verify`: its facts, typed, and their three renderings.

The dataclasses here are the one home of the report's fields: report.json is their asdict(), and
the Markdown page (report.md, what an instructor pastes into a bug report) and the terminal summary
are written from them, never from anything else.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from course.fileio import atomic_file

JSON_NAME = "report.json"
MARKDOWN_NAME = "report.md"
STATUSES = ("ok", "warn", "fail", "skipped")  # warn: works, but worth knowing; only fail fails
_MARKS = {"ok": "[ok]", "warn": "[??]", "fail": "[!!]", "skipped": "[--]"}


@dataclass(frozen=True)
class JobRun:
    """One job verify submitted, as the scheduler and its log tell."""

    what: str  # e.g. "stage 1", "environment probe"
    script: str  # jobs/<name>.sh
    request: str  # nodes x ranks per node (and GPUs) it asked for
    job_id: str | None  # None: it was not submitted (see `note`)
    exit_status: int | None  # None: it did not end within the timeout
    seconds: float | None  # from submission to its end, as verify saw it
    log: str | None  # its joined log, relative to the verify folder
    hosts: list[str] = field(default_factory=list)  # where its ranks ran, from its log or results
    note: str = ""  # why it was not submitted, or how it ended when not with exit status 0


@dataclass(frozen=True)
class Check:
    """One thing an instructor needs to work before the class."""

    name: str  # what is checked, e.g. "MPI reaches every node"
    status: str  # one of STATUSES
    found: str  # what the jobs' outputs showed
    fix: str = ""  # what to change, where status is fail (or warn)
    evidence: list[str] = field(default_factory=list)  # the jobs or files it comes from


@dataclass(frozen=True)
class Report:
    site: str
    scheduler: str
    folder: str  # the verify run's folder: `course plan --measured` reads its runs/
    started_at: str  # ISO 8601, UTC
    seconds: float  # the whole verify run
    train_args: str  # the training settings of its jobs
    dataset: str  # the data set its jobs read
    jobs: list[JobRun]
    checks: list[Check]
    versions: dict[str, str | None]  # as the compute nodes import them (the probe job)

    @property
    def failed(self) -> list[Check]:
        return [check for check in self.checks if check.status == "fail"]

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str) -> Report:
        data = json.loads(text)
        return cls(
            **{
                **data,
                "jobs": [JobRun(**job) for job in data["jobs"]],
                "checks": [Check(**check) for check in data["checks"]],
            }
        )

    def write(self, folder: Path) -> tuple[Path, Path]:
        """report.json and report.md in `folder`, each written whole or not at all."""
        paths = folder / JSON_NAME, folder / MARKDOWN_NAME
        for path, text in zip(paths, (self.to_json(), self.markdown())):
            with atomic_file(path, "w") as f:
                f.write(text)
        return paths

    def summary(self) -> str:
        """The terminal's lines: one per check, the fix under each failed one."""
        lines = [f"course site verify: site {self.site} ({self.scheduler}), {self.seconds:.0f} s"]
        for check in self.checks:
            lines.append(f"  {_MARKS[check.status]} {check.name}: {check.found}")
            if check.fix and check.status in ("fail", "warn"):
                lines.append(f"       -> {check.fix}")
        failed = len(self.failed)
        lines.append(
            f"{failed} check(s) failed: fix them, apply the profile again and rerun "
            "`python -m course site verify`"
            if failed
            else "every check passed"
        )
        return "\n".join(lines)

    def markdown(self) -> str:
        lines = [
            f"# Site check: {self.site}",
            "",
            f"`python -m course site verify` on site **{self.site}** (scheduler {self.scheduler}), "
            f"started {self.started_at}, {self.seconds:.0f} s in all. Jobs submitted from "
            f"`{self.folder}` with training settings `{self.train_args}` on data set "
            f"`{self.dataset}`.",
            "",
            f"**{len(self.failed)} of {len(self.checks)} checks failed.**"
            if self.failed
            else f"**All {len(self.checks)} checks passed.**",
            "",
            "## Checks",
            "",
            "| check | result | found | fix |",
            "|---|---|---|---|",
        ]
        for check in self.checks:
            lines.append(
                f"| {_cell(check.name)} | {check.status} | {_cell(check.found)} | "
                f"{_cell(check.fix) if check.status in ('fail', 'warn') else ''} |"
            )
        lines += [
            "",
            "## Jobs",
            "",
            "| job | script | asked for | job id | exit | seconds | hosts | log |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for job in self.jobs:
            seconds = f"{job.seconds:.0f}" if job.seconds is not None else "-"
            exit_status = "-" if job.exit_status is None else str(job.exit_status)
            lines.append(
                f"| {_cell(job.what)} | `{job.script}` | {job.request} | {job.job_id or '-'} | "
                f"{exit_status} | {seconds} | {', '.join(job.hosts) or '-'} | "
                f"{f'`{job.log}`' if job.log else '-'} |"
                + (f" {_cell(job.note)}" if job.note else "")
            )
        lines += ["", "## Versions on the compute nodes", ""]
        lines += [
            f"- {name}: {version or 'not importable'}" for name, version in self.versions.items()
        ]
        evidence = sorted({item for check in self.checks for item in check.evidence})
        if evidence:
            lines += ["", "## Evidence", ""] + [f"- `{item}`" for item in evidence]
        return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    """Text for a Markdown table cell: no line breaks, no bare pipes."""
    return text.replace("|", "\\|").replace("\n", "<br>")

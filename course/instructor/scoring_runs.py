"""The runs a grade looks at: the scheduler's records a student's runs are checked against, the
latest traced run of a stage, the traced stage-1 baselines, and the notes on them a student sees
(course.instructor.scoring and scoring_accuracy grade from them)."""

from __future__ import annotations

from pathlib import Path

from course import evidence, i18n
from course.cluster.accounting import Accounting
from course.contracts import grading_rules, results, stages
from course.evidence import Run
from course.i18n import _
from course.instructor import editions
from course.notebook.checks import fail


def accounting(folder: Path) -> Accounting:
    """What runs are checked against: the scheduler's records, for the student whose nbgrader folder
    this is (<student>/<assignment>), with their cluster user from grading.toml [accounting]
    users."""
    rules = grading_rules.load()
    where = Path(folder).resolve()
    student = where.parent.name if where.name in editions.ASSIGNMENTS else None
    return Accounting(student, rules.cluster_user(student), rules.accounting_enabled)


def notes(*runs: Run) -> None:
    for run in runs:
        for note in run.notes:
            print(_("note: {note}").format(note=note))


def latest_traced(stage: str, folder: Path) -> Run:
    __tracebackhide__ = True
    found = evidence.runs(stage, folder, accounting(folder))
    if not found:
        fail(
            _("there is no {stage} run in {folder}/").format(
                stage=stage, folder=Path(folder, results.RUNS_DIR)
            ),
            _("submit the stage's job and hand in runs/ with its log (<job script>.o<number>)"),
        )
    traced = [run for run in found if run.traced]
    if not traced:
        last = found[-1]
        fail(
            _("no {stage} run can be traced to its job; the latest, {run}: {problems}").format(
                stage=stage, run=last.describe(), problems=i18n.listed(last.problems, "; ")
            )
        )
    return traced[-1]


def baselines(folder: Path, checked: Accounting) -> list[Run]:
    """The traced stage-1 runs, oldest first; CheckFailed when there is none."""
    __tracebackhide__ = True
    bases = [run for run in evidence.runs(stages.BASELINE.name, folder, checked) if run.traced]
    if not bases:
        fail(
            _("no traced stage-1 run to compare with"),
            _("stage 1's results and job log must come with the submission"),
        )
    return bases

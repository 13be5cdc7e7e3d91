"""The comparison policy: which traced runs are compared with which stage-1 baseline, and how.

Efficiency is weak-scaling efficiency against the student's own stage-1 run: speedup divided
by the number of workers, with the same device kind, GPU model, model and batch per worker
(strong scaling: the same total batch). The runs come traced from course.evidence; the report
shows what this finds and course.instructor.scoring turns it into points.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from course import i18n
from course.contracts import results, stages
from course.errors import ResultsError
from course.evidence import Run, runs
from course.i18n import _


def baseline(folder: Path = Path("."), name: str | None = None) -> Run | None:
    """The stage-1 run named `name` (its folder under runs/) if traced, else the student's latest
    traced one."""
    traced = [run for run in runs(stages.BASELINE.name, folder) if run.traced]
    named = [run for run in traced if run.path.parent.name == name]
    if name and not named:
        raise ResultsError(
            _("no traced stage-1 run {name} in {folder}/").format(
                name=repr(name), folder=Path(folder, results.RUNS_DIR)
            ),
            _("one of: {names}").format(
                names=i18n.listed(run.path.parent.name for run in traced) or _("none")
            ),
        )
    return named[0] if named else (traced[-1] if traced else None)


def _batch(run: Run, kind: str) -> int | None:
    return (run.record.get("batch_size") or {}).get(kind)


def comparable(run: Run, base: Run, scaling: str = "weak") -> list[str]:
    """Why `run` cannot be compared with the stage-1 `base` run (empty if it can).

    scaling: weak (each worker the batch stage 1 had: the work grows with the workers) or strong
    (stage 1's batch split over the workers: the same work, done by more of them)."""
    batch = (
        (_("batch per worker"), "per_worker") if scaling == "weak" else (_("total batch"), "total")
    )
    differences = []
    for label, mine, theirs in (
        (_("device kind"), run.record.get("device_kind"), base.record.get("device_kind")),
        (
            _("GPU model"),
            run.record.get("gpu_model"),
            base.record.get("gpu_model"),
        ),  # a slower one flatters
        (
            _("model"),
            (run.record.get("model") or {}).get("name"),
            (base.record.get("model") or {}).get("name"),
        ),
        (
            _("model width"),
            (run.record.get("model") or {}).get("width"),
            (base.record.get("model") or {}).get("width"),
        ),
        (batch[0], _batch(run, batch[1]), _batch(base, "per_worker")),
        (
            _("data set"),
            (run.record.get("dataset") or {}).get("name"),
            (base.record.get("dataset") or {}).get("name"),
        ),
    ):
        if mine != theirs:
            differences.append(
                _("{label}: {mine} here, {theirs} in stage 1").format(
                    label=label, mine=mine, theirs=theirs
                )
            )
    return differences


def scaling(run: Run, base: Run) -> str | None:
    """How `run` compares with the stage-1 `base`: weak, strong (on 2 or more workers), or None."""
    if not comparable(run, base):
        return "weak"
    if run.workers > 1 and not comparable(run, base, "strong"):
        return "strong"
    return None


def efficiency(run: Run, base: Run) -> float:
    """Speedup over stage 1 divided by the workers: weak scaling (N times the work in the same time
    is 1.0) and strong scaling (the same work in 1/N of the time is 1.0) alike."""
    return run.images_per_sec / (run.workers * base.images_per_sec)


@dataclass(frozen=True)
class Coverage:
    """What the traced stage-3 runs compare: rank counts and communication settings."""

    rank_counts: list[int]
    settings: list[str]
    NEEDED = 2  # of each

    @property
    def complete(self) -> bool:
        return len(self.rank_counts) >= self.NEEDED and len(self.settings) >= self.NEEDED

    def describe(self) -> str:
        return _("rank counts {counts} and communication settings {settings}").format(
            counts=self.rank_counts, settings=self.settings
        )


def accuracy_candidates(found: list[Run], base: Run) -> list[Run]:
    """The stage-3 runs whose accuracy may be graded: traced, on 2 or more ranks, comparable with
    stage 1, with the taught learning-rate rule, the most ranks first (scoring takes the best of
    them: another run never costs points)."""
    taught = [
        run
        for run in found
        if run.traced
        and run.workers > 1
        and run.lr_rule == stages.TAUGHT_LR_RULE
        and not comparable(run, base)
    ]
    return sorted(
        taught, key=lambda run: -run.workers
    )  # the most ranks first, as the report names them


def comparison_coverage(found: list[Run]) -> Coverage:
    traced = [run for run in found if run.traced and not run.profiled]
    return Coverage(
        sorted({run.workers for run in traced}), sorted({run.setting for run in traced})
    )

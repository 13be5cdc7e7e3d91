"""What the course's grading rules (grading.toml, or its public part in the students' bundle) say
about a student's runs, as the report and its self-checks show it: the accuracy target, the
efficiency points, the reference speeds. Nothing where no rules can be read."""

from __future__ import annotations

from pathlib import Path

from course import comparison, evidence, i18n
from course.contracts import grading_rules, stages
from course.errors import CourseError
from course.i18n import _


def course_rules() -> grading_rules.GradingRules | None:
    """grading.toml's rules where it can be read (its public part in the students' bundle); None
    where neither is there."""
    try:
        return grading_rules.for_students()
    except CourseError:
        return None


def accuracy_target(base: evidence.Run | None) -> float | None:
    """The course's accuracy target for the baseline's data set (grading.toml), where it can be
    found."""
    rules = course_rules()
    if base is None or rules is None:
        return None
    return rules.accuracy_target((base.record.get("dataset") or {}).get("name", ""))


def target_of(folder: Path = Path("."), baseline: str | None = None) -> float | None:
    """The accuracy target of the data set a folder's baseline run trained on (None: no target
    known)."""
    return accuracy_target(comparison.baseline(folder, baseline))


def efficiency_tiers(folder: Path = Path("."), baseline: str | None = None) -> list[str]:
    """The efficiency points of stages 2 and 3 on the baseline's kind of device, as the course's
    grading rules set them (nothing where no rules can be read)."""
    rules, base = course_rules(), comparison.baseline(folder, baseline)
    if rules is None:
        return []
    kind = base.record.get("device_kind", "gpu") if base is not None else "gpu"
    said = []
    for stage in (stages.MULTI_GPU.name, stages.MULTI_NODE.name):
        limits = rules.efficiency(stage, kind)
        tiers = i18n.listed(
            _("{share:.0%} of them at {minimum} or more").format(share=share, minimum=minimum)
            for minimum, share in limits.tiers
        )
        said.append(
            _(
                "Efficiency points of {stage} on {kind} (the course's grading rules): {tiers}, "
                "none below; above {suspicious} a run does not compare with its baseline."
            ).format(stage=stage, kind=kind, tiers=tiers, suspicious=limits.suspicious_above)
            + (
                _(
                    " The grade takes the best against stage 1 or against stage 3's own one-rank "
                    "run."
                )
                if stage == stages.MULTI_NODE.name
                else ""
            )
        )
    return said


def references() -> dict[str, dict[str, float]]:
    """Reference images/sec per GPU model from grading.toml, where it can be found."""
    rules = course_rules()
    return rules.references if rules is not None else {}

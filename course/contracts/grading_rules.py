"""grading.toml, the instructor's rules: the one reader of the file, with typed values.

The grader (course.instructor.scoring) and the report a student runs (course.notebook.report) both
read it. The students' bundle has no grading.toml: it ships its public part instead (every section
but the instructor's [accounting]), written by `write_public` into PUBLIC beside this module, and
`for_students()` reads whichever is there. `load()` is for the grader, which reads grading.toml
itself.
"""

from __future__ import annotations

import json
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from course.errors import GradingError
from course.i18n import _

FILE = "grading.toml"
OVERRIDE = "COURSE_GRADING_CONFIG"  # the file to read instead of looking for one
# The public part of grading.toml, in the students' bundle only (course bundle writes it).
PUBLIC = Path(__file__).with_name("grading_public.json")
PRIVATE = ("accounting",)  # sections students do not get: who is who on the cluster
SUSPICIOUS_ABOVE = 1.05  # efficiency above which runs do not compare, where grading.toml sets none
PREDICTION_FACTOR = 4.0  # how far the allreduce prediction may be off, where grading.toml sets none
# The share of a core below which a profiled run's ranks shared their cores with other work, so that
# its measured allreduce is not judged (course.notebook.allreduce_judge), where grading.toml sets
# none. A rank alone on its core gets nearly all of it (MPI polls while it waits); one descheduled
# for other work loses a share in proportion.
SHARED_BELOW = 0.8
# Predict, then run: the gaps within which a predicted choice is not graded, where grading.toml sets
# none (images/sec: relative, per device kind; final accuracy: absolute).
THROUGHPUT_NOISE = {"gpu": 0.1, "cpu": 0.4}
ACCURACY_NOISE = 0.05

Tiers = list[tuple[float, float]]  # [(minimum, share of the points)], best first


@dataclass(frozen=True)
class EfficiencyLimits:
    tiers: Tiers  # best first; below the last, no credit
    suspicious_above: float  # above this a run does not compare with stage 1


@dataclass(frozen=True)
class GradingRules:
    """What grading.toml says, read once; each reader asks for the value it needs."""

    data: dict[str, Any]

    @property
    def accounting_enabled(self) -> bool:
        """Whether runs are checked against the scheduler's records ([accounting] enabled)."""
        return bool(self.data.get("accounting", {}).get("enabled", True))

    def cluster_user(self, student: str | None) -> str | None:
        """The student's user on the cluster ([accounting] users), where it is set."""
        return (self.data.get("accounting", {}).get("users") or {}).get(student)

    def efficiency(self, stage: str, kind: str) -> EfficiencyLimits:
        """The limits for `stage` on `kind` (gpu or cpu): [efficiency.<stage>.<kind>], else the
        stage's, else [efficiency]'s."""
        settings = self.data.get("efficiency", {})
        for_stage = settings.get(stage, {})
        for_kind = for_stage.get(kind, {})
        tiers = for_kind.get("tiers", for_stage.get("tiers", []))
        default = for_stage.get(
            "suspicious_above", settings.get("suspicious_above", SUSPICIOUS_ABOVE)
        )
        return EfficiencyLimits(_best_first(tiers), for_kind.get("suspicious_above", default))

    def accuracy_target(self, dataset: str) -> float | None:
        """The validation accuracy runs on `dataset` must reach ([accuracy] target); a variant
        `<base>_<size>px_<percent>p` without its own entry takes its base's. None: no target set."""
        targets = self.data.get("accuracy", {}).get("target", {})
        value = targets.get(dataset, targets.get(dataset.split("_")[0]))
        return float(value) if value is not None else None

    @property
    def accuracy_speedup_tiers(self) -> Tiers:
        """Shares of the time-to-accuracy points by speedup over stage 1 ([accuracy.speedup])."""
        return _best_first(self.data.get("accuracy", {}).get("speedup", {}).get("tiers", []))

    @property
    def prediction_factor(self) -> float:
        """How far the allreduce prediction may be from the measurement ([allreduce])."""
        return float(self.data.get("allreduce", {}).get("prediction_factor", PREDICTION_FACTOR))

    @property
    def shared_below(self) -> float:
        """The share of a core below which a profiled run's measured allreduce is not judged
        ([allreduce])."""
        return float(self.data.get("allreduce", {}).get("shared_below", SHARED_BELOW))

    def throughput_noise(self, kind: str) -> float:
        """The relative images/sec gap within which two runs' order is noise on `kind` (gpu or cpu)
        ([prediction.<kind>], else [prediction])."""
        settings = self.data.get("prediction", {})
        value = settings.get(kind, {}).get("throughput_noise", settings.get("throughput_noise"))
        return float(value if value is not None else THROUGHPUT_NOISE.get(kind, 0.1))

    @property
    def accuracy_noise(self) -> float:
        """The gap of final validation accuracy within which two runs' order is noise
        ([prediction])."""
        return float(self.data.get("prediction", {}).get("accuracy_noise", ACCURACY_NOISE))

    @property
    def references(self) -> dict[str, dict[str, float]]:
        """Reference images/sec per GPU model and stage ([reference]), shown beside the runs."""
        return self.data.get("reference", {})


def _best_first(tiers: list[list[float]]) -> Tiers:
    # the values as written (1, not 1.0, in the messages that quote them)
    return sorted(((minimum, share) for minimum, share in tiers), reverse=True)


def find() -> Path | None:
    """grading.toml: $COURSE_GRADING_CONFIG, else the first one found from here upwards; None."""
    explicit = os.environ.get(OVERRIDE)
    candidates = (
        [Path(explicit)] if explicit else [p / FILE for p in (Path.cwd(), *Path.cwd().parents)]
    )
    return next((candidate for candidate in candidates if candidate.is_file()), None)


def load(path: Path | None = None) -> GradingRules:
    """The rules of the grading.toml at `path`, else the one `find()` gives; GradingError when there
    is none, or it is not valid TOML."""
    if path is not None and not path.is_file():
        raise GradingError(
            _("{path} does not exist").format(path=path),
            _("give the course folder that holds {file}").format(file=FILE),
        )
    path = path or find()
    if path is None:
        raise GradingError(
            _("no {file} found (looked from {folder} upwards)").format(
                file=FILE, folder=Path.cwd()
            ),
            _("grade inside the kit's course folder, or set {variable}").format(variable=OVERRIDE),
        )
    try:
        return GradingRules(tomllib.loads(path.read_text()))
    except tomllib.TOMLDecodeError as e:
        raise GradingError(
            _("{path} is not valid TOML: {error}").format(path=path, error=e),
            _("fix the line it names"),
        ) from None


def for_students() -> GradingRules | None:
    """The rules a student's report and checks show: grading.toml where `find()` finds one (the
    instructor's folder), else the public part the bundle ships (PUBLIC); None when neither is
    there."""
    if find() is not None:
        return load()
    if PUBLIC.is_file():
        return GradingRules(json.loads(PUBLIC.read_text()))
    return None


def write_public(source: Path, target: Path) -> Path:
    """Write the public part of the grading.toml `source` (every section but PRIVATE's) as JSON to
    `target`; returns `target`."""
    try:
        data = tomllib.loads(source.read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise GradingError(
            _("cannot read {path}: {error}").format(path=source, error=e),
            _("fix {file} before making the bundle").format(file=FILE),
        ) from None
    public = {name: value for name, value in data.items() if name not in PRIVATE}
    target.write_text(json.dumps(public, indent=1, sort_keys=True) + "\n")
    return target

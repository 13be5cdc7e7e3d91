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
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    ValidationError,
)

from course.contracts import config_keys
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
# its measured allreduce is not judged (course.lessons.step_time.allreduce_judge), where
# grading.toml sets
# none. A rank alone on its core gets nearly all of it (MPI polls while it waits); one descheduled
# for other work loses a share in proportion.
SHARED_BELOW = 0.8
# Predict, then run: the gaps within which a predicted choice is not graded, where grading.toml sets
# none (images/sec: relative, per device kind; final accuracy: absolute).
THROUGHPUT_NOISE = {"gpu": 0.1, "cpu": 0.4}
ACCURACY_NOISE = 0.05

Tiers = list[tuple[float, float]]  # [(minimum, share of the points)], best first
# Numbers as written: a tier of 1 stays 1, not 1.0, in the messages that quote it.
# Strict: "0.8" in quotes is text, not a number, and true is not 1.
Number = Annotated[StrictInt | StrictFloat, Field(allow_inf_nan=False)]


@dataclass(frozen=True)
class EfficiencyLimits:
    tiers: Tiers  # best first; below the last, no credit
    suspicious_above: float  # above this a run does not compare with stage 1


class _Table(BaseModel):
    # A key the model does not name is refused: a misspelt key would otherwise leave a rule at its
    # default without a word.
    model_config = ConfigDict(extra="forbid", frozen=True)


class KindLimits(_Table):
    tiers: list[tuple[Number, Number]] | None = None
    suspicious_above: Number | None = None


class StageLimits(KindLimits):
    gpu: KindLimits = KindLimits()
    cpu: KindLimits = KindLimits()


class Efficiency(_Table):
    suspicious_above: Number = SUSPICIOUS_ABOVE
    multi_gpu: StageLimits = StageLimits()
    multi_node: StageLimits = StageLimits()


class Speedup(_Table):
    tiers: list[tuple[Number, Number]] = []


class Accuracy(_Table):
    target: dict[str, Number] = {}
    speedup: Speedup = Speedup()


class Allreduce(_Table):
    prediction_factor: Number = PREDICTION_FACTOR
    shared_below: Number = SHARED_BELOW


class KindNoise(_Table):
    throughput_noise: Number | None = None


class Prediction(_Table):
    throughput_noise: Number | None = None
    accuracy_noise: Number = ACCURACY_NOISE
    gpu: KindNoise = KindNoise()
    cpu: KindNoise = KindNoise()


class Accounting(_Table):
    enabled: StrictBool = True
    users: dict[str, StrictStr] = {}


class GradingFile(_Table):
    """Every table and key grading.toml may hold, with its type and default."""

    efficiency: Efficiency = Efficiency()
    accuracy: Accuracy = Accuracy()
    allreduce: Allreduce = Allreduce()
    prediction: Prediction = Prediction()
    reference: dict[str, dict[str, Number]] = {}
    accounting: Accounting = Accounting()


class GradingRules:
    """What grading.toml says, checked and read once; each reader asks for the value it needs.
    `where` and `text` (the file's name and its text) place an error on its line."""

    def __init__(self, data: Mapping[str, Any], where: str = FILE, text: str = "") -> None:
        try:
            self.file = GradingFile.model_validate(data)
        except ValidationError as e:
            message, hint = config_keys.first_problem(e, GradingFile, text)
            raise GradingError(
                f"{where}{message}",
                hint or _("fix {file}: its comments say what each key holds").format(file=FILE),
            ) from None

    @property
    def accounting_enabled(self) -> bool:
        """Whether runs are checked against the scheduler's records ([accounting] enabled)."""
        return self.file.accounting.enabled

    def cluster_user(self, student: str | None) -> str | None:
        """The student's user on the cluster ([accounting] users), where it is set."""
        return self.file.accounting.users.get(student) if student else None

    def efficiency(self, stage: str, kind: str) -> EfficiencyLimits:
        """The limits for `stage` on `kind` (gpu or cpu): [efficiency.<stage>.<kind>], else the
        stage's, else [efficiency]'s."""
        settings = self.file.efficiency
        for_stage = getattr(settings, stage, None) or StageLimits()
        for_kind = getattr(for_stage, kind, None) or KindLimits()
        tiers = next((t for t in (for_kind.tiers, for_stage.tiers) if t is not None), [])
        ceiling = next(
            value
            for value in (
                for_kind.suspicious_above,
                for_stage.suspicious_above,
                settings.suspicious_above,
            )
            if value is not None
        )
        return EfficiencyLimits(_best_first(tiers), ceiling)

    def accuracy_target(self, dataset: str) -> float | None:
        """The validation accuracy runs on `dataset` must reach ([accuracy] target); a variant
        `<base>_<size>px_<percent>p` without its own entry takes its base's. None: no target set."""
        targets = self.file.accuracy.target
        value = targets.get(dataset, targets.get(dataset.split("_")[0]))
        return float(value) if value is not None else None

    @property
    def accuracy_speedup_tiers(self) -> Tiers:
        """Shares of the time-to-accuracy points by speedup over stage 1 ([accuracy.speedup])."""
        return _best_first(self.file.accuracy.speedup.tiers)

    @property
    def prediction_factor(self) -> float:
        """How far the allreduce prediction may be from the measurement ([allreduce])."""
        return float(self.file.allreduce.prediction_factor)

    @property
    def shared_below(self) -> float:
        """The share of a core below which a profiled run's measured allreduce is not judged
        ([allreduce])."""
        return float(self.file.allreduce.shared_below)

    def throughput_noise(self, kind: str) -> float:
        """The relative images/sec gap within which two runs' order is noise on `kind` (gpu or cpu)
        ([prediction.<kind>], else [prediction])."""
        settings = self.file.prediction
        for_kind = getattr(settings, kind, None) or KindNoise()
        value = next(
            (v for v in (for_kind.throughput_noise, settings.throughput_noise) if v is not None),
            THROUGHPUT_NOISE.get(kind, 0.1),
        )
        return float(value)

    @property
    def accuracy_noise(self) -> float:
        """The gap of final validation accuracy within which two runs' order is noise
        ([prediction])."""
        return float(self.file.prediction.accuracy_noise)

    @property
    def references(self) -> dict[str, dict[str, float]]:
        """Reference images/sec per GPU model and stage ([reference]), shown beside the runs."""
        return {name: dict(figures) for name, figures in self.file.reference.items()}


def _best_first(tiers: list[tuple[Number, Number]]) -> Tiers:
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
    text = path.read_text()
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise GradingError(
            _("{path} is not valid TOML: {error}").format(path=path, error=e),
            _("fix the line it names"),
        ) from None
    return GradingRules(data, str(path), text)


def for_students() -> GradingRules | None:
    """The rules a student's report and checks show: grading.toml where `find()` finds one (the
    instructor's folder), else the public part the bundle ships (PUBLIC); None when neither is
    there."""
    if find() is not None:
        return load()
    if PUBLIC.is_file():
        return GradingRules(json.loads(PUBLIC.read_text()), str(PUBLIC))
    return None


def write_public(source: Path, target: Path) -> Path:
    """Write the public part of the grading.toml `source` (every section but PRIVATE's) as JSON to
    `target`; returns `target`."""
    try:
        text = source.read_text()
        data = tomllib.loads(text)
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise GradingError(
            _("cannot read {path}: {error}").format(path=source, error=e),
            _("fix {file} before making the bundle").format(file=FILE),
        ) from None
    GradingRules(
        data, str(source), text
    )  # a misspelt key is refused here, not in a student's report
    public = {name: value for name, value in data.items() if name not in PRIVATE}
    target.write_text(json.dumps(public, indent=1, sort_keys=True) + "\n")
    return target

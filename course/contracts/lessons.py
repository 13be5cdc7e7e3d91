"""The course's lessons, and the instructor's choice of them (course.toml at the course folder's
root): the one place that says which notebooks and jobs a lesson has, how long it takes and what
it needs.

The core hands-on (one GPU, a node's GPUs, many nodes) is always taught; the deep dives are
picked. Everything that lists notebooks or jobs for a class follows the choice: the release (both
editions), the student bundle, grading, `course plan` and `course site verify`. The chosen
notebooks are one nbgrader assignment: the lessons share the student's runs and its stage-1
baseline.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from pydantic import BaseModel, ConfigDict, StrictStr, ValidationError

from course import i18n
from course.contracts import config_keys, stages
from course.errors import CourseError
from course.i18n import _

FILE = "course.toml"
CORE = "core"

# The jobs a lesson's notebooks submit, by the names `course plan` and `course site verify` use.
STAGE_1, STAGE_2, STAGE_3 = "stage1", "stage2", "stage3"
PROFILE, BENCHMARK = "profile", "benchmark"  # the step profiles; the allreduce benchmark
EXCHANGE_BENCHMARK, MODEL_PARALLEL = "exchange_benchmark", "model_parallel"

# THE table to edit when notebooks are split or renumbered: each lesson's notebooks (in the order
# students take them) and the jobs they submit. A lesson without a notebook yet is empty: today
# notebook 03 still holds the step's time, accuracy at scale and the run part, so core lists its
# profile and benchmark jobs.
PARTS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    CORE: (stages.CORE_NOTEBOOKS, (STAGE_1, STAGE_2, STAGE_3)),
    "step_time": (("04_step_time.ipynb",), (PROFILE, BENCHMARK)),
    "exchange": (("05_the_exchange.ipynb",), (EXCHANGE_BENCHMARK,)),
    "accuracy": (("06_accuracy_at_scale.ipynb",), ()),  # reads stage 3's comparison runs
    "run_part": (("07_run_part.ipynb",), ()),
    "beyond": (("08_beyond_data_parallel.ipynb",), (MODEL_PARALLEL,)),
}


class Lesson(BaseModel):
    """One lesson: its notebooks and jobs (PARTS), a prepared student's time for it in minutes,
    queue waits aside, and the lessons whose runs or functions it uses (the core is always
    there)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: StrictStr
    notebooks: tuple[StrictStr, ...]
    jobs: tuple[StrictStr, ...]
    minutes: int
    needs: tuple[StrictStr, ...] = ()

    @property
    def title(self) -> str:
        """What the lesson teaches, in the reader's language (translated when asked for)."""
        return _titles()[self.id]


def _titles() -> dict[str, str]:
    return {
        CORE: _("the core hands-on: one GPU, every GPU of a node, many nodes"),
        "step_time": _("where the step's time goes: the step profile and the α–β model"),
        "exchange": _("the gradient exchange: parameter server, overlap, half precision"),
        "accuracy": _("accuracy at scale: learning-rate rules, warm-up, large batches, LARS"),
        "run_part": _("the job's run part: placement, threads, staging"),
        "beyond": _("beyond data parallelism: the network split over ranks"),
    }


def _lesson(name: str, minutes: int, needs: tuple[str, ...] = ()) -> Lesson:
    notebooks, jobs = PARTS[name]
    return Lesson(id=name, notebooks=notebooks, jobs=jobs, minutes=minutes, needs=needs)


# Minutes: what each notebook's header states to students (docs/instructors.md gives the method:
# reading at 200 words a minute, 8 minutes a function, 10 a written answer, 3 a job).
LESSONS: dict[str, Lesson] = {
    lesson.id: lesson
    for lesson in (
        _lesson(CORE, 210),
        _lesson("step_time", 85),
        _lesson("exchange", 95, needs=("step_time",)),  # its benchmark fit and step profile
        _lesson("accuracy", 85),
        _lesson("run_part", 25),
        _lesson("beyond", 45, needs=("step_time",)),  # the ring's α–β model
    )
}
DEFAULT = tuple(LESSONS)  # every lesson: the release as the kit ships and tests it
EVERY_JOB = frozenset(job for lesson in LESSONS.values() for job in lesson.jobs)


class CourseFile(BaseModel):
    """Every key course.toml may hold."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    lessons: list[StrictStr] = list(DEFAULT)


class Choice(BaseModel):
    """The lessons a class takes (the core first, then in LESSONS' order)."""

    model_config = ConfigDict(frozen=True)

    lessons: tuple[Lesson, ...]

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(lesson.id for lesson in self.lessons)

    @property
    def notebooks(self) -> tuple[str, ...]:
        """The chosen notebooks, in file-name order (the order students take them)."""
        return tuple(sorted(n for lesson in self.lessons for n in lesson.notebooks))

    @property
    def jobs(self) -> frozenset[str]:
        return frozenset(job for lesson in self.lessons for job in lesson.jobs)

    @property
    def minutes(self) -> int:
        return sum(lesson.minutes for lesson in self.lessons)

    def describe(self) -> str:
        """One line per chosen lesson: id, time, notebooks."""
        return "\n".join(
            f"  {lesson.id} ({lesson.minutes} min): {', '.join(lesson.notebooks) or '-'}"
            for lesson in self.lessons
        )


def choose(names: list[str] | tuple[str, ...], where: str = FILE, text: str = "") -> Choice:
    """The Choice of the lessons `names` (the core added where left out); CourseError naming an
    unknown lesson with the nearest one, or a lesson a chosen one needs and the choice lacks."""
    line = config_keys.line_of(text, "lessons")
    for name in names:
        if name not in LESSONS:
            raise CourseError(
                f"{where}{line}: " + _("unknown lesson `{name}`").format(name=name),
                config_keys.sentences(
                    config_keys.did_you_mean(name, list(LESSONS)),
                    _("the lessons are {names}").format(names=i18n.listed(LESSONS)),
                ),
            )
    chosen = {CORE, *names}
    for name in LESSONS:
        missing = [need for need in LESSONS[name].needs if need not in chosen]
        if name in chosen and missing:
            raise CourseError(
                f"{where}{line}: "
                + _("lesson `{name}` needs {missing}, which the choice lacks").format(
                    name=name, missing=i18n.listed(f"`{m}`" for m in missing)
                ),
                _("add {missing} to lessons, or leave `{name}` out").format(
                    missing=i18n.listed(f'"{m}"' for m in missing), name=name
                ),
            )
    return Choice(lessons=tuple(lesson for name, lesson in LESSONS.items() if name in chosen))


def file_text(choice: Choice) -> str:
    """course.toml holding `choice` (for a course folder made by the kit: the demo, the tests)."""
    return "lessons = [" + ", ".join(f'"{name}"' for name in choice.ids) + "]\n"


def load(root: Path) -> Choice:
    """The choice in `root`/course.toml; every lesson (DEFAULT) where the folder has none."""
    path = Path(root) / FILE
    if not path.is_file():
        return choose(DEFAULT)
    text = path.read_text(encoding="utf-8")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise CourseError(
            _("{path} is not valid TOML: {error}").format(path=path, error=e),
            _("fix the line it names"),
        ) from None
    try:
        course = CourseFile.model_validate(data)
    except ValidationError as e:
        message, hint = config_keys.first_problem(e, CourseFile, text)
        raise CourseError(
            f"{path}{message}",
            hint or _("fix {file}: its comments say what each key holds").format(file=FILE),
        ) from None
    return choose(course.lessons, str(path), text)

"""What a graded class measured and where it struggled, for `python -m course class-report`.

Each student's runs are read from their submitted folder as the grader reads them (course.evidence:
a run counts when it is traced to its job log; course.comparison: what it is compared
with), the
scores and failed tests from the gradebook CSVs `python -m course grade` writes
(course.instructor.grade_report). The scheduler's accounting is not asked again: what grading found
there is in grades-details.csv's flags, which the report shows.
"""

from __future__ import annotations

import csv
import hashlib
import hmac
import os
import re
import secrets
from collections import Counter
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

from course import comparison, evidence, i18n, paths
from course.contracts import grading_rules, stages
from course.errors import GradingError
from course.instructor import editions, submission_files
from course.instructor.grade_report import BY_HAND, NOT_HANDED_IN

KEY_FILE = "class-report.key"  # in the course folder: the secret behind the stable pseudonyms


@dataclass(frozen=True)
class Point:
    """One traced run of a student (step profiles left out: their speed is not the run's)."""

    student: str
    run: str  # its folder under runs/
    stage: str
    workers: int
    device_kind: str
    images_per_sec: float
    speedup: float | None  # over the student's own stage-1 baseline; None: it does not compare
    efficiency: float | None
    scaling: str | None  # weak or strong (course.comparison.scaling); None: not compared


@dataclass(frozen=True)
class Accuracy:
    """Stage 1's baseline, or the stage-3 run on the most ranks with one learning-rate rule."""

    student: str
    rule: str  # "stage 1", or one of stages.COMPARED_LR_RULES (the plan's)
    workers: int
    final: float | None  # the last validation accuracy; None: no evaluation
    seconds: float | None  # time to the target accuracy; None: never reached


@dataclass(frozen=True)
class Flag:
    student: str
    where: str  # a run folder, "notebook test", or "submission"
    why: str


@dataclass
class Student:
    name: str
    score: float | None = None  # None: not in grades.csv (not graded)
    max_score: float | None = None
    points: list[Point] = field(default_factory=list)
    accuracy: list[Accuracy] = field(default_factory=list)
    flags: list[Flag] = field(default_factory=list)

    def best(self, stage: str) -> Point | None:
        """The stage's run the grade takes: the best efficiency, else the most images/sec."""
        found = [p for p in self.points if p.stage == stage]
        return max(found, key=lambda p: (p.efficiency or 0.0, p.images_per_sec), default=None)


@dataclass(frozen=True)
class Exercise:
    notebook: str
    test: str
    students: int  # with a score for it
    failed: int  # below its full points
    message: str  # the most common failure, numbers left out; "" when none failed
    same: int  # how many failed with that message


@dataclass
class ClassData:
    students: list[Student]
    exercises: list[Exercise]
    target: float | None  # the accuracy target of the class's data set (grading.toml)
    rules: grading_rules.GradingRules


def _float(text: str) -> float | None:
    return float(text) if text not in ("", None) else None


def read_csv(path: Path) -> list[dict[str, str]]:
    if not path.is_file():
        raise GradingError(
            f"{path} does not exist", "run `python -m course grade` first, or give --grades"
        )
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _runs(student: Student, folder: Path, rules: grading_rules.GradingRules) -> float | None:
    """Fill in the student's traced runs, accuracies and refused runs; their target (None: none)."""
    base = comparison.baseline(folder)
    target = (
        rules.accuracy_target((base.record.get("dataset") or {}).get("name", "")) if base else None
    )
    for stage in stages.NAMES:
        for run in evidence.runs(stage, folder):
            name = run.path.parent.name
            if not run.traced:
                student.flags.append(Flag(student.name, name, run.problems[0]))
                continue
            student.flags += [Flag(student.name, name, f"note: {note}") for note in run.notes]
            if run.profiled:
                continue
            scaling = comparison.scaling(run, base) if base is not None else None
            student.points.append(
                Point(
                    student.name,
                    name,
                    stage,
                    run.workers,
                    run.record.get("device_kind") or "gpu",
                    run.images_per_sec,
                    run.images_per_sec / base.images_per_sec if base and scaling else None,
                    comparison.efficiency(run, base) if base and scaling else None,
                    scaling,
                )
            )
    if base is None:
        return target
    student.accuracy.append(_accuracy(student.name, "stage 1", base, target))
    found = evidence.runs(stages.MULTI_NODE.name, folder)
    for rule in stages.COMPARED_LR_RULES:
        compared = [
            run
            for run in found
            if run.traced
            and not run.profiled
            and run.workers > 1
            and run.lr_rule == rule
            and not comparison.comparable(run, base)
        ]
        if compared:
            tried = [_accuracy(student.name, rule, run, target) for run in compared]
            student.accuracy.append(
                max(tried, key=lambda a: (a.workers, a.seconds is not None, -(a.seconds or 0)))
            )
    return target


def _accuracy(student: str, rule: str, run: evidence.Run, target: float | None) -> Accuracy:
    reached = run.time_to_accuracy(target) if target is not None else None
    return Accuracy(
        student, rule, run.workers, run.final_accuracy, reached["seconds"] if reached else None
    )


def gist(message: str) -> str:
    """A failure message without its hint and its figures, so that the same failure groups."""
    said = message.split("; -> ")[0]
    return re.sub(r"\d+\.\d+|\d{2,}", "#", said)[:240]


def exercises(details: list[dict[str, str]]) -> list[Exercise]:
    """Per test: how many students who handed in its notebook had it scored, how many lost points,
    the commonest message."""
    by_test: dict[tuple[str, str], list[dict[str, str]]] = {}
    for row in details:
        # Not a test (a flag, NOT GRADED), a written answer still to be graded by hand, or a test
        # of a notebook the student did not hand in (it would hide the exercise's real failures).
        missing = NOT_HANDED_IN.format(notebook=f"{row['notebook']}.ipynb")
        if row["test"] and row["score"] != "" and row["message"] not in (BY_HAND, missing):
            by_test.setdefault((row["notebook"], row["test"]), []).append(row)
    found = []
    for (notebook, test), rows in sorted(by_test.items()):
        failed = [row for row in rows if float(row["score"]) < float(row["max_score"])]
        common = Counter(gist(row["message"]) for row in failed).most_common(1)
        message, same = common[0] if common else ("", 0)
        found.append(Exercise(notebook, test, len(rows), len(failed), message, same))
    return found


def collect(root: Path, submitted: Path, grades: Path) -> ClassData:
    """Everything the class report shows, from a graded course folder."""
    rules = grading_rules.load(root / grading_rules.FILE)
    totals = {row["student_id"]: row for row in read_csv(grades)}
    details = read_csv(grades.with_name(grades.stem + "-details.csv"))
    refused = submission_files.refused_students(submitted, editions.ASSIGNMENTS)
    handed_in, _ = editions.handed_in(submitted, skip=set(refused))
    names = sorted({row["student"] for row in details} | set(totals) | set(handed_in))
    students, targets = [], Counter[float]()
    for name in names:
        student = Student(name)
        if name in totals:
            student.score = _float(totals[name]["score"])
            student.max_score = _float(totals[name]["max_score"])
        folder = submitted / name / handed_in.get(name, paths.ASSIGNMENT)
        if name in refused:  # as the grader: files no step may open, or a window on others'
            found = submission_files.described(refused[name][1], i18n.DEFAULT)
            why = f"the submission holds files the grader does not open ({found}): runs unread"
            student.flags.append(Flag(name, "submission", why))
        elif folder.is_dir():
            target = _runs(student, folder, rules)
            if target is not None:
                targets[target] += 1
        students.append(student)
    by_name = {student.name: student for student in students}
    for row in details:
        where = " ".join(filter(None, (row["notebook"], row["test"]))) or "submission"
        if row["message"].startswith("NOT GRADED"):
            by_name[row["student"]].flags.append(Flag(row["student"], where, row["message"]))
        for note in filter(None, row["flags"].split(" | ")):
            by_name[row["student"]].flags.append(Flag(row["student"], where, note))
    target = targets.most_common(1)[0][0] if targets else None
    return ClassData(students, exercises(details), target, rules)


def pseudonyms(root: Path, names: list[str]) -> dict[str, str]:
    """name -> a pseudonym that stays the same from one report to the next (a keyed hash, whose key
    the course folder keeps, so that no one can recompute it from the class list)."""
    key_file = root / KEY_FILE
    try:  # made once, readable by the instructor only; never replaced (the pseudonyms stay)
        descriptor = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        pass
    else:
        with os.fdopen(descriptor, "w") as f:
            f.write(secrets.token_hex(32))
    key = key_file.read_text().strip().encode()
    digests = {name: hmac.new(key, name.encode(), hashlib.sha256).hexdigest() for name in names}
    length = 6
    while len({digest[:length] for digest in digests.values()}) < len(names):
        length += 2  # two names that share a prefix get longer pseudonyms
    return {name: f"student-{digest[:length]}" for name, digest in digests.items()}


def anonymise(data: ClassData, names: dict[str, str]) -> ClassData:
    """The same data with every student's name replaced by its pseudonym, in messages too (a path
    in a message may name a student's folder)."""
    if not names:
        return data
    pattern = re.compile(
        "|".join(rf"(?<![\w-]){re.escape(name)}(?![\w-])" for name in sorted(names, key=len)[::-1])
    )

    def clean(value):
        return pattern.sub(lambda m: names[m.group(0)], value) if isinstance(value, str) else value

    def each(item):
        return replace(item, **{f.name: clean(getattr(item, f.name)) for f in fields(item)})

    students = [
        Student(
            names[s.name],
            s.score,
            s.max_score,
            [each(p) for p in s.points],
            [each(a) for a in s.accuracy],
            [each(f) for f in s.flags],
        )
        for s in data.students
    ]
    return ClassData(
        sorted(students, key=lambda s: s.name),
        [each(e) for e in data.exercises],
        data.target,
        data.rules,
    )

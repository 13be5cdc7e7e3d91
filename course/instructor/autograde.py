"""Grading a class with nbgrader's own apps (the logic behind `python -m course grade`, whose
command is course.instructor.grade_command).

Every submission is first verified in its own sandboxed process, several at a time
(course.instructor.verify: the student's functions only, each test in a clean child process);
nbgrader's autograde then scores the outputs the verifier produced (its Execute step replaced, in
nbgrader_config.py), so no student code runs in nbgrader or a kernel. It drives nbgrader's own apps
(generate_assignment into the gradebook, collect, autograde, generate_feedback, export). nbgrader's
autograde carries on past a submission it cannot grade and names it in its log; this module reads
that log, so a broken submission is named and never stops the others.

grades.csv is nbgrader's export without the submissions that could not be graded: the export would
give them whatever partial score the gradebook holds, which is not a grade. A notebook missing from
a submission scores 0 (nbgrader's rule). One grading run at a time per course folder: a second one
stops at once (the lock is gradebook.lock, beside gradebook.db), since two nbgrader runs on one
gradebook corrupt it.
"""

from __future__ import annotations

import csv
import fcntl
import itertools
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from course import paths
from course.errors import GradingError
from course.fileio import atomic_file
from course.instructor import (
    editions,
    exchange_collect,
    feedback_page,
    nbgrader_hook,
    verify,
    verify_plan,
)
from course.instructor.grade_report import Outcome, read_gradebook
from course.instructor.nbgrader_hook import CELL_TIMEOUT
from course.instructor.verify_protocol import VerificationError

ASSIGNMENT = paths.ASSIGNMENT
LOCK = "gradebook.lock"
SOURCE = "source"  # in the grading run's release folder: the chosen lessons' source


def _nbgrader(
    args: list[str],
    root: Path,
    extra: Sequence[str] = (),
    timeout: float | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess:
    env = {**paths.tool_environment(), **(env or {})}
    env["COURSE_GRADING_CONFIG"] = str(root / "grading.toml")
    command = [sys.executable, "-m", "nbgrader", *args, f"--CourseDirectory.root={root}", *extra]
    return subprocess.run(
        command, cwd=root, capture_output=True, text=True, env=env, timeout=timeout
    )


def _nbgrader_or_raise(args: list[str], root: Path, extra: Sequence[str], hint: str) -> None:
    """_nbgrader; GradingError "nbgrader ARGS[0] failed: ..." with `hint` where it fails."""
    run = _nbgrader(args, root, extra)
    if run.returncode != 0:
        raise GradingError(
            f"nbgrader {args[0]} failed: {_last_error(run.stdout + run.stderr)}", hint
        )


def _gradebook_options(submitted: Path, db_url: str) -> list[str]:
    """The submissions and the gradebook, as autograde and generate_feedback take them."""
    return [
        f"--CourseDirectory.submitted_directory={submitted}",
        f"--CourseDirectory.db_url={db_url}",
    ]


def _last_error(output: str) -> str:
    lines = [line for line in output.splitlines() if "ERROR" in line or "Error" in line]
    return (
        lines[-1] if lines else output.strip().splitlines()[-1] if output.strip() else "no output"
    )[:300]


def check_course_folder(root: Path) -> None:
    """GradingError unless `root` holds what grading needs."""
    for needed in ("nbgrader_config.py", "grading.toml", f"solutions/{ASSIGNMENT}"):
        if not (root / needed).exists():
            raise GradingError(
                f"{root} is not a course folder: it has no {needed}",
                "grade in a clone of the kit (or copy nbgrader_config.py, grading.toml and "
                "solutions/)",
            )


@contextmanager
def grading_lock(root: Path) -> Iterator[None]:
    """Hold the course folder's grading lock for the block; GradingError at once if another run
    holds it.

    The lock file stays (removing it would let a third run lock a new file while the second holds
    the old one); it holds the process id of the last run that took it, for the message.
    """
    with open(root / LOCK, "a+") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            holder = f.read().strip() or "unknown"
            raise GradingError(
                f"a grading run is already in progress in {root} (pid {holder})",
                "wait for it to end (or stop it), then run python -m course grade again",
            ) from None
        f.truncate(0)
        f.write(f"{os.getpid()}\n")
        f.flush()
        yield  # closing the file releases the lock, also when the process dies


def gradebook_url(root: Path) -> str:
    """The course folder's nbgrader gradebook, as nbgrader's apps take it."""
    return f"sqlite:///{root / 'gradebook.db'}"


def source_of(release: Path) -> Path:
    """Where `prepare` builds the graded source (nbgrader's source folder) beside `release`."""
    return release / SOURCE


def prepare(root: Path, release: Path, assignment: str = ASSIGNMENT) -> str:
    """Put the edition `assignment`'s notebooks of the chosen lessons and their test cells into
    the course's gradebook, their source into source_of(`release`)/<assignment> and their student
    release into `release`/<assignment> (what every student was given); return the gradebook's
    URL."""
    check_course_folder(root)
    source = source_of(release)
    if (source / assignment).exists():
        shutil.rmtree(source / assignment)
    editions.prepare_source(root, assignment, source)
    db_url = gradebook_url(root)
    _nbgrader_or_raise(
        ["generate_assignment", assignment, "--force"],
        root,
        [
            f"--CourseDirectory.source_directory={source}",
            f"--CourseDirectory.release_directory={release}",
            f"--CourseDirectory.db_url={db_url}",
        ],
        "python -m course release shows the whole error",
    )
    return db_url


def _failures(log: str, students: list[str]) -> dict[str, str]:
    """{student: what went wrong} for the submissions nbgrader's autograde log says it could not
    process."""
    failures = {}
    marker = re.compile(
        r"^\[\w+App \| ERROR\] There was an error processing assignment: (.*)$", re.M
    )
    for match in marker.finditer(log):
        student = Path(match.group(1).strip()).parent.name
        # Only this student's part of the log: a failure before any notebook names none.
        starts = [
            m.end()
            for m in re.finditer(rf"student with ID '{re.escape(student)}'", log[: match.start()])
        ]
        before = log[starts[-1] if starts else match.start() : match.start()]
        after = log[match.end() :]
        section = after[: next_marker.start()] if (next_marker := marker.search(after)) else after
        errors = re.findall(r"^\s*([\w.]+(?:Error|Exception)\b.*)$", section, re.M)
        converting = re.findall(r"Converting notebook (\S+\.ipynb)", before)
        where = f"{Path(converting[-1]).name}: " if converting else ""
        failures[student] = (
            where + (errors[-1].strip() if errors else "nbgrader could not process it")
        )[:300]
    for student in students:
        if f"for student '{student}'" in log and student not in failures:
            failures[student] = "nbgrader could not process it (see its log)"
    return failures


def verify_all(
    root: Path,
    submitted: Path,
    students: list[str],
    verdicts: Path,
    jobs: int,
    cell_timeout: float,
    assignment: str = ASSIGNMENT,
    submission_timeout: float = verify.SUBMISSION_TIMEOUT,
    *,
    source: Path,
) -> dict[str, tuple[float, dict, str]]:
    """Verify every submission of the edition `assignment`, `jobs` at a time, each in its own
    sandboxed process speaking the edition's language, each within `submission_timeout` seconds;
    leave the verdicts in `verdicts` for nbgrader's step. {student: (seconds, flags by (notebook,
    test), failure or "")}."""
    from concurrent.futures import ThreadPoolExecutor

    plans = verify_plan.plans(source / assignment)

    def one(student: str) -> tuple[float, dict, str]:
        folder = submitted / student / assignment
        started = time.monotonic()
        try:
            found = verify.verify(
                folder,
                plans,
                course_root=root,
                grading_config=root / "grading.toml",
                timeout=cell_timeout,
                lang=editions.language(assignment),
                submission_timeout=submission_timeout,
            )
        except VerificationError as e:
            nbgrader_hook.write_verdicts(verdicts, student, None, e.message)
            return time.monotonic() - started, {}, e.message
        nbgrader_hook.write_verdicts(verdicts, student, found)
        flags = {
            (Path(v.notebook).stem, test): notes for v in found for test, notes in v.flags.items()
        }
        if verify.shadowing(folder):
            flags[("", "")] = verify.shadowing(folder)
        for v in found:
            plan = next(p for p in plans if p.notebook == v.notebook)
            for test in verify.deleted_tests(folder / v.notebook, plan):  # none when not handed in
                flags.setdefault((Path(v.notebook).stem, test), []).append(
                    verify.DELETED.format(test=test)
                )
            for test in verify.disagreements(folder / v.notebook, v):
                flags.setdefault((Path(v.notebook).stem, test), []).append(
                    "the notebook as handed in shows this test passing, the grader's run fails it "
                    "(changed after it ran, or tampering)"
                )
        return time.monotonic() - started, flags, ""

    done = itertools.count(1)

    def said(student: str) -> tuple[float, dict, str]:
        """one(student), then a line that says so: a class takes minutes."""
        seconds, flags, failure = one(student)
        print(
            f"  verified {student} ({next(done)} of {len(students)}) in {seconds:.0f} s"
            + (f": NOT GRADED ({failure})" if failure else ""),
            flush=True,
        )
        return seconds, flags, failure

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return dict(zip(students, pool.map(said, students)))


def autograde(
    root: Path,
    submitted: Path,
    students: list[str],
    db_url: str,
    jobs: int = 0,
    cell_timeout: float = CELL_TIMEOUT,
    assignment: str = ASSIGNMENT,
    submission_timeout: float = verify.SUBMISSION_TIMEOUT,
    skip: Sequence[str] = (),
    *,
    source: Path,
) -> list[Outcome]:
    """Verify every submission of the edition `assignment`, then nbgrader autograde over them in
    one process, but for the students `skip` names (nbgrader's autograde would open their
    folders); outcomes from the gradebook. `source`: the folder `prepare` built the graded source
    in (source_of its release)."""
    with tempfile.TemporaryDirectory(prefix="course-verdicts-") as verdicts:
        workers = jobs or os.cpu_count() or 1
        verified = verify_all(
            root,
            submitted,
            students,
            Path(verdicts),
            workers,
            cell_timeout,
            assignment,
            submission_timeout,
            source=source,
        )
        try:
            run = _nbgrader(
                ["autograde", assignment, "--create", "--force"],
                root,
                [
                    *_gradebook_options(submitted, db_url),
                    f"--CourseDirectory.source_directory={source}",
                    f"--CourseDirectory.student_id_exclude={','.join(sorted(skip))}",
                ],
                timeout=6 * 3600,
                env={nbgrader_hook.VERDICTS: verdicts},
            )
            log = run.stdout + run.stderr
        except subprocess.TimeoutExpired:
            raise GradingError(
                "nbgrader autograde ran for more than 6 hours", "grade fewer submissions at a time"
            ) from None
    failures = _failures(log, students)
    failures.update({student: failure for student, (_, _, failure) in verified.items() if failure})
    if run.returncode != 0 and not failures:
        raise GradingError(
            f"nbgrader autograde failed: {_last_error(log)}", "see nbgrader's log above"
        )
    outcomes = []
    for student in students:
        seconds, flags, _ = verified[student]
        outcome = Outcome(
            student,
            student not in failures,
            seconds,
            failure=failures.get(student, ""),
            flags=flags,
            assignment=assignment,
        )
        if outcome.graded:
            read_gradebook(root, submitted, db_url, outcome)
        outcomes.append(outcome)
    return outcomes


def feedback(root: Path, submitted: Path, db_url: str, assignment: str = ASSIGNMENT) -> None:
    """nbgrader's feedback pages of the edition `assignment`; a translated edition's with its
    labels in its language (course.instructor.feedback_page), the English one nbgrader's own."""
    lang = editions.language(assignment)
    run = _nbgrader(
        ["generate_feedback", assignment, "--force"],
        root,
        [*_gradebook_options(submitted, db_url), *feedback_page.options(lang)],
        env=feedback_page.environment(lang),
    )
    if run.returncode != 0:
        said = _last_error(run.stdout + run.stderr)
        print(f"feedback: nbgrader generate_feedback reported: {said}", file=sys.stderr)


def export(root: Path, db_url: str, out: Path, outcomes: list[Outcome]) -> None:
    """nbgrader's export of the gradebook into `out`, without the submissions that were not
    graded."""
    _nbgrader_or_raise(
        ["export", f"--to={out}"],
        root,
        [f"--CourseDirectory.db_url={db_url}"],
        "see nbgrader's log",
    )
    _keep_rows(out, outcomes)


def _keep_rows(path: Path, outcomes: list[Outcome]) -> None:
    """Of an nbgrader export, keep for each student of this run the row of the edition graded
    (one per student): not a submission that could not be graded, nor another edition the student
    handed in (or was graded on before). Students not in this run keep theirs."""
    ran = {outcome.student for outcome in outcomes}
    graded = {(outcome.assignment, outcome.student) for outcome in outcomes if outcome.graded}
    with open(path, newline="") as f:
        header, *rows = list(csv.reader(f))
    assignment, student = header.index("assignment"), header.index("student_id")
    kept = [
        row for row in rows if row[student] not in ran or (row[assignment], row[student]) in graded
    ]
    with atomic_file(path, "w") as f:
        csv.writer(f, lineterminator="\n").writerows([header, *kept])


def collect(
    root: Path, exchange: Path, submitted: Path, assignment: str = ASSIGNMENT
) -> list[exchange_collect.Note]:
    """nbgrader collect of the edition `assignment` from `exchange` into `submitted` (--update: a
    student's newer submission replaces the one collected before), through the kit's
    CheckedCollect; what it passed over, for the instructor."""
    run = _nbgrader(
        ["collect", assignment, "--update"],
        root,
        [
            f"--ExchangeFactory.collect={exchange_collect.__name__}.CheckedCollect",
            f"--Exchange.root={exchange.resolve()}",
            f"--CourseDirectory.submitted_directory={submitted}",
        ],
    )
    log = run.stdout + run.stderr
    if run.returncode != 0:
        raise GradingError(
            f"nbgrader collect failed: {_last_error(log)}",
            "check --exchange and the course id in nbgrader_config.py",
        )
    return exchange_collect.notes(log)

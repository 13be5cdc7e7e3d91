"""`python -m course grade`: autograde every submission with nbgrader, make feedback, export a
gradebook (course.instructor.autograde does the work).

    python -m course grade                 # the course folder's submitted/<student>/<assignment>
    python -m course grade path/to/submitted            # another folder in nbgrader's layout
    python -m course grade --exchange /srv/nbgrader/exchange    # collect from an exchange first

Exit status: 0 when every submission was graded (a score of 0 is a grade), 1 when some could not
be, 2 when grading could not start at all. The submissions that could not be graded are left out of
grades.csv and named, with the reason, in grades-details.csv, the summary and on stderr; a notebook
missing from a submission is said to be not handed in there.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from course import i18n, paths
from course.cli import command_parser
from course.contracts import lessons
from course.errors import CourseError, GradingError
from course.instructor import (
    autograde,
    editions,
    plagiarism,
    process_limit,
    sandbox,
    submission_files,
    verify,
)
from course.instructor.autograde import ASSIGNMENT
from course.instructor.grade_report import Outcome, summary, write_details
from course.instructor.nbgrader_hook import CELL_TIMEOUT


def _refused(submitted: Path) -> dict[str, Outcome]:
    """{student: NOT GRADED, and why} for the submissions that hold what no step may open
    (course.instructor.submission_files), said in the edition's language."""
    refused = {}
    for student, (assignment, found) in submission_files.refused_students(
        submitted, editions.ASSIGNMENTS
    ).items():
        why = i18n.in_language(editions.language(assignment), submission_files.NOT_GRADED)
        failure = why.format(found=submission_files.described(found, editions.language(assignment)))
        refused[student] = Outcome(student, False, 0.0, failure=failure, assignment=assignment)
    return refused


def main(argv: list[str] | None = None) -> int:
    parser = command_parser("course grade", __doc__)
    parser.add_argument(
        "submitted",
        nargs="?",
        type=Path,
        default=None,
        help="submissions as <folder>/<student>/distributed_training (default: <course>/submitted)",
    )
    parser.add_argument(
        "--course-dir", type=Path, default=None, help="the course folder (default: the kit)"
    )
    parser.add_argument(
        "--exchange", type=Path, default=None, help="nbgrader collect from this exchange first"
    )
    parser.add_argument(
        "--out", type=Path, default=None, help="the gradebook CSV (default: <course>/grades.csv)"
    )
    parser.add_argument("--no-feedback", dest="feedback", action="store_false")
    parser.add_argument(
        "--jobs",
        "-j",
        type=int,
        default=0,
        help="submissions verified at a time (default: one per CPU core)",
    )
    parser.add_argument(
        "--cell-timeout",
        type=float,
        default=CELL_TIMEOUT,
        help="seconds a test cell may run (default %(default)g)",
    )
    parser.add_argument(
        "--submission-timeout",
        type=float,
        default=verify.SUBMISSION_TIMEOUT,
        help="seconds all the tests of one submission may take together; past it the submission "
        "is NOT GRADED, said so (default %(default)g)",
    )
    args = parser.parse_args(argv)
    root = (args.course_dir or paths.kit_root()).resolve()
    autograde.check_course_folder(root)
    with autograde.grading_lock(root):
        return run(root, args)


def run(root: Path, args: argparse.Namespace) -> int:
    """One grading run, with the course folder locked."""
    with tempfile.TemporaryDirectory(prefix="course-release-") as release:
        return _grade(root, args, Path(release))


def _grade(root: Path, args: argparse.Namespace, release: Path) -> int:
    submitted = (args.submitted or root / "submitted").resolve()
    db_url = autograde.gradebook_url(root)
    passed_over = []
    if args.exchange:
        autograde.prepare(root, release)
        for assignment in editions.ASSIGNMENTS:
            passed_over += autograde.collect(root, args.exchange, submitted, assignment)
    for note in passed_over:
        print(f"exchange: {note.student or 'all'}: {note.text}", file=sys.stderr)
    # Before anything opens a file of a submission: one that holds links, pipes or devices
    # would stop or starve every step after this one.
    refused = _refused(submitted)
    chosen, others = editions.handed_in(submitted, skip=set(refused))
    if not chosen and not refused:
        raise GradingError(
            f"no submissions in {submitted} (expected <student>/{ASSIGNMENT}/, or another "
            f"edition's: {', '.join(list(editions.ASSIGNMENTS)[1:])})",
            "give the folder that holds the students' folders",
        )
    for student, also in others.items():
        print(
            f"{student} handed in {', '.join(also)} as well: graded on {chosen[student]}, the "
            "latest",
            file=sys.stderr,
        )
    verify.check_sandbox()
    outcomes = list(refused.values())
    copied = []
    bases: list[Path] = []  # every graded edition's solution and release notebooks
    for assignment in editions.ASSIGNMENTS:
        students = [student for student, edition in chosen.items() if edition == assignment]
        if not students:
            continue
        try:  # an edition that does not build is that edition's error, not the class's
            autograde.prepare(root, release, assignment)
        except CourseError as e:  # an untranslated line, a broken notebook of its source
            print(f"{assignment} could not be built: {e}", file=sys.stderr)
            said = " ".join(e.message.split())[:500]
            why = f"the {assignment} edition could not be built for grading: {said}"
            outcomes += [
                Outcome(s, False, 0.0, failure=why, assignment=assignment) for s in students
            ]
            continue
        print(f"grading {len(students)} submission(s) of {assignment} from {submitted}", flush=True)
        outcomes += autograde.autograde(
            root,
            submitted,
            students,
            db_url,
            args.jobs,
            args.cell_timeout,
            assignment,
            submission_timeout=args.submission_timeout,
            skip=[*refused, *(s for s in chosen if s not in students)],
            source=autograde.source_of(release),
        )
        if args.feedback:
            autograde.feedback(root, submitted, db_url, assignment)
        copied += plagiarism.shared_notebooks(  # within an edition: the others' text differs
            {student: submitted / student / assignment for student in students},
            release=release / assignment,
        )
        bases += [autograde.source_of(release) / assignment, release / assignment]
    outcomes.sort(key=lambda outcome: outcome.student)
    for note in passed_over:  # what collect passed over, beside the grade it concerns
        for outcome in outcomes:
            if outcome.student == note.student:
                outcome.flags.setdefault(("", ""), []).append(f"exchange: {note.text}")
    out = (args.out or root / "grades.csv").resolve()
    # a run is the same in every edition, and so is the code of its cells: both are compared
    # across editions
    handed_in = {student: submitted / student / edition for student, edition in chosen.items()}
    passages = out.with_name(out.stem + "-similarity.html")
    copied = (
        plagiarism.shared_outputs(handed_in)
        + copied
        + plagiarism.shared_code(handed_in, bases, report=passages)
    )
    autograde.export(root, db_url, out, outcomes)
    details = out.with_name(out.stem + "-details.csv")
    write_details(outcomes, details)
    shared = out.with_name(out.stem + "-plagiarism.csv")
    plagiarism.write_csv(copied, shared)
    if copied:
        print(
            f"plagiarism: {len(copied)} job output(s), notebook(s) or code shared between "
            f"submissions, in {shared}"
            + (
                f"; the shared code's passages side by side in {passages}"
                if passages.exists()
                else ""
            ),
            file=sys.stderr,
        )
    print("\n" + summary(outcomes))
    notebooks = len(lessons.load(root).notebooks)
    verified = [o.seconds for o in outcomes if o.seconds] or [0.0]  # not the refused ones
    per_student = sum(verified) / len(verified)
    print(
        f"\nverified: {per_student:.1f} s per student ({per_student / max(1, notebooks):.1f} s per "
        "notebook), "
        f"{args.jobs or os.cpu_count()} at a time"
        + ("" if sandbox.enabled() else f"; WITHOUT the sandbox ({sandbox.SWITCH}=off)")
    )
    unlimited = process_limit.unavailable()
    if unlimited:
        print(
            f"processes or memory: NOT limited per submission here ({unlimited}), so a submission "
            "that forks without end, or whose processes together take the machine's memory, slows "
            "or stops the others' grading (each process alone still has its own 8 GiB): grade as "
            "root, or where the pids and memory cgroup controllers are delegated (limits: "
            f"{process_limit.MAX_PROCESSES} processes, "
            f"{process_limit.MAX_MEMORY / 2**30:g} GiB per submission at a time)",
            file=sys.stderr,
        )
    print(
        f"gradebook: {out} (nbgrader export), per test: {details}"
        + (f"; feedback: {root / 'feedback'}" if args.feedback else "")
    )
    failed = [o.student for o in outcomes if not o.graded]
    if failed:
        print(
            f"NOT GRADED: {', '.join(failed)} (left out of {out.name}; the reason is in "
            f"{details.name})",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

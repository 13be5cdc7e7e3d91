"""`python -m course class-report`: one HTML page of what the class measured and where it struggled,
for the debrief and for the instructor (after `python -m course grade`).

    python -m course class-report                     # the kit's course folder
    python -m course class-report --course-dir build/demo/course --anonymise

It shows every student's throughput, speedup and efficiency per stage against the reference figures
of grading.toml, the accuracy and time to accuracy of stage 1 and of stage 3 with and without
warm-up, the runs that do not count and what grading flagged, and per exercise the share of students
who lost points on it with the commonest failure message. --anonymise replaces the names by
pseudonyms that stay the same from one report to the next (for showing the page to the class).
The page is self-contained (figures inline) and written atomically.
"""

from __future__ import annotations

import html
import sys
from datetime import UTC, datetime
from pathlib import Path

from course import paths
from course.cli import command_parser
from course.contracts import stages
from course.fileio import atomic_file
from course.instructor import autograde, class_data, class_plots
from course.instructor.class_data import ClassData, Student

DEFAULT_NAME = "class-report.html"  # in the course folder
STYLE = """body { font-family: sans-serif; margin: 2em; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.5em; text-align: left; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
svg { max-width: 100%; height: auto; }"""


def _number(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}" if value < 10 else f"{value:.1f}"


def _table(head: list[str], rows: list[list[str]], numeric: frozenset[int] = frozenset()) -> str:
    """An HTML table; the cells are text, escaped here."""
    cells = "".join(
        "<tr>"
        + "".join(
            f"<td{' class=n' if i in numeric else ''}>{html.escape(cell)}</td>"
            for i, cell in enumerate(row)
        )
        + "</tr>"
        for row in rows
    )
    header = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    return f"<table><thead><tr>{header}</tr></thead><tbody>{cells}</tbody></table>"


def _stage_cells(student: Student, stage: str) -> list[str]:
    best = student.best(stage)
    if best is None:
        return ["-", "-", "-", "-"]
    return [
        str(best.workers),
        _number(best.images_per_sec, 1),
        _number(best.speedup),
        _number(best.efficiency),
    ]


def students_table(data: ClassData) -> str:
    head = ["student", "score"]
    for stage in stages.NAMES:
        head += [f"{stage} workers", f"{stage} img/s", f"{stage} speedup", f"{stage} efficiency"]
    head += ["flags"]
    rows = []
    for student in data.students:
        score = (
            "not graded"
            if student.score is None
            else f"{student.score:g}/{student.max_score or 0:g}"
        )
        row = [student.name, score]
        for stage in stages.NAMES:
            row += _stage_cells(student, stage)
        rows.append([*row, str(len(student.flags))])
    return _table(head, rows, frozenset(range(2, len(head))))


def accuracy_table(data: ClassData) -> str:
    head = ["student"] + [f"{rule}: final / to target" for rule in class_plots.RULES]
    rows = []
    for student in data.students:
        by_rule = {a.rule: a for a in student.accuracy}
        row = [student.name]
        for rule in class_plots.RULES:
            entry = by_rule.get(rule)
            row.append(
                "-"
                if entry is None
                else f"{_number(entry.final)} / "
                + (f"{entry.seconds:.0f} s" if entry.seconds is not None else "never")
                + (f" ({entry.workers} ranks)" if entry.workers > 1 else "")
            )
        rows.append(row)
    return _table(head, rows)


def exercises_table(data: ClassData) -> str:
    rows = [
        [
            e.notebook,
            e.test,
            f"{e.failed} of {e.students} ({e.failed / e.students:.0%})",
            f"{e.message} ({e.same})" if e.message else "-",
        ]
        for e in sorted(data.exercises, key=lambda e: (-e.failed / e.students, e.notebook, e.test))
    ]
    return _table(["notebook", "test", "lost points", "commonest failure (students)"], rows)


def flags_table(data: ClassData) -> str:
    rows = [[f.student, f.where, f.why] for s in data.students for f in s.flags]
    if not rows:
        return "<p>No run was refused and nothing was flagged.</p>"
    return _table(["student", "run or test", "what"], rows)


def references(data: ClassData) -> str:
    items = "".join(
        f"<li>{html.escape(model)}: "
        + ", ".join(f"{html.escape(stage)} {value:g} img/s" for stage, value in figures.items())
        + "</li>"
        for model, figures in data.rules.references.items()
    )
    return f"<ul>{items}</ul>" if items else "<p>grading.toml names no reference figures.</p>"


def page(data: ClassData, title: str) -> str:
    """The whole report as one HTML document."""
    graded = sum(s.score is not None for s in data.students)
    target = (
        f"the target accuracy is {data.target} (grading.toml)"
        if data.target is not None
        else "grading.toml sets no target for the class's data set"
    )
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>{STYLE}</style></head><body>
<h1>{html.escape(title)}</h1>
<p>{len(data.students)} students, {graded} graded; made {datetime.now(UTC):%Y-%m-%d %H:%M} UTC.
Runs count as the grader counts them: traced to their job logs. Speedup and efficiency are against
each student's own stage-1 run; per stage the table shows the run with the best efficiency.</p>
<h2>Throughput, speedup and efficiency</h2>
{class_plots.svg(class_plots.scaling(data))}
<p>Reference figures (grading.toml, dotted lines):</p>
{references(data)}
{students_table(data)}
<h2>Accuracy and time to accuracy, with and without warm-up</h2>
<p>Stage 1, and stage 3 on the most ranks with each learning-rate rule; {target}.</p>
{class_plots.svg(class_plots.accuracy(data))}
{accuracy_table(data)}
<h2>Exercises: where the class lost points</h2>
<p>From grades-details.csv; written answers still to be graded by hand are left out.</p>
{exercises_table(data)}
<h2>Runs that do not count, and what grading flagged</h2>
{flags_table(data)}
</body></html>
"""


def main(argv: list[str] | None = None) -> int:
    parser = command_parser("course class-report", __doc__)
    parser.add_argument(
        "--course-dir", type=Path, default=None, help="the course folder (default: the kit)"
    )
    parser.add_argument(
        "--submitted",
        type=Path,
        default=None,
        help="the graded submissions (default: <course>/submitted)",
    )
    parser.add_argument(
        "--grades",
        type=Path,
        default=None,
        help="the gradebook of course grade, -details.csv beside it (default: <course>/grades.csv)",
    )
    parser.add_argument(
        "--out", type=Path, default=None, help="the page (default: <course>/class-report.html)"
    )
    parser.add_argument(
        "--anonymise", action="store_true", help="stable pseudonyms instead of the students' names"
    )
    args = parser.parse_args(argv)
    root = (args.course_dir or paths.kit_root()).resolve()
    autograde.check_course_folder(root)
    data = class_data.collect(
        root,
        (args.submitted or root / "submitted").resolve(),
        (args.grades or root / "grades.csv").resolve(),
    )
    if args.anonymise:
        names = class_data.pseudonyms(root, [s.name for s in data.students])
        data = class_data.anonymise(data, names)
    out = (args.out or root / DEFAULT_NAME).resolve()
    with atomic_file(out, "w") as f:
        f.write(page(data, f"{paths.ASSIGNMENT}: the class's runs"))
    print(f"class report ({len(data.students)} students): {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

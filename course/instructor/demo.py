"""`python -m course demo` (make demo): a term of the course on this machine, with nbgrader's own
apps.

1. data: the data set the site profile names (the synthetic set is made when missing);
2. doctor: what works here;
3. the instructor: makes the release from solutions/ with nbgrader and releases it to an exchange
   (`nbgrader release_assignment`);
4. two students, each in their own folder with the students' nbgrader_config.py (what
   `python -m course bundle` hands out) and their own nbgrader cache, as two accounts would be:
   each fetches the assignment (`nbgrader fetch_assignment`), works and submits (`nbgrader submit`).
   One solves every notebook and runs each top to bottom, which submits the real jobs (run here by
   the embedded scheduler, or by qsub where the site profile says so). The other solves only part of
   notebook 01 and runs only that notebook: its trainer is still a stub, so its job cannot be
   submitted (the kit refuses a stub), as a student who stopped there would hand in; it adds a
   submission to grade without adding training time;
5. the instructor: `course grade --exchange` (nbgrader collect, the sandboxed verifier, nbgrader
   autograde, generate_feedback, the CSV export), then `nbgrader release_feedback`;
6. each student fetches their feedback (`nbgrader fetch_feedback`);
7-8. the gradebook, the solved student's scaling figures and where their step time goes, and
   notebook 05's parameter server against the ring, overlap and float16 figures;
9. the class report (`python -m course class-report`), whose path it prints last.

Everything goes to build/demo/ in the kit's folder (the exchange too: build/demo/exchange). On a
machine without GPUs stage 2's job cannot run: its notebook says so at that cell, and its throughput
and the prediction of that run earn no points (the solved student gets every other automatic point).
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from course import i18n, paths
from course.cli import command_parser
from course.cluster import siteenv
from course.contracts import lessons, stages
from course.diagnostics import doctor
from course.errors import GradingError
from course.instructor import (
    class_report,
    demo_settings,
    exchange,
    grade_command,
    i18n_release,
    nbgrader_cells,
    release,
    sandbox,
    verify,
)
from course.instructor.notebook_run import run_notebook
from course.lessons.exchange import exchange_report
from course.lessons.step_time import allreduce_report
from course.notebook import handin, report
from course.runtime import data, data_prepare

NOTEBOOKS = stages.NOTEBOOKS
CLASS_REPORT = class_report.DEFAULT_NAME


@dataclass(frozen=True)
class Student:
    name: str
    notebooks: tuple[
        str, ...
    ]  # the notebooks they work on and run; the others are handed in as fetched
    left: frozenset[str] = frozenset()  # exercises (grade ids) they leave as released


STUDENTS = (
    Student("ada-solved", NOTEBOOKS),
    Student(
        "ben-partial",
        (NOTEBOOKS[0],),
        frozenset({"build_trainer", "add_snapshots", "answer_snapshot_cost"}),
    ),
)


def solve(
    folder: Path,
    solutions_folder: Path,
    notebooks: tuple[str, ...] = NOTEBOOKS,
    left: frozenset[str] = frozenset(),
) -> None:
    """Write the solutions into the exercise cells of `notebooks` in `folder` (but those in `left`),
    as a student would write them."""
    import nbformat
    from nbgrader.preprocessors import ClearSolutions
    from nbgrader.utils import is_solution

    # nbgrader's own delimiters of a solution (ClearSolutions replaces what is between them)
    traits = ClearSolutions.class_traits()
    delimiters = tuple(
        traits[name].default_value
        for name in ("begin_solution_delimeter", "end_solution_delimeter")
    )
    for name in notebooks:
        notebook = nbformat.read(folder / name, as_version=4)
        source = nbformat.read(solutions_folder / name, as_version=4)
        answers = {
            cell.metadata["nbgrader"]["grade_id"]: cell.source
            for cell in source.cells
            if is_solution(cell)
        }
        for cell in notebook.cells:
            grade_id = nbgrader_cells.grade_id(cell)
            if grade_id in answers and grade_id not in left:
                cell.source = "\n".join(
                    line
                    for line in answers[grade_id].splitlines()
                    if not any(delimiter in line for delimiter in delimiters)
                )
        nbformat.write(notebook, folder / name)


def student_copy(release_folder: Path, solutions_folder: Path, destination: Path) -> Path:
    """A copy of the release whose exercise cells hold the solutions, as a student would write
    them."""
    shutil.copytree(release_folder, destination)
    solve(destination, solutions_folder)
    return destination


def course_folder(root: Path, destination: Path, choice: lessons.Choice | None = None) -> Path:
    """A course folder for nbgrader: its configuration, grading.toml, the source solutions/ and
    the choice of lessons (`choice` written out, else root's course.toml where it has one)."""
    destination.mkdir(parents=True)
    for name in ("nbgrader_config.py", "grading.toml"):
        shutil.copy(root / name, destination / name)
    if choice is not None:
        (destination / lessons.FILE).write_text(lessons.file_text(choice), encoding="utf-8")
    elif (root / lessons.FILE).is_file():
        shutil.copy(root / lessons.FILE, destination / lessons.FILE)
    shutil.copytree(root / "solutions", destination / "solutions")
    return destination


def run_all(
    folder: Path,
    notebooks: tuple[str, ...],
    echo: Callable[[str], None] = print,
    env: dict[str, str] | None = None,
) -> None:
    """Run `notebooks` of `folder` one after the other, saying how long each took and where it
    stopped."""
    for name in notebooks:
        started = time.monotonic()
        errors = run_notebook(folder / name, env=env, echo=echo)
        echo(
            f"  {name}: ran in {time.monotonic() - started:.0f} s"
            + ("" if not errors else "; stopped with: " + "; ".join(errors))
        )


def play_student(root: Path, workdir: Path, echo=print, env: dict[str, str] | None = None) -> Path:
    """Release, then a student who solves and runs every notebook; returns the student's folder."""
    released = Path(workdir) / "release"
    release.generate(root, released)
    student = student_copy(
        released / paths.ASSIGNMENT,
        root / "solutions" / paths.ASSIGNMENT,
        Path(workdir) / "student" / paths.ASSIGNMENT,
    )
    run_all(student, NOTEBOOKS, echo, env)
    return student


def as_student(
    app: str, home: Path, ex: Path, *flags: str, assignment: str = paths.ASSIGNMENT
) -> None:
    """`nbgrader APP` on the assignment, from a student's home with their own nbgrader cache (as
    their own account would have one), through the exchange `ex`."""
    exchange.run(app, [assignment, *flags], home, ex, cache=home / ".nbgrader-cache")


def play_term(
    root: Path,
    out: Path,
    students: tuple[Student, ...] = STUDENTS,
    env: dict[str, str] | None = None,
    lang: str = i18n.DEFAULT,
    choice: lessons.Choice | None = None,
) -> tuple[int, dict[str, Path]]:
    """Release, fetch, work, submit, grade and return feedback through the exchange out/exchange
    with nbgrader's apps; (course grade's exit status, each student's assignment folder).

    env: the students' kernels' environment (default: this process's); lang: the edition they
    work in (its own nbgrader assignment); choice: the lessons taught (default: root's
    course.toml), whose notebooks alone are released, worked on and graded."""
    assignment = i18n_release.assignment(lang)
    choice = choice or lessons.load(root)
    course = course_folder(root, out / "course", choice)
    release.generate(root, course / "notebooks", lang, choice)
    ex = out / "exchange"
    exchange.run("release_assignment", [assignment], course, ex)
    settings = exchange.settings(course)
    print(f"released {assignment} to {ex}")
    homes, folders = {}, {}
    print(f"lessons: {', '.join(choice.ids)}")
    for student in students:
        works_on = tuple(name for name in student.notebooks if name in choice.notebooks)
        home = homes[student.name] = out / "students" / student.name
        home.mkdir(parents=True)
        (home / "nbgrader_config.py").write_text(exchange.student_config(settings, ex))
        as_student("fetch_assignment", home, ex, assignment=assignment)
        folder = exchange.assignment_folder(home, settings).with_name(assignment)
        folders[student.name] = folder
        print(
            f"{student.name}: fetched into {folder}; works on {', '.join(works_on)}"
            + (f", leaving {', '.join(sorted(student.left))} as released" if student.left else "")
        )
        solve(folder, root / "solutions" / paths.ASSIGNMENT, works_on, student.left)
        run_all(folder, works_on, env=env)
        as_student("submit", home, ex, f"--student={student.name}", assignment=assignment)
        sent = max((ex / settings.course_id / "inbound").glob(f"{student.name}+{assignment}+*"))
        print(
            f"  submitted: {handin.folder_size(sent) / 1e3:.0f} kB reached the exchange, of "
            f"{handin.folder_size(folder) / 1e6:.1f} MB in the folder (nbgrader refuses a folder "
            f"over {settings.max_dir_size / 1e3:g} MB, ignored files counted)"
        )

    print("\n== 5. The instructor collects and grades the submissions with nbgrader")
    status = grade_command.main(["--course-dir", str(course), "--exchange", str(ex)])
    exchange.run("release_feedback", [assignment], course, ex)

    print("\n== 6. Each student fetches their feedback")
    for student in students:
        home = homes[student.name]
        as_student("fetch_feedback", home, ex, f"--student={student.name}", assignment=assignment)
        fetched = sorted(
            p.relative_to(home) for p in (folders[student.name] / "feedback").rglob("*.html")
        )
        print(
            f"{student.name}: {len(fetched)} feedback file(s), e.g. "
            f"{fetched[0] if fetched else '-'}"
        )
    return status, folders


def main(argv: list[str] | None = None) -> int:
    parser = command_parser("course demo", __doc__)
    parser.add_argument(
        "--out", type=Path, default=None, help="default: build/demo in the kit's folder"
    )
    parser.add_argument(
        "--site-settings",
        action="store_true",
        help="train at the site profile's settings (about 25 min on 2 CPU cores), where the "
        "lessons' numbers show, instead of the demo's quick ones",
    )
    parser.add_argument(
        "--lang",
        choices=i18n.LANGUAGES,
        default=i18n.DEFAULT,
        help="the edition the students work in (the Japanese one: ja); the same answers, the same "
        "gradebook",
    )
    args = parser.parse_args(argv)
    os.environ[i18n.VARIABLE] = args.lang  # the students' kernels and their jobs inherit it
    root = paths.kit_root()
    out = (args.out or root / "build" / "demo").resolve()
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    started = time.monotonic()

    settings = siteenv.of_folder(root)
    if args.site_settings:
        print(f"== 1. Data (site profile {settings.site}: {settings.dataset})")
        name = settings.dataset
        if name == data.SYNTHETIC and not data.path_for(name).exists():
            data_prepare.prepare_synthetic()
    else:
        name = demo_settings.QUICK_DATASET
        print(
            f"== 1. Data (the demo's quick settings: {demo_settings.QUICK_TRAIN_ARGS} on {name}; "
            f"--site-settings for site profile {settings.site}'s)"
        )
        os.environ.update(demo_settings.quick())  # the kernels and their jobs inherit them
    print(data.info(data.resolve(name)).describe())
    print("\n== 2. What works on this machine")
    print(doctor.render(doctor.run_checks()))

    try:
        verify.check_sandbox()
    except (
        GradingError
    ) as e:  # the demo grades its own students: say what a real grading run needs, go on
        print(
            f"\nNote: {e.message}\n  -> {e.hint}\n  The demo grades its own students without the "
            "sandbox."
        )
        os.environ[sandbox.SWITCH] = "off"

    print(
        "\n== 3-4. The release through nbgrader's exchange, and two students who work and submit "
        "(the jobs "
        "run now)"
    )
    status, folders = play_term(root, out, lang=args.lang)

    solved = folders[STUDENTS[0].name]
    print(f"\n== 7. {STUDENTS[0].name}'s runs: throughput, scaling, accuracy and time to accuracy")
    table = report.rows(solved)
    print(report.table_text(table))
    for line in report.notes(table, report.target_of(solved)):
        print(line)
    print(
        f"\n== 8. Where {STUDENTS[0].name}'s step time goes, and the allreduce predicted, then "
        "measured"
    )
    for line in allreduce_report.summary(solved):
        print(line)
    if "exchange" in lessons.load(root).ids:
        print(f"\n== 8b. {STUDENTS[0].name}'s gradient exchange up close (notebook 05)")
        for line in exchange_report.summary(solved):
            print(line)
    print("\n== 9. The class report: every student's runs and where the class lost points")
    class_report.main(["--course-dir", str(out / "course")])
    if not args.site_settings:
        print(
            "\nThese were the demo's quick settings: each run lasts seconds and its accuracy stays "
            "near chance, so none reaches the course's accuracy target. The lessons' accuracy "
            "and time to accuracy: make demo SETTINGS=site (python -m course demo --site-settings)."
        )
    print(
        f"\nDemo finished in {(time.monotonic() - started) / 60:.1f} min. The students' folders: "
        f"{out / 'students'}; the exchange: {out / 'exchange'}; the gradebook: "
        f"{out / 'course' / 'grades.csv'}; the class report: {out / 'course' / CLASS_REPORT}"
    )
    return status

"""The lessons an instructor picks (course.toml, course.contracts.lessons): the registry against the
notebooks, the refused choices, and two terms played from release to class report with nbgrader's
own apps, the core hands-on alone and every lesson."""

from __future__ import annotations

import csv
import json
import re
import shutil
from pathlib import Path

import pytest

from course import i18n, paths
from course.contracts import lessons, stages
from course.errors import CourseError
from course.instructor import (
    allocation,
    bundle,
    class_report,
    demo,
    exchange,
    grade_command,
    lesson_source,
    release,
    sandbox,
    site_checks,
    site_verify,
)
from tests.helpers import ROOT, bubblewrap

A = paths.ASSIGNMENT
SOURCE = ROOT / "solutions" / A
CORE = lessons.choose(["core"])
EVERY = lessons.choose(lessons.DEFAULT)


def points(notebooks: tuple[str, ...]) -> float:
    """The points nbgrader's source gives `notebooks`."""
    return sum(
        cell["metadata"].get("nbgrader", {}).get("points", 0)
        for name in notebooks
        for cell in json.loads((SOURCE / name).read_text())["cells"]
    )


def refusal(tmp_path: Path, text: str) -> CourseError:
    (tmp_path / lessons.FILE).write_text(text)
    with pytest.raises(CourseError) as raised:
        lessons.load(tmp_path)
    return raised.value


def test_every_notebook_is_in_one_lesson_and_the_core_holds_the_stages():
    named = [name for lesson in lessons.LESSONS.values() for name in lesson.notebooks]
    assert (
        sorted(named) == sorted(p.name for p in SOURCE.glob("*.ipynb")) == sorted(stages.NOTEBOOKS)
    ), "each notebook in exactly one lesson (lessons.PARTS)"
    assert {s.notebook for s in stages.STAGES.values()} <= set(lessons.LESSONS["core"].notebooks)
    for lesson in lessons.LESSONS.values():
        assert set(lesson.needs) <= set(lessons.LESSONS) - {lesson.id}
        assert lesson.title and lesson.minutes > 0
    assert CORE.ids == ("core",) and CORE.minutes == 210


def test_course_toml_writes_out_the_default_and_every_lesson_with_its_time_and_needs():
    text = (ROOT / lessons.FILE).read_text()
    assert lessons.load(ROOT) == EVERY
    for lesson in lessons.LESSONS.values():
        [line] = [line for line in text.splitlines() if re.match(rf"#\s+{lesson.id}\s", line)]
        time = f"{lesson.minutes // 60} h" if lesson.minutes % 60 == 0 else f"{lesson.minutes} min"
        assert time in line, line
        said = re.split(r"\n#   \S", text[text.index(line) :])[0]  # with the lines continuing it
        for need in lesson.needs:
            assert f"needs {need}" in said, said
    # a folder without course.toml (a course folder copied before it existed) takes the default
    assert lessons.load(ROOT / "solutions") == EVERY


def test_the_core_is_taught_whether_listed_or_not(tmp_path):
    (tmp_path / lessons.FILE).write_text('lessons = ["accuracy"]\n')
    assert lessons.load(tmp_path).ids == ("core", "accuracy")


def test_a_misspelt_lesson_is_refused_with_the_nearest(tmp_path):
    error = refusal(tmp_path, '# the lessons\nlessons = ["core", "exchnage"]\n')
    assert f"{lessons.FILE}:2: unknown lesson `exchnage`" in error.message
    assert "did you mean `exchange`?" in error.hint and "step_time" in error.hint


def test_a_misspelt_key_is_refused_with_the_nearest(tmp_path):
    error = refusal(tmp_path, 'lesson = ["core"]\n')
    assert f"{lessons.FILE}:1: unknown key `lesson`" in error.message
    assert "did you mean `lessons`?" in error.hint


def test_a_value_of_the_wrong_kind_is_refused(tmp_path):
    error = refusal(tmp_path, 'lessons = "core"\n')
    assert "`lessons` should be a list [...]" in error.message


def test_a_choice_lacking_what_a_lesson_needs_is_refused_naming_it(tmp_path):
    error = refusal(tmp_path, 'lessons = ["core", "exchange"]\n')
    assert "lesson `exchange` needs `step_time`, which the choice lacks" in error.message
    assert '"step_time"' in error.hint
    assert lessons.choose(["exchange", "step_time"]).notebooks == (
        *CORE.notebooks,
        *lessons.LESSONS["step_time"].notebooks,
        *lessons.LESSONS["exchange"].notebooks,
    )


def test_the_readme_lists_only_the_chosen_notebooks_numbered_again():
    text = (SOURCE / "README.md").read_text()
    chosen = (*CORE.notebooks, *lessons.LESSONS["beyond"].notebooks)
    readme = lesson_source.readme_of(text, chosen)
    listed = re.findall(r"^(\d+)\. `(\S+)`", readme, re.M)
    assert listed == [(str(i), name) for i, name in enumerate(chosen, 1)]
    assert "parameter server" not in readme and "jobs/run_model_parallel.sh" in readme
    assert lesson_source.readme_of(text, EVERY.notebooks) == text


def folder_with_choice(tmp_path: Path, choice: lessons.Choice) -> Path:
    """The kit's jobs/ (its applied site) and a course.toml of `choice`, as `course plan` reads."""
    shutil.copytree(ROOT / paths.JOBS_DIR, tmp_path / paths.JOBS_DIR)
    (tmp_path / lessons.FILE).write_text(lessons.file_text(choice))
    return tmp_path


def test_the_plan_counts_only_the_chosen_lessons_jobs(tmp_path):
    every = allocation.budget(folder_with_choice(tmp_path / "every", EVERY), 40)
    core = allocation.budget(folder_with_choice(tmp_path / "core", CORE), 40)
    left = {job.what for job in every.jobs} - {job.what for job in core.jobs}
    deep_dives = ("step profile", "allreduce benchmark", "parameter server", "notebook 08")
    assert left and all(any(job in what for job in deep_dives) for what in left), left
    assert core.node_hours < every.node_hours


def test_site_verify_skips_a_job_no_chosen_lesson_runs():
    settings = site_verify.siteenv.of_folder(ROOT)
    every = {job.key: job for job in site_verify.plan_jobs(settings, "", EVERY.jobs)}
    chosen = frozenset({lessons.STAGE_1, lessons.STAGE_2, lessons.STAGE_3})
    planned = {job.key: job for job in site_verify.plan_jobs(settings, "", chosen)}
    assert not every["benchmark"].skipped and planned["benchmark"].skipped.startswith("skipped")
    outcome = site_checks.Outcome(None, "", 0.0, planned["benchmark"].skipped)
    assert site_checks.allreduce(outcome, [], settings).status == "skipped"


def kit_with_choice(folder: Path, choice: lessons.Choice) -> Path:
    """The kit at `folder`: ROOT's files (linked) but course.toml, which holds `choice`, and the
    release notebooks/, which is not made yet."""
    folder.mkdir()
    for path in ROOT.iterdir():
        if path.name not in (lessons.FILE, "notebooks", ".git", "build", ".venv"):
            (folder / path.name).symlink_to(path)
    (folder / lessons.FILE).write_text(lessons.file_text(choice))
    return folder


@pytest.fixture(scope="module")
def core_kit(tmp_path_factory) -> Path:
    """The kit whose course.toml chooses the core alone, released in both editions as `course
    release` releases."""
    kit = kit_with_choice(tmp_path_factory.mktemp("core") / "kit", CORE)
    for lang in i18n.LANGUAGES:
        release.generate(kit, kit / "notebooks", lang)
    return kit


def listed_in_readme(folder: Path) -> list[str]:
    readme = (folder / "README.md").read_text(encoding="utf-8")
    return re.findall(r"^\d+\. `(\S+)`", readme, re.M)


@pytest.mark.slow
@pytest.mark.parametrize("lang", i18n.LANGUAGES)
def test_each_edition_releases_and_bundles_the_core_alone(core_kit, tmp_path, lang):
    released = core_kit / "notebooks" / i18n.assignment(lang)
    assert tuple(sorted(p.name for p in released.glob("*.ipynb"))) == CORE.notebooks
    assert listed_in_readme(released) == list(CORE.notebooks)
    out = bundle.build(core_kit, tmp_path / "bundle", tmp_path / "exchange", lang)
    folder = exchange.assignment_folder(out, exchange.settings(out)).with_name(released.name)
    assert tuple(sorted(p.name for p in folder.glob("*.ipynb"))) == CORE.notebooks
    assert listed_in_readme(folder) == list(CORE.notebooks)


@pytest.mark.slow
def test_the_japanese_edition_of_every_lesson_is_the_committed_release(tmp_path):
    release.generate(ROOT, tmp_path, "ja", EVERY)
    [folder] = tmp_path.iterdir()
    committed = ROOT / "notebooks" / folder.name
    assert sorted(p.name for p in folder.glob("*.*")) == sorted(
        p.name for p in committed.glob("*.*")
    )
    for path in folder.glob("*.*"):
        assert path.read_bytes() == (committed / path.name).read_bytes(), path.name


def test_a_bundle_of_a_release_the_choice_no_longer_matches_is_refused(tmp_path):
    kit = kit_with_choice(tmp_path / "kit", CORE)
    (kit / "notebooks").symlink_to(ROOT / "notebooks")  # every lesson's, as committed
    with pytest.raises(CourseError) as raised:
        bundle.build(kit, tmp_path / "bundle", tmp_path / "exchange")
    assert "04_step_time.ipynb" in raised.value.message and "make release" in raised.value.hint
    assert not (tmp_path / "bundle").exists()


def play_term(student_run: Path, out: Path, choice: lessons.Choice) -> tuple[int, Path, Path]:
    """A term of `choice` through nbgrader's exchange: release, a student who fetches it and hands
    in the solved run's notebooks of the chosen lessons with its runs and job logs, `course grade
    --exchange`, feedback released and fetched, the class report; (grade's status, the course
    folder, the student's assignment folder)."""
    course = demo.course_folder(ROOT, out / "course", choice)
    release.generate(ROOT, course / "notebooks", choice=choice)
    ex = out / "exchange"
    exchange.run("release_assignment", [A], course, ex)
    settings = exchange.settings(course)
    home = out / "ada"
    home.mkdir()
    (home / "nbgrader_config.py").write_text(exchange.student_config(settings, ex))
    demo.as_student("fetch_assignment", home, ex)
    folder = exchange.assignment_folder(home, settings).with_name(A)
    assert tuple(sorted(p.name for p in folder.glob("*.ipynb"))) == choice.notebooks
    for path in student_run.iterdir():
        if path.suffix == ".ipynb" and path.name not in choice.notebooks:
            continue
        if path.is_dir():
            shutil.copytree(path, folder / path.name, dirs_exist_ok=True)
        else:
            shutil.copy2(path, folder / path.name)
    demo.as_student("submit", home, ex, "--student=ada")
    status = grade_command.main(["--course-dir", str(course), "--exchange", str(ex)])
    exchange.run("release_feedback", [A], course, ex)
    demo.as_student("fetch_feedback", home, ex, "--student=ada")
    assert class_report.main(["--course-dir", str(course)]) == 0
    return status, course, folder


@pytest.fixture(scope="module")
def terms(student_run, tmp_path_factory):
    """Both terms, graded: {choice's first lesson ids: (status, course, the student's folder)}."""
    with pytest.MonkeyPatch.context() as patch:
        if not bubblewrap():
            patch.setenv(sandbox.SWITCH, "off")
        return {
            name: play_term(student_run, tmp_path_factory.mktemp(name), choice)
            for name, choice in (("core", CORE), ("every", EVERY))
        }


def details(course: Path) -> dict[tuple[str, str], str]:
    with open(course / "grades-details.csv") as f:
        return {(r["notebook"], r["test"]): r["score"] for r in csv.DictReader(f) if r["test"]}


@pytest.mark.slow
@pytest.mark.parametrize("name, choice", [("core", CORE), ("every", EVERY)])
def test_a_term_releases_grades_and_reports_only_the_chosen_lessons(terms, name, choice):
    status, course, folder = terms[name]
    assert status == 0
    stems = {Path(n).stem for n in choice.notebooks}
    with open(course / "grades.csv") as f:
        [row] = list(csv.DictReader(f))
    assert float(row["max_score"]) == points(choice.notebooks) > 0
    assert {notebook for notebook, _ in details(course)} == stems
    feedback = {p.stem for p in (folder / "feedback").rglob("*.html")}
    assert feedback == stems
    page = (course / class_report.DEFAULT_NAME).read_text()
    for notebook in EVERY.notebooks:
        assert (Path(notebook).stem in page) == (notebook in choice.notebooks), notebook


@pytest.mark.slow
def test_the_core_is_graded_the_same_whatever_else_is_chosen(terms):
    core, every = details(terms["core"][1]), details(terms["every"][1])
    assert core and core == {key: score for key, score in every.items() if key in core}

"""The student release: made from solutions/ by nbgrader, committed, and free of answers."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess

import pytest

from course import cli, i18n, paths
from course.cluster import siteenv, sites
from course.contracts import jobend, stages
from course.instructor import i18n_catalog, i18n_jobs, i18n_release, release
from tests.helpers import NOTEBOOKS, PYTHON, ROOT
from tests.mpi_helpers import nsys_job_log
from tests.solutions import SOLUTIONS as SOURCE

RELEASED = ROOT / "notebooks" / paths.ASSIGNMENT
JA_RELEASED = ROOT / "notebooks" / i18n_release.assignment("ja")
JA_JOBS = JA_RELEASED / paths.JOBS_DIR
SCRIPTS = [p.name for p in sites.job_scripts(ROOT / paths.JOBS_DIR)]
JAPANESE = re.compile("[\u3040-\u30ff\u4e00-\u9fff]")  # kana and kanji


@pytest.fixture(scope="module")
def regenerated(tmp_path_factory):
    """Each edition as `course release` makes it now: {assignment: its folder}."""
    destination = tmp_path_factory.mktemp("release")
    for lang in i18n.LANGUAGES:
        release.generate(ROOT, destination, lang)
    return {p.name: p for p in destination.iterdir()}


@pytest.mark.integration
def test_committed_release_is_what_nbgrader_makes_from_solutions(regenerated):
    assert sorted(regenerated) == sorted(i18n_release.assignment(lang) for lang in i18n.LANGUAGES)
    for assignment, made_folder in regenerated.items():
        committed_folder = ROOT / "notebooks" / assignment
        made = sorted(
            str(p.relative_to(made_folder)) for p in made_folder.rglob("*") if p.is_file()
        )
        committed = sorted(
            str(p.relative_to(committed_folder)) for p in committed_folder.rglob("*") if p.is_file()
        )
        assert made == committed, assignment
        for name in made:
            assert (made_folder / name).read_bytes() == (committed_folder / name).read_bytes(), (
                f"notebooks/{assignment}/{name} is stale: run  make release"
            )


@pytest.mark.integration
def test_release_holds_the_job_scripts_of_jobs(regenerated):
    for script in (ROOT / "jobs").iterdir():
        assert (RELEASED / "jobs" / script.name).read_bytes() == script.read_bytes()


def skeleton(name: str, script: str) -> str:
    """A job script with each of its prose pieces (a label with the spaces after it) taken out:
    its commands, directives and markers, and where its prose stands."""
    for segment in reversed(i18n_jobs.segments(name, script)):
        piece = segment.piece
        end = piece.start + segment.column if segment.command else piece.end
        script = script[: piece.start] + "<prose>" + script[end:]
    return script


def prose(name: str, script: str) -> list[str]:
    return [segment.piece.text for segment in i18n_jobs.segments(name, script)]


@pytest.mark.parametrize("name", SCRIPTS)
def test_the_japanese_job_scripts_are_the_english_ones_with_their_prose_translated(name):
    english = (ROOT / paths.JOBS_DIR / name).read_text(encoding="utf-8")
    japanese = (JA_JOBS / name).read_text(encoding="utf-8")
    assert skeleton(name, japanese) == skeleton(name, english)  # commands, directives, markers
    assert prose(name, japanese) and all(JAPANESE.search(text) for text in prose(name, japanese))
    for line in japanese.splitlines():  # no English comment left: each has Japanese, or is code
        if "#" in line and not JAPANESE.search(line):
            assert line.startswith(("#!", "#PBS ", "#SBATCH ")) or line in (sites.BEGIN, sites.END)
    assert (JA_JOBS / name).stat().st_mode == (ROOT / paths.JOBS_DIR / name).stat().st_mode


def test_the_committed_japanese_job_scripts_are_what_the_catalog_makes(tmp_path):
    i18n_release.build(ROOT, "ja", tmp_path / "solutions", jobs=tmp_path / "jobs")
    made = sorted(p.name for p in (tmp_path / "jobs").iterdir())
    assert made == sorted(p.name for p in JA_JOBS.iterdir()) == sorted([*SCRIPTS, siteenv.FILE])
    for name in made:
        assert (tmp_path / "jobs" / name).read_bytes() == (JA_JOBS / name).read_bytes(), (
            f"{JA_JOBS.relative_to(ROOT)}/{name} is stale: run  make release"
        )


@pytest.mark.parametrize("name", SCRIPTS)
def test_a_japanese_job_script_is_valid_bash_and_stops_in_japanese_outside_its_folder(
    name, tmp_path
):
    script = (JA_JOBS / name).read_text(encoding="utf-8")
    said = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True)
    assert said.returncode == 0, said.stderr
    # Run from a folder without jobs/ (a C locale: bash passes the bytes through), it stops at once.
    env = {"PATH": os.environ["PATH"], "LC_ALL": "C"}
    run = subprocess.run(
        ["bash", "-s"], input=script.encode(), cwd=tmp_path, capture_output=True, env=env
    )
    assert run.returncode == 2
    assert run.stdout.decode() == "ノートブックと jobs/ があるフォルダから投入してください\n"


@pytest.mark.parametrize("profile", ["reedbush-h", "slurm"])
def test_site_apply_in_a_japanese_folder_rewrites_only_the_directives(profile, tmp_path):
    jobs = tmp_path / paths.JOBS_DIR
    shutil.copytree(JA_JOBS, jobs)
    site = sites.load_profile(profile)
    sites.apply(site, jobs)
    assert sites.check(site, jobs) == []
    for name in SCRIPTS:
        before = (JA_JOBS / name).read_text(encoding="utf-8")
        after = (jobs / name).read_text(encoding="utf-8")
        block = site.directive_block(name.removesuffix(".sh"))
        assert after != before and after == sites.rewrite_directives(before, block, name)
        assert prose(name, after) == prose(name, before)


def test_course_site_apply_applies_to_the_japanese_release_in_place(tmp_path, monkeypatch):
    shutil.copytree(ROOT / paths.JOBS_DIR, tmp_path / paths.JOBS_DIR)
    for folder in (RELEASED / paths.JOBS_DIR, JA_JOBS):
        shutil.copytree(folder, tmp_path / folder.relative_to(ROOT))
    monkeypatch.setattr(sites.paths, "kit_root", lambda: tmp_path)
    profile = str(ROOT / "sites" / "slurm.toml")
    assert cli.main(["site", "apply", profile]) == 0
    japanese = tmp_path / JA_JOBS.relative_to(ROOT)
    assert sites.check(sites.load_profile(profile), japanese) == []
    for name in SCRIPTS:
        applied = (tmp_path / paths.JOBS_DIR / name).read_text(encoding="utf-8")
        text = (japanese / name).read_text(encoding="utf-8")
        assert skeleton(name, text) == skeleton(name, applied)
        assert prose(name, text) == prose(name, (JA_JOBS / name).read_text(encoding="utf-8"))
    # the edition's site_env.sh: the kit's settings, its comments in Japanese, and COURSE_LANG=ja
    site_env = (japanese / siteenv.FILE).read_text(encoding="utf-8")
    english = (tmp_path / paths.JOBS_DIR / siteenv.FILE).read_text(encoding="utf-8")
    assert siteenv.SiteSettings.from_shell(site_env) == dataclasses.replace(
        siteenv.SiteSettings.from_shell(english), language="ja"
    )
    assert 'export COURSE_LANG="${COURSE_LANG:-ja}"' in site_env
    comments = [line for line in site_env.splitlines() if line.startswith("# ")]
    assert comments and all(JAPANESE.search(line) for line in comments), comments


# What `course site apply`, `course submit` and a notebook's resource request do with a student's
# job scripts, under a locale whose encoding is ASCII (Python's UTF-8 mode off).
ASCII_LOCALE_RUN = """
from pathlib import Path
from course.cluster import siteenv, sites, submit, usage
from course.lessons.run_part import directives
site = sites.load_profile("reedbush-h")
sites.apply(site, Path("jobs"))
assert sites.check(site, Path("jobs")) == []
script, settings = Path("jobs/run_multi_node_training.sh"), siteenv.of_folder(".")
usage.job_usage(script, [], settings)
submit.check_walltime(script, [], settings)
directives.write(["#PBS -l select=2:mpiprocs=2:ompthreads=1", "#PBS -l walltime=01:00:00"])
"""


def test_japanese_job_scripts_are_read_and_written_as_utf8_whatever_the_locale(tmp_path):
    shutil.copytree(JA_JOBS, tmp_path / paths.JOBS_DIR)
    env = {k: v for k, v in os.environ.items() if k not in ("LANG", "LANGUAGE", i18n.VARIABLE)}
    env.update(LC_ALL="C", PYTHONCOERCECLOCALE="0", PYTHONUTF8="0", PYTHONPATH=str(ROOT))
    run = subprocess.run(
        [PYTHON, "-X", "utf8=0", "-c", ASCII_LOCALE_RUN],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr
    written = (tmp_path / stages.MULTI_NODE.job_path).read_text(encoding="utf-8")
    assert "#PBS -l walltime=01:00:00" in written and "コミュニケータ" in written


@pytest.mark.integration
@pytest.mark.skipif(shutil.which("nsys") is not None, reason="nsys is here: the job would run")
def test_a_japanese_job_runs_under_the_local_scheduler_and_logs_its_message(tmp_path):
    shutil.copytree(JA_JOBS, tmp_path / paths.JOBS_DIR)
    (tmp_path / "train_cifar_multi_node.py").write_text("# not run: the job stops before it\n")
    log = nsys_job_log(tmp_path)
    assert "PROFILE=nsys: このノードの PATH に nsys（Nsight Systems）がありません" in log, log
    assert jobend.end(log).status == 2


def solution_lines(notebook: dict) -> list[str]:
    lines = []
    for cell in notebook["cells"]:
        inside = False
        for line in "".join(cell["source"]).splitlines():
            if "BEGIN SOLUTION" in line or "BEGIN HIDDEN TESTS" in line:
                inside = True
            elif "END SOLUTION" in line or "END HIDDEN TESTS" in line:
                inside = False
            elif inside and len(line.strip()) > 12:
                lines.append(line.strip())
    return lines


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_no_solution_or_hidden_test_is_released(name):
    source = json.loads((SOURCE / name).read_text())
    released_text = "\n".join(
        "".join(c["source"]) for c in json.loads((RELEASED / name).read_text())["cells"]
    )
    instructions = "\n".join(
        "".join(c["source"]) for c in source["cells"] if c["cell_type"] == "markdown"
    )
    secrets = [line for line in solution_lines(source) if line not in instructions]
    assert secrets, "the source should have solutions and hidden tests"
    for line in secrets:
        assert line not in released_text, f"released {name} shows: {line}"
    assert not re.search(
        r"BEGIN (SOLUTION|HIDDEN TESTS)|END (SOLUTION|HIDDEN TESTS)", released_text
    )


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_every_exercise_is_a_stub_in_the_release(name):
    cells = json.loads((RELEASED / name).read_text())["cells"]
    exercises = [c for c in cells if c["metadata"]["nbgrader"].get("solution")]
    assert exercises
    for cell in exercises:
        text = "".join(cell["source"])
        if cell["cell_type"] == "markdown":  # a written answer, graded by hand
            assert text == "YOUR ANSWER HERE"
        else:
            assert "# PUT YOUR CODE HERE\n" in text and "raise NotImplementedError()" in text
    # the Japanese edition's written answers hold its own stub (nbgrader's text_stub, translated)
    catalog = i18n_catalog.read(i18n.catalog_path("ja", i18n_catalog.NOTEBOOK_DOMAIN))
    stub = i18n_release.text_stub(catalog, [])
    assert JAPANESE.search(stub)
    japanese = json.loads((JA_RELEASED / name).read_text(encoding="utf-8"))["cells"]
    answers = [c for c in japanese if c["metadata"]["nbgrader"].get("solution")]
    assert [c["cell_type"] for c in answers] == [c["cell_type"] for c in exercises]
    for cell in (c for c in answers if c["cell_type"] == "markdown"):
        assert "".join(cell["source"]) == stub


def test_release_refuses_a_source_folder_with_job_outputs(tmp_path):
    (tmp_path / "solutions" / paths.ASSIGNMENT / "runs").mkdir(parents=True)
    with pytest.raises(Exception, match="holds job outputs"):
        release.generate(tmp_path, tmp_path / "out")

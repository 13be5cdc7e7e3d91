"""The student release: made from solutions/ by nbgrader, committed, and free of answers."""

from __future__ import annotations

import json
import re

import pytest

from course import i18n, paths
from course.instructor import i18n_release, release
from tests.helpers import NOTEBOOKS, ROOT
from tests.solutions import SOLUTIONS as SOURCE

RELEASED = ROOT / "notebooks" / paths.ASSIGNMENT


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


def test_release_refuses_a_source_folder_with_job_outputs(tmp_path):
    (tmp_path / "solutions" / paths.ASSIGNMENT / "runs").mkdir(parents=True)
    with pytest.raises(Exception, match="holds job outputs"):
        release.generate(tmp_path, tmp_path / "out")

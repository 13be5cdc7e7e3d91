"""Hidden stays hidden: a test's child holds its own test's hidden part and no other's, so a
student's function that searches its process for another test's hidden inputs finds nothing
(course.instructor.verify_protocol.ASK). The real verifier, in its sandbox where it can start."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from course.instructor import sandbox, verify
from course.instructor.verify_protocol import Plan
from course.instructor.verify_protocol import TestCell as Cell  # not a test class
from tests.helpers import bubblewrap

pytestmark = pytest.mark.integration

# Every string the process's containers hold (each test's cells, as the verifier keeps them).
STUDENT = """
def hunt(needle):
    import gc
    found = 0
    for thing in gc.get_objects():
        if isinstance(thing, dict):
            values = thing.values()
        elif isinstance(thing, (list, tuple)):
            values = thing
        else:
            values = vars(thing).values() if hasattr(thing, "__dict__") else ()
        found += sum(1 for value in values if isinstance(value, str) and needle in value)
    return found
"""
# The markers are only ever whole in the hidden parts: the code joins them as it runs (Python would
# fold 'a' + 'b' into one constant of the compiled cell).
TESTS = [
    Cell("check_a", "print('a runs')", "secret = 'HIDDEN-A-7f3e'", 1),
    Cell(
        "check_b",
        "print('other test:', hunt(''.join(['HIDDEN-A-', '7f3e'])))",
        "secret = 'HIDDEN-B-91c2'\nprint('own test:', hunt(''.join(['HIDDEN-B-', '91c2'])))",
        1,
    ),
]


@pytest.mark.parametrize("sandboxed", [True, False], ids=["sandbox", "unsandboxed"])
def test_a_test_finds_its_own_hidden_part_and_no_other(tmp_path: Path, monkeypatch, sandboxed):
    if sandboxed and not bubblewrap():
        pytest.skip("the grading sandbox (bubblewrap) cannot start here")
    monkeypatch.setenv(sandbox.SWITCH, "on" if sandboxed else "off")
    cell = nbformat.v4.new_code_cell(STUDENT)
    cell.metadata["nbgrader"] = {"solution": True, "grade": False, "grade_id": "code"}
    folder = tmp_path / "student"
    folder.mkdir()
    nbformat.write(nbformat.v4.new_notebook(cells=[cell]), folder / "hunt.ipynb")
    (tmp_path / "grading.toml").write_text("")
    [verdict] = verify.verify(
        folder,
        [Plan("hunt.ipynb", "", ["code"], TESTS)],
        hidden=[tmp_path / "hidden"],
        grading_config=tmp_path / "grading.toml",
        timeout=60,
    )
    [printed] = verdict.outputs["check_b"]
    other, own = printed["text"].splitlines()
    assert other == "other test: 0", printed["text"]
    assert own.startswith("own test: ") and int(own.split()[-1]) >= 1, "the hunt cannot see"


def test_the_worker_asks_for_each_hidden_part_by_notebook_and_test():
    assert verify._asked('["hidden part of", "01_single_gpu.ipynb", "check_iterators"]\n') == (
        "01_single_gpu.ipynb",
        "check_iterators",
    )
    assert verify._asked("hidden part of 01_single_gpu.ipynb\n") is None  # a printed line

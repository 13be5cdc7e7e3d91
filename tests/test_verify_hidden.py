"""Hidden stays hidden: a student's function runs in a child that holds no hidden part, only the
inputs it is given, so a function that searches its process for another test's hidden inputs
finds nothing (course.instructor.verify_protocol.ASK, course.instructor.verify_test). The real
verifier, in its sandbox where it can start."""

from __future__ import annotations

from pathlib import Path

import pytest

from course.instructor import sandbox, verify
from course.instructor.verify_protocol import TestCell as Cell  # not a test class
from tests.helpers import bubblewrap
from tests.verify_helpers import verified

pytestmark = pytest.mark.integration

# Every string the process's containers hold (each test's cells, as the verifier keeps them).
STUDENT = """
def hunt(parts):
    import gc
    needle = ''.join(parts)
    found = 0
    for thing in gc.get_objects():
        if isinstance(thing, dict):
            values = thing.values()
        elif isinstance(thing, (list, tuple)):
            values = thing
        else:
            try:  # some objects refuse to be looked into (a pydantic model's own class)
                values = vars(thing).values() if hasattr(thing, "__dict__") else ()
            except Exception:
                continue
        found += sum(1 for value in values if isinstance(value, str) and needle in value)
    return found
"""
# The markers are only ever whole in the hidden parts: the student's function joins them as it runs
# (Python would fold 'a' + 'b' into one constant of the compiled cell).
# The test cells call the function as the checks do: through an observer, in the child.
TESTS = [
    Cell("check_a", "print('a runs')", "secret = 'HIDDEN-A-7f3e'", 1),
    Cell(
        "check_b",
        "print('other test:', observe(returned, hunt, args=[['HIDDEN-A-', '7f3e']]))",
        "secret = 'HIDDEN-B-91c2'\n"
        "print('own test:', observe(returned, hunt, args=[['HIDDEN-B-', '91c2']]))\n"
        "print('its input:', observe(returned, hunt, args=[['INPUT-C-5d0a']]))",
        1,
    ),
]


@pytest.mark.parametrize("sandboxed", [True, False], ids=["sandbox", "unsandboxed"])
def test_a_students_function_finds_its_inputs_and_no_hidden_part(
    tmp_path: Path, monkeypatch, sandboxed
):
    if sandboxed and not bubblewrap():
        pytest.skip("the grading sandbox (bubblewrap) cannot start here")
    monkeypatch.setenv(sandbox.SWITCH, "on" if sandboxed else "off")
    verdict = verified(tmp_path, STUDENT, TESTS)
    [printed] = verdict.outputs["check_b"]
    other, own, given = printed["text"].splitlines()
    assert other == "other test: 0", printed["text"]
    assert own == "own test: 0", printed["text"]  # its own hidden part stays in the judge's process
    assert given.startswith("its input: ") and int(given.split()[-1]) >= 1, "the hunt cannot see"


def test_the_worker_asks_for_each_hidden_part_by_notebook_and_test():
    assert verify._asked('["hidden part of", "01_single_gpu.ipynb", "check_iterators"]\n') == (
        "01_single_gpu.ipynb",
        "check_iterators",
    )
    assert verify._asked("hidden part of 01_single_gpu.ipynb\n") is None  # a printed line

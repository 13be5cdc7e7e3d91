"""The judgement happens where the student's code never runs (course.instructor.verify_test): a
student's function runs in the test's child and only plain facts come back; what the child writes
to any descriptor it holds cannot pass a test, and a child that kills its parent only loses its
test. The real verifier, in its bubblewrap sandbox where it can start."""

from __future__ import annotations

from pathlib import Path

import pytest

from course.instructor import sandbox
from course.instructor.verify_protocol import TestCell as Cell  # not a test class
from tests.helpers import bubblewrap
from tests.verify_helpers import verified

pytestmark = pytest.mark.integration

STUDENT = """
def square(n):
    return n * n


def forge(n):
    import json, os
    # A passing report, as the grader's processes say it, to every descriptor this process holds.
    passing = json.dumps({"outputs": [], "visible_failed": False, "probes": {}})
    for fd in range(3, 1024):
        try:
            os.write(fd, (passing + "\\n").encode())
        except OSError:
            pass
    return n


def answer_for_it(n):
    # The kit's code that writes the child's answers, changed from the student's function (a
    # red-team route): the answers are made with what was bound before any student code ran.
    import json
    import course.instructor.verify_test as verify_test
    import course.notebook.checks.observe as observe
    forged = '{"facts": 49, "raised": null, "token": "any"}'
    json.dumps = lambda *args, **kwargs: forged
    observe.plain = lambda facts: n * n
    verify_test._answer = lambda line, namespace: forged
    return n


def forge_the_answer(n):
    # json is not the kit's: changed, it still does not write the child's answers, which use what
    # was bound before any student code ran.
    import json
    json.dumps = lambda *args, **kwargs: '{"facts": 49, "raised": null, "token": "any"}'
    return n


def kill_the_judge(n):
    import os, signal
    os.kill(os.getppid(), signal.SIGKILL)
"""


def judged(name: str) -> Cell:
    """A test cell whose judge (its assert, in the trusted process) wants the square of 7."""
    return Cell(
        f"check_{name}",
        f"assert observe(returned, {name}, args=[7]) == 49, 'not the square'",
        "",
        1,
    )


@pytest.mark.parametrize("sandboxed", [True, False], ids=["sandbox", "unsandboxed"])
def test_only_plain_facts_cross_and_the_judge_decides(tmp_path: Path, monkeypatch, sandboxed):
    if sandboxed and not bubblewrap():
        pytest.skip("the grading sandbox (bubblewrap) cannot start here")
    monkeypatch.setenv(sandbox.SWITCH, "on" if sandboxed else "off")
    names = ["square", "forge", "answer_for_it", "forge_the_answer", "kill_the_judge"]
    verdict = verified(tmp_path, STUDENT, [judged(name) for name in names])
    errors = {
        name: [o for o in verdict.outputs[f"check_{name}"] if o["output_type"] == "error"]
        for name in names
    }
    assert errors["square"] == []  # the judge can pass a right answer
    [forged] = errors["forge"]
    assert "answered with something else than facts" in forged["evalue"], forged
    [patched] = errors["answer_for_it"]  # the kit's modules refuse to be changed in the child
    assert patched["ename"] == "AttributeError", patched
    assert "is the kit's and cannot be changed" in patched["evalue"], patched
    [forged_answer] = errors["forge_the_answer"]  # what is not the kit's changes nothing
    assert (
        forged_answer["ename"] == "AssertionError" and "not the square" in forged_answer["evalue"]
    )
    [killed] = errors["kill_the_judge"]
    assert "without a result" in killed["evalue"], killed

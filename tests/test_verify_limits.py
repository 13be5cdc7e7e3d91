"""What one test may take when it is graded (course.instructor.verify_worker): memory, printed
output, and processes that outlive it. The real verifier, in its bubblewrap sandbox where it can
start."""

from __future__ import annotations

import os

import pytest

from course.instructor import process_limit, sandbox, verify_test, verify_worker
from course.instructor.verify_protocol import TestCell as Cell  # not a test class
from tests.helpers import bubblewrap
from tests.verify_helpers import verified

pytestmark = pytest.mark.integration

STUDENT = """
def hoard():
    return bytearray(12 * 2**30)


def chatter():
    print("x" * 3 * 2**20)


def leave_behind(path):
    import os, time
    if os.fork() == 0:  # outlives its test, then writes where the next test looks
        time.sleep(2)
        open(path, "w").close()
        os._exit(0)


def look(path):
    import os, time
    time.sleep(4)
    print("left behind:", os.path.exists(path))
"""
# The test cells call the functions as the checks do: through an observer, in the test's child.
TESTS = [
    Cell("check_memory", "observe(returned, hoard, args=[])", "", 1),
    Cell("check_output", "observe(returned, chatter, args=[])", "", 1),
    Cell("check_fork", "observe(returned, leave_behind, args=['/tmp/stray'])", "", 1),
    Cell("check_after", "observe(returned, look, args=['/tmp/stray'])", "", 1),
]


@pytest.fixture(scope="module")
def outputs(tmp_path_factory) -> dict[str, list[dict]]:
    if not bubblewrap():
        pytest.skip("the grading sandbox (bubblewrap) cannot start here")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(sandbox.SWITCH, "on")
        return verified(tmp_path_factory.mktemp("limits"), STUDENT, TESTS).outputs


def test_a_test_that_takes_too_much_memory_is_told_the_limit(outputs):
    [error] = outputs["check_memory"]
    limit = verify_test.MEMORY_LIMIT / 2**30
    assert error["ename"] == "MemoryError"
    assert error["evalue"] == f"this test used more than the {limit:g} GiB of memory a test may use"


def test_what_a_test_prints_is_kept_up_to_the_limit_and_the_cut_is_said(outputs):
    [stream] = outputs["check_output"]
    text = stream["text"]
    assert text.startswith("x" * 1000)
    assert len(text.encode()) < verify_worker.OUTPUT_LIMIT + 200
    assert text.endswith("[the grader kept the first 1024 KiB of what this test printed]\n")


def test_a_process_a_test_leaves_behind_is_ended_before_the_next_test(outputs):
    assert outputs["check_fork"] == []
    [stream] = outputs["check_after"]
    assert stream["text"] == "left behind: False\n"


BOMB = """
def bomb():
    import os, time
    started = 0
    while True:
        try:
            child = os.fork()
        except OSError:
            break
        if child == 0:
            time.sleep(600)
            os._exit(0)
        started += 1
    print("started", started)


def fine():
    import os
    child = os.fork()
    if child == 0:
        os._exit(0)
    os.waitpid(child, 0)
    print("a test after the bomb forks as usual")
"""


def test_a_fork_bomb_meets_the_submissions_process_limit_and_the_next_test_runs(tmp_path):
    """The limit is a cgroup per submission: the bomb's test fails saying so, the next test of the
    same submission starts its processes, and nothing of the submission is left running."""
    unlimited = process_limit.unavailable()
    if unlimited:
        pytest.skip(f"no process limit here ({unlimited}): no fork bomb is let loose")
    tests = [
        Cell("check_bomb", "observe(returned, bomb, args=[])", "", 1),
        Cell("check_fine", "observe(returned, fine, args=[])", "", 1),
    ]
    # this process's groups only: other gradings on the machine make and remove their own
    ours = f"course-verify-{os.getpid()}-*"
    groups_before = set(process_limit._own_group().glob(ours))
    verdict = verified(tmp_path, BOMB, tests)
    limit = process_limit.MAX_PROCESSES
    printed, error = verdict.outputs["check_bomb"][0]["text"], verdict.outputs["check_bomb"][-1]
    assert 0 < int(printed.split()[-1]) < limit, printed
    assert error["ename"] == "ProcessLimit"
    assert f"more than the {limit} processes" in error["evalue"]
    assert verdict.flags["check_bomb"] == [f"met the limit of {limit} processes"]
    [fine] = verdict.outputs["check_fine"]
    assert fine["output_type"] == "stream"
    assert fine["text"] == "a test after the bomb forks as usual\n"
    assert set(process_limit._own_group().glob(ours)) == groups_before

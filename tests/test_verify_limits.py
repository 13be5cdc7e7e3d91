"""What one test may take when it is graded (course.instructor.verify_worker): memory, printed
output, and processes that outlive it. The real verifier, in its bubblewrap sandbox where it can
start."""

from __future__ import annotations

import os
import time

import pytest

from course.instructor import process_limit, sandbox, verify_test, verify_worker
from course.instructor.verify_protocol import TestCell as Cell  # not a test class
from course.instructor.verify_protocol import VerificationError
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
    groups_before = set(process_limit._own_group("pids").glob(ours))
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
    assert set(process_limit._own_group("pids").glob(ours)) == groups_before
    assert set(process_limit._own_group("memory").glob(ours)) == set()


TOGETHER = """
def hoard_together():
    import os, time
    child = os.fork()  # each process alone is far below the 8 GiB a process may have
    held = b"x" * (600 * 2**20)
    time.sleep(3)
    if child == 0:
        os._exit(0)
    os.waitpid(child, 0)
    print("held", len(held))
"""


def test_a_tests_processes_together_meet_the_submissions_memory_limit(tmp_path):
    """Two forked processes of one test, each 600 MB, against a group of 1 GiB (the real one is 8
    GiB, too much to take on a shared test machine): one of them is ended, the test fails saying
    so, and the next test of the submission runs."""
    unlimited = process_limit.unavailable()
    if "memory" in unlimited:
        pytest.skip(f"no memory limit here ({unlimited})")
    tests = [
        Cell("check_together", "observe(returned, hoard_together, args=[])", "", 1),
        Cell("check_fine", "observe(returned, fine, args=[])", "", 1),
    ]
    verdict = verified(tmp_path, TOGETHER + BOMB, tests, memory_limit=2**30)
    error = verdict.outputs["check_together"][-1]
    assert error["ename"] == "MemoryLimit", verdict.outputs["check_together"]
    assert "more than the 1 GiB of memory a submission may hold at once" in error["evalue"]
    assert verdict.flags["check_together"] == [
        "met the memory limit of 1 GiB (its processes together)"
    ]
    [fine] = verdict.outputs["check_fine"]
    assert fine["text"] == "a test after the bomb forks as usual\n"


SLOW = """
def crawl():
    import time
    time.sleep(3)
"""


def test_a_submission_whose_tests_all_run_near_their_limit_stops_at_its_budget(tmp_path):
    """Every test 3 s of its 60 s limit, 8 tests: past the submission's 10 s budget the submission
    is not graded, and that is said (in course grade: NOT GRADED, with this reason)."""
    tests = [Cell(f"check_{n}", "observe(returned, crawl, args=[])", "", 1) for n in range(8)]
    started = time.monotonic()
    with pytest.raises(VerificationError) as raised:
        verified(tmp_path, SLOW, tests, submission_timeout=10)
    assert time.monotonic() - started < 20
    assert raised.value.message == "the grader's process for this submission ran past 10 s"


def test_where_memory_cannot_be_limited_processes_still_are_and_why_is_said(monkeypatch):
    """A machine that delegates the pids controller but not the memory one (a container, a
    user's systemd slice): the pids group stands alone, the worker is told of no memory group, and
    the reason is what `course grade` prints."""
    real = process_limit._own_group
    if "pids" in process_limit.unavailable():
        pytest.skip("no pids cgroup here either")

    def own_group(controller: str):
        if controller == "memory":
            raise OSError("no memory cgroup controller is delegated to this process")
        return real(controller)

    monkeypatch.setattr(process_limit, "_own_group", own_group)
    group, why = process_limit.start()
    assert group is not None
    try:
        assert set(group.folders) == {"pids"}
        assert set(group.environment()) == {process_limit.EVENTS}
        assert why == "no memory cgroup controller is delegated to this process"
    finally:
        group.close()
    assert process_limit.unavailable() == why

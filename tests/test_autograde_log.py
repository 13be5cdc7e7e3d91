"""Which submissions nbgrader could not grade, read from its autograde log
(course.instructor.autograde).

tests/data/nbgrader-autograde.log is what `nbgrader autograde` 0.9.6 printed (its stderr) for a
two-notebook assignment with four students, course paths shortened to /home/grader/course:

- alice: graded;
- judy: 01_single_gpu graded, 03_multi_node.ipynb broken JSON (a JSONDecodeError, then
NotJSONError);
- kim: the kernel died while running 01_single_gpu.ipynb (os._exit in a cell: DeadKernelError);
- lee: handed in only 01_single_gpu-Copy1.ipynb, which nbgrader skips, so it found no notebook at
all.
"""

from __future__ import annotations

from pathlib import Path

from course.instructor.autograde import _failures

LOG = (Path(__file__).parent / "data" / "nbgrader-autograde.log").read_text()
STUDENTS = ["alice", "judy", "kim", "lee"]


def test_the_log_is_nbgrader_s_own():
    assert (
        "[AutogradeApp | ERROR] There was an error processing assignment: "
        "/home/grader/course/submitted/judy/distributed_training" in LOG
    )
    assert "json.decoder.JSONDecodeError: Expecting value" in LOG
    assert (
        "[AutogradeApp | ERROR] There was an error processing assignment 'distributed_training' "
        "for student 'kim'" in LOG
    )


def test_only_the_failed_submissions_are_named():
    assert sorted(_failures(LOG, STUDENTS)) == ["judy", "kim", "lee"]


def test_a_broken_notebook_is_named_with_its_error():
    assert _failures(LOG, STUDENTS)["judy"] == (
        "03_multi_node.ipynb: nbformat.reader.NotJSONError: "
        "Notebook does not appear to be JSON: '{\"cells\": ['"
    )


def test_a_dead_kernel_is_named_with_its_notebook():
    assert (
        _failures(LOG, STUDENTS)["kim"]
        == "01_single_gpu.ipynb: nbclient.exceptions.DeadKernelError: Kernel died"
    )


def test_a_submission_that_failed_before_any_notebook_names_none():
    assert _failures(LOG, STUDENTS)["lee"] == (
        "nbgrader.converters.base.NbGraderException: No notebooks found, "
        "did you forget to run 'nbgrader generate_assignment'?"
    )


def test_a_student_named_only_in_the_summary_is_not_graded_either():
    # nbgrader's UnresponsiveKernelError branch logs this one line instead of the error and its
    # traceback.
    kim = "/home/grader/course/submitted/kim/distributed_training"
    start = LOG.index(f"[AutogradeApp | ERROR] There was an error processing assignment: {kim}")
    end = LOG.index(
        "[AutogradeApp | WARNING] Removing failed assignment: /home/grader/course/autograded/kim"
    )
    unresponsive = (
        LOG[:start]
        + f"[AutogradeApp | ERROR] While processing assignment {kim}, the kernel became "
        "unresponsive and we could not interrupt it. This probably means that the students' code "
        "has an "
        "infinite loop that consumes a lot of memory or something similar.\n" + LOG[end:]
    )
    failures = _failures(unresponsive, STUDENTS)
    assert failures["kim"] == "nbgrader could not process it (see its log)"
    assert sorted(failures) == ["judy", "kim", "lee"]


def test_a_clean_log_names_nobody():
    graded = LOG[: LOG.index("Creating/updating student with ID 'judy'")]
    assert "Converting notebook" in graded and _failures(graded, STUDENTS) == {}

"""The class report's arithmetic and pseudonyms on hand-made gradebook rows (the page end to end
on a graded class: tests/test_grading.py and tests/test_demo.py)."""

from __future__ import annotations

from course import cli
from course.contracts import grading_rules
from course.instructor import class_data, demo
from course.instructor.class_data import ClassData, Flag, Student
from course.instructor.grade_report import BY_HAND
from tests.helpers import ROOT


def row(student, test, score, message="", notebook="03_multi_node", max_score=2.0, flags=""):
    return {
        "student": student,
        "notebook": notebook,
        "test": test,
        "score": "" if score is None else str(score),
        "max_score": str(max_score),
        "message": message,
        "flags": flags,
    }


def test_each_exercise_has_its_share_of_failures_and_commonest_message():
    details = [
        row("ann", "check_efficiency", 0.0, "CheckFailed: efficiency 0.412, below 0.5; -> look"),
        row("bo", "check_efficiency", 1.0, "CheckFailed: efficiency 0.633, below 0.7; -> look"),
        row("cy", "check_efficiency", 0.0, "CheckFailed: no traced stage-1 run; -> hand it in"),
        row("di", "check_efficiency", 2.0),
        row("ann", "answer_scaling", 0.0, BY_HAND),  # to be graded by hand: not a failure
        row("bo", "", None, "NOT GRADED: 01_single_gpu.ipynb is not valid JSON", notebook=""),
        # notebook 03 not handed in, by more students than failed: neither a student nor a failure
        *[row(s, "check_efficiency", 0.0, "03_multi_node.ipynb was not handed in") for s in "efg"],
    ]
    [exercise] = class_data.exercises(details)
    assert (exercise.test, exercise.students, exercise.failed) == ("check_efficiency", 4, 3)
    assert (exercise.message, exercise.same) == ("CheckFailed: efficiency #, below #", 2)


def test_names_become_stable_pseudonyms_everywhere(tmp_path):
    rules = grading_rules.GradingRules({})
    data = ClassData(
        [
            Student("al", 3.0, 5.0, flags=[Flag("al", "submission", "links to /home/al/x")]),
            Student("alex", None, None, flags=[Flag("alex", "run", "copied from al's folder")]),
        ],
        [class_data.Exercise("01", "check", 2, 1, "overwritten by alex, alpha", 1)],
        None,
        rules,
    )
    names = class_data.pseudonyms(tmp_path, ["al", "alex"])
    assert names == class_data.pseudonyms(tmp_path, ["alex", "al"])  # the same the next time
    assert len(set(names.values())) == 2 and all(p.startswith("student-") for p in names.values())
    assert (tmp_path / class_data.KEY_FILE).stat().st_mode & 0o077 == 0
    hidden = class_data.anonymise(data, names)
    said = repr(hidden.students) + repr(hidden.exercises)
    assert "'al'" not in said and "alex" not in said and "/al/" not in said and "al's" not in said
    assert "alpha" in said and f"/home/{names['al']}/x" in said
    (tmp_path / "other").mkdir()  # another course folder: another key, other pseudonyms
    assert class_data.pseudonyms(tmp_path / "other", ["al"])["al"] != names["al"]


def test_a_course_not_graded_yet_is_said_with_its_fix(tmp_path, capsys):
    course = demo.course_folder(ROOT, tmp_path / "course")
    assert cli.main(["class-report", "--course-dir", str(course)]) == 2
    said = capsys.readouterr().err
    assert f"{course / 'grades.csv'} does not exist" in said
    assert "-> run `python -m course grade` first, or give --grades" in said
    assert not (course / "class-report.html").exists()

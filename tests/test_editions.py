"""Which edition of the assignment each student handed in (course.instructor.editions): the one
there is, or the latest by nbgrader's timestamp; a translated edition's source built for grading."""

from __future__ import annotations

import json

from course import paths
from course.instructor import editions
from tests.helpers import ROOT

JA = "distributed_training_ja"


def hand_in(submitted, student, assignment, stamp=None):
    folder = submitted / student / assignment
    folder.mkdir(parents=True)
    if stamp:
        (folder / "timestamp.txt").write_text(stamp)


def test_each_student_is_graded_on_the_edition_they_handed_in_or_their_latest(tmp_path):
    assert list(editions.ASSIGNMENTS) == [paths.ASSIGNMENT, JA]
    hand_in(tmp_path, "ann", paths.ASSIGNMENT)
    hand_in(tmp_path, "ken", JA)
    hand_in(tmp_path, "mai", paths.ASSIGNMENT, "2026-11-21 10:00:00.000000 UTC")
    hand_in(tmp_path, "mai", JA, "2026-11-20 10:00:00.000000 UTC")
    hand_in(tmp_path, "ryo", paths.ASSIGNMENT, "2026-11-20 10:00:00.000000 UTC")
    hand_in(tmp_path, "ryo", JA, "2026-11-21 10:00:00.000000 UTC")
    (tmp_path / "sam").mkdir()  # no assignment folder: nothing handed in
    chosen, others = editions.handed_in(tmp_path)
    assert chosen == {"ann": paths.ASSIGNMENT, "ken": JA, "mai": paths.ASSIGNMENT, "ryo": JA}
    assert others == {"mai": [JA], "ryo": [paths.ASSIGNMENT]}


def test_the_japanese_source_is_built_into_the_course_folder_with_the_english_cells(tmp_path):
    """A course folder without the catalogs: the installed kit's are read."""
    course = tmp_path / "course"
    (course / "solutions").mkdir(parents=True)
    (course / "solutions" / paths.ASSIGNMENT).symlink_to(ROOT / "solutions" / paths.ASSIGNMENT)
    folder = editions.prepare_source(course, JA, tmp_path / "source")
    assert folder == tmp_path / "source" / JA
    built = json.loads((folder / "01_single_gpu.ipynb").read_text(encoding="utf-8"))
    english = json.loads(
        (ROOT / "solutions" / paths.ASSIGNMENT / "01_single_gpu.ipynb").read_text()
    )
    assert [c["id"] for c in built["cells"]] == [c["id"] for c in english["cells"]]
    assert "ステージ 1" in "".join(built["cells"][0]["source"])
    english = editions.prepare_source(course, paths.ASSIGNMENT, tmp_path / "source")
    assert english == tmp_path / "source" / paths.ASSIGNMENT
    assert sorted(p.name for p in english.glob("*.ipynb")) == sorted(
        p.name for p in folder.glob("*.ipynb")
    )

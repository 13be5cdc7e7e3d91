"""make demo in both editions (issue 42): `python -m course demo --lang ja` grades the Japanese
edition's students with the same points, test by test, as `--lang en` grades the English one's. Both
terms run for real (the release, nbgrader's exchange, the solved student's jobs, the grading), one
after the other, each with its own scheduler state.

Two terms on a shared machine measure different speeds, so a test graded on a measured number (a
scaling efficiency against its tiers) may earn other points in the other term. Such a difference is
accepted only where its reason, in English (grades-details.csv's message_en), names a number and,
with the numbers masked, is the same in both editions (or one of them earned every point, with no
reason); any other difference, or another maximum, fails."""

from __future__ import annotations

import csv
import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from course import i18n
from tests.helpers import PYTHON, ROOT

DEMO_TIMEOUT = 2700  # seconds per edition on a loaded 2-core machine (25 min measured for one)
pytestmark = [pytest.mark.slow, pytest.mark.extended, pytest.mark.timeout(2 * DEMO_TIMEOUT + 60)]
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")

Graded = tuple[float, float, str]  # score, max_score, the reason in English with numbers masked


def points(course: Path) -> dict[tuple[str, str, str], Graded]:
    """(student, notebook, test) -> what it earned and why, from the term's grades-details.csv."""
    with open(course / "grades-details.csv", newline="") as f:
        return {
            (row["student"], row["notebook"], row["test"]): (
                float(row["score"]),
                float(row["max_score"]),
                _NUMBER.sub("N", row["message_en"]) if _NUMBER.search(row["message_en"]) else "",
            )
            for row in csv.DictReader(f)
            if row["test"]
        }


def unexplained(english: Graded | None, japanese: Graded | None) -> bool:
    """Whether two terms' grades of a test differ for another reason than a measured number."""
    if english is None or japanese is None or english[1] != japanese[1]:
        return True
    if english[0] == japanese[0]:
        return False
    reasons = {english[2], japanese[2]} - {""}  # a test with every point has no reason
    return len(reasons) != 1


def demo(lang: str, out: Path) -> Path:
    """make demo in the edition `lang` into `out`; its course folder."""
    env = {**os.environ, i18n.VARIABLE: lang, "XDG_STATE_HOME": str(out.parent / f"state-{lang}")}
    started = time.monotonic()
    done = subprocess.run(
        [PYTHON, "-m", "course", "demo", "--lang", lang, "--out", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=DEMO_TIMEOUT,
    )
    print(f"make demo COURSE_LANG={lang}: {time.monotonic() - started:.0f} s")  # shown with -s
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return out / "course"


def test_the_japanese_demo_earns_the_same_points_per_test_as_the_english(tmp_path):
    english = points(demo("en", tmp_path / "en"))
    japanese = points(demo("ja", tmp_path / "ja"))
    assert english, "the English term graded no test"
    differ = {
        key: (english.get(key), japanese.get(key))
        for key in english.keys() | japanese.keys()
        if unexplained(english.get(key), japanese.get(key))
    }
    assert not differ, "\n".join(
        f"{key}: en {en}, ja {ja}" for key, (en, ja) in sorted(differ.items())
    )
    earned = {
        lang: sum(graded[0] for (student, _, _), graded in term.items() if "solved" in student)
        for lang, term in (("en", english), ("ja", japanese))
    }
    assert earned["en"] > 0, "the solved student earned nothing: the comparison would prove nothing"
    measured = sorted(key for key in english if english[key][0] != japanese[key][0])
    print(f"{len(english)} tests graded; the solved student's points: {earned}; differing on a")
    print(f"measured number only: {measured or 'none'}")

"""A job of the Japanese edition, as tests/test_pbs_ja.py and tests/test_slurm_ja.py submit it: its
job scripts set up as `course site apply` sets up a translated edition, and what its log must say.

The job is the allreduce benchmark's (a minute): each burst prints a translated line per message
size, and the protocol lines that name its files and launches, which check_benchmark_job reads."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from course import i18n, paths
from course.cluster import sites
from tests.helpers import ROOT
from tests.mpi_helpers import check_benchmark_job

JA_JOBS = ROOT / "notebooks" / i18n.assignment("ja") / paths.JOBS_DIR
# The benchmark's line for each size (course/runtime/allreduce_bench.py), as the catalog has it.
SIZE_LINE = (
    "{what} on {ranks} rank(s), {size}: median {median:10.1f} us (quartiles "
    "{low:.1f}-{high:.1f}) over {repeats} repeats"
)


def japanese_folder(folder: Path, profile: str) -> Path:
    """The Japanese edition's job scripts in `folder`, set up with `profile` as `course site apply`
    sets up a translated edition."""
    shutil.copytree(JA_JOBS, folder / paths.JOBS_DIR)
    sites.apply(sites.load_profile(profile), folder / paths.JOBS_DIR, language="ja")
    said = (folder / paths.JOBS_DIR / "site_env.sh").read_text(encoding="utf-8")
    assert 'export COURSE_LANG="${COURSE_LANG:-ja}"' in said
    assert "ジョブスクリプトが共有するサイトの設定" in said  # its comments in Japanese too
    return folder


def without_language(env: dict[str, str]) -> dict[str, str]:
    """The student's shell as the Japanese bundle's terminal has it: no COURSE_LANG."""
    return {k: v for k, v in env.items() if k != i18n.VARIABLE}


def check_japanese_log(folder: Path, log: Path) -> None:
    """The job's own lines in Japanese, its protocol lines English and read back as they are."""
    text = log.read_text(encoding="utf-8")
    japanese = i18n.in_language("ja", SIZE_LINE)
    assert japanese != SIZE_LINE
    fixed = [part for part in re.split(r"\{[^}]*\}", japanese) if re.search(r"[^\x00-\x7f]", part)]
    assert fixed, japanese
    sized = [line for line in text.splitlines() if all(part in line for part in fixed)]
    assert len(sized) == 2 * 2 * 8, text  # 2 rounds x 2 algorithms x 8 sizes, each in Japanese
    assert "median" not in text and "repeats" not in text, text  # none of them in English
    check_benchmark_job(folder, 2, log)  # the protocol lines: English, parsed as ever
    assert re.search(r"^course: job \S+ ended with exit status 0 at ", text, re.M), text

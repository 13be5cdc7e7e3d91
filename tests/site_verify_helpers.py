"""`python -m course site verify` as an instructor runs it, for the tests of each scheduler."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from course import paths
from course.cluster import sites
from course.instructor.site_report import Report
from tests.helpers import ROOT, python, python_ok

# The tests' small settings (tests/conftest.py quick_env): verify runs one epoch of them. The
# profile's own --epoch is what a student's run would train, against which verify judges walltimes.
QUICK_TRAIN_ARGS = "--model vgg --width 8 --batchsize 32 --epoch 3 --warmup 2"


def profile(base: str, folder: Path, **changes: str) -> Path:
    """sites/<base>.toml with `changes` ({setting's line start: the whole new line}) as a new
    profile in `folder`, its train_args the tests' small settings."""
    text = (ROOT / "sites" / f"{base}.toml").read_text()
    text = re.sub(r"^train_args = .*$", f'train_args = "{QUICK_TRAIN_ARGS}"', text, flags=re.M)
    for start, line in changes.items():
        text, count = re.subn(rf"^{re.escape(start)}.*$", line, text, count=1, flags=re.M)
        assert count == 1, start
    path = folder / f"{base}-verify.toml"
    path.write_text(text)
    return path


def kit(folder: Path, profile_path: Path) -> Path:
    """A copy of what verify needs of the kit (jobs/, solutions/, grading.toml), the profile
    applied to its jobs/ as `course site apply` does."""
    folder.mkdir(parents=True)
    shutil.copytree(ROOT / paths.JOBS_DIR, folder / paths.JOBS_DIR)
    shutil.copytree(ROOT / "solutions", folder / "solutions")
    shutil.copy(ROOT / "grading.toml", folder / "grading.toml")
    sites.apply(sites.load_profile(str(profile_path)), folder / paths.JOBS_DIR)
    return folder


def verify(kit_folder: Path, out: Path, env: dict[str, str], timeout: float = 900):
    """`python -m course site verify` run from a login node's shell with `env`: (the process, its
    report read back from report.json)."""
    run = python(
        "-m",
        "course",
        "site",
        "verify",
        "--folder",
        str(kit_folder),
        "--out",
        str(out),
        "--timeout",
        str(timeout),
        env=env,
        timeout=timeout + 120,
    )
    report = out / "report.json"
    assert report.is_file(), run.stdout + run.stderr
    return run, Report.from_json(report.read_text())


def checks(report: Report) -> dict[str, tuple[str, str, str]]:
    """{the check's name up to its first " (": (status, found, fix)}."""
    return {c.name.split(" (")[0]: (c.status, c.found, c.fix) for c in report.checks}


def plan(kit_folder: Path, measured: Path, env: dict[str, str]) -> str:
    """`python -m course plan` for 10 students from the verify run's measured times."""
    return python_ok(
        "-m",
        "course",
        "plan",
        "--students",
        "10",
        "--folder",
        str(kit_folder),
        "--measured",
        str(measured),
        env=env,
    )

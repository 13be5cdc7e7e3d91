"""What reaches the grader through nbgrader's exchange is what a student handed in, whole, and
themselves: a hand-in that fails half-way leaves nothing in the inbound, and collection passes over
an incomplete folder, one with a link, and one a classmate put there under another's name, naming
each for the instructor and grading the student's own earlier submission.

The whole case runs as real local accounts (useradd, removed after) on an exchange that is a small
tmpfs of its own, filled during a hand-in: it needs root."""

from __future__ import annotations

import csv
import os
import shutil
import stat
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import pytest

from course import paths
from course.instructor import demo, exchange, exchange_collect, grade_command, sandbox
from course.notebook import handin_submit
from tests.helpers import ROOT, bubblewrap

A = paths.ASSIGNMENT
AMY, MAX = "ckx-amy", "ckx-max"  # the accounts the test adds (and removes)


def _whole_submission(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "01_single_gpu.ipynb").write_text("{}")
    (folder / exchange_collect.SECRET).write_text("a" * exchange_collect.SECRET_LENGTH)
    return folder


def test_a_folder_is_refused_when_half_copied_linked_or_another_accounts(tmp_path):
    me = exchange_collect.account("root") if os.geteuid() == 0 else None
    whole = _whole_submission(tmp_path / "whole")
    student = "root" if me is not None else "no-such-account-here"
    assert exchange_collect.problem(whole, student, 10**6) is None
    assert "more than nbgrader's submit allows" in exchange_collect.problem(whole, student, 10)

    half = _whole_submission(tmp_path / "half")
    (half / exchange_collect.SECRET).write_text("a" * 20)  # the disk filled while it was written
    assert "incomplete" in exchange_collect.problem(half, student, 10**6)

    linked = _whole_submission(tmp_path / "linked")
    (linked / "runs").mkdir()
    (linked / "runs" / "results.json").symlink_to("/etc/passwd")
    said = exchange_collect.problem(linked, student, 10**6)
    assert "runs/results.json is a symbolic link" in said, said

    if me is None:
        pytest.skip("the owner half needs root (an account whose files these are not)")
    said = exchange_collect.problem(whole, "nobody", 10**6)
    assert said and "belongs to root (uid 0), not to the account nobody" in said, said


def test_the_instructors_lines_are_read_back_from_collects_log():
    log = (
        "[CollectApp | WARNING] course-collect: [amy] NOT COLLECTED amy+x+1: it is incomplete\n"
        "[CollectApp | INFO] Collecting submission: amy x\n"
        "[CollectApp | WARNING] course-collect: [] ownership NOT CHECKED for 1 submission(s)\n"
    )
    assert exchange_collect.notes(log) == [
        exchange_collect.Note("amy", "NOT COLLECTED amy+x+1: it is incomplete"),
        exchange_collect.Note("", "ownership NOT CHECKED for 1 submission(s)"),
    ]


def _run(command: list[str], **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(command, capture_output=True, text=True, timeout=600, **kwargs)


@pytest.fixture
def accounts():
    """Two local accounts, AMY and MAX, each with a home of its own; removed after."""
    if os.geteuid() != 0 or not shutil.which("useradd"):
        pytest.skip("needs root and useradd: adds two local accounts and mounts a tmpfs")
    base = Path(tempfile.mkdtemp(prefix="course-exchange-", dir="/tmp"))
    base.chmod(0o755)  # the students' accounts reach their homes through it
    made = []
    try:
        for name in (AMY, MAX):
            _run(["userdel", "-r", name])  # left by a run that was killed
            home = base / name
            done = _run(["useradd", "-m", "-d", str(home), "-s", "/bin/sh", name])
            assert done.returncode == 0, done.stderr
            made.append(name)
        yield base
    finally:
        for name in made:
            _run(["userdel", "-r", name])
        if os.path.ismount(base / "exchange"):
            _run(["umount", str(base / "exchange")])
        shutil.rmtree(base, ignore_errors=True)


def _opens_to_all(path: str) -> bool:
    return all(os.stat(p).st_mode & stat.S_IXOTH for p in Path(path).resolve().parents)


def account_python() -> tuple[str, dict[str, str]]:
    """A Python the test's accounts can run with the kit's packages, and its environment: this
    one, unless it lives where other accounts cannot reach (a pyenv build in root's home, as on
    the kit's own test machine); then the system's Python of the same version on the kit's
    packages."""
    if _opens_to_all(sys.executable):
        return sys.executable, {}
    system = f"/usr/bin/python3.{sys.version_info.minor}"
    if not os.path.exists(system):
        pytest.skip(f"{sys.executable} is out of other accounts' reach, and there is no {system}")
    packages = sysconfig.get_paths()["purelib"]
    return system, {"PYTHONPATH": os.pathsep.join([str(ROOT), packages])}


def as_account(name: str, *command: str, cwd: Path) -> subprocess.CompletedProcess:
    """`command` run as the account `name` (its own uid, group and home), in `cwd`; "python" is
    account_python()."""
    python, extra = account_python()
    env = {k: v for k, v in paths.tool_environment().items() if k != exchange.ENV}
    env.update(HOME=str(cwd), USER=name, LOGNAME=name, PATH=f"{Path(python).parent}:/usr/bin:/bin")
    env.update(extra)
    setpriv = ["setpriv", f"--reuid={name}", f"--regid={name}", "--init-groups"]
    run = [python if part == "python" else part for part in command]
    return _run([*setpriv, *run], cwd=cwd, env=env)


def handin(name: str, home: Path, *extra: str) -> subprocess.CompletedProcess:
    return as_account(name, "python", "-m", "course", "handin", *extra, cwd=home)


def _submissions(inbound: Path, student: str) -> list[Path]:
    return sorted(inbound.glob(f"{student}+{A}+*"), key=lambda p: p.name.split("+")[2])


def _fill(mount: Path, leave: int) -> None:
    """Fill the file system at `mount` but `leave` bytes."""
    free = os.statvfs(mount)
    with open(mount / "filler", "wb") as f:
        f.write(b"\1" * (free.f_bavail * free.f_frsize - leave))


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.timeout(2400)  # each command as an account takes a minute on a busy machine
def test_only_whole_own_submissions_are_graded_on_a_full_shared_exchange(
    accounts, monkeypatch, capfd
):
    if not bubblewrap():
        monkeypatch.setenv(sandbox.SWITCH, "off")
    course = demo.course_folder(ROOT, accounts / "course")
    shutil.copytree(ROOT / "notebooks" / A, course / "notebooks" / A)
    root = accounts / "exchange"
    root.mkdir()
    done = _run(["mount", "-t", "tmpfs", "-o", "size=4m,mode=0777", "tmpfs", str(root)])
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    exchange.run("release_assignment", [A], course, root)
    settings = exchange.settings(course)
    inbound = root / settings.course_id / "inbound"
    folders = {}
    for name in (AMY, MAX):
        home = accounts / name
        (home / "nbgrader_config.py").write_text(exchange.student_config(settings, root))
        subprocess.run(["chown", f"{name}:{name}", str(home / "nbgrader_config.py")], check=True)
        fetched = as_account(name, "python", "-m", "nbgrader", "fetch_assignment", A, cwd=home)
        assert fetched.returncode == 0, fetched.stdout + fetched.stderr
        folders[name] = exchange.assignment_folder(home, settings)

    # amy hands in; max drops the release under amy's name, later.
    assert handin(AMY, accounts / AMY).returncode == 0
    forged = handin(MAX, accounts / MAX, f"--student={AMY}")
    assert forged.returncode == 0, "nbgrader's submit takes any --student: collection must check"
    (good,) = [p for p in _submissions(inbound, AMY) if p.stat().st_uid != _uid(MAX)]

    # amy's next hand-in is larger than the room left in the exchange's file system.
    log = folders[AMY] / "run_single_gpu_training.sh.o9"
    as_account(AMY, "dd", "if=/dev/urandom", f"of={log}", "bs=1k", "count=1500", cwd=accounts / AMY)
    _fill(root, leave=300_000)
    full = handin(AMY, accounts / AMY)
    assert full.returncode == 1, full.stdout + full.stderr
    assert "is full (no space left on its disk)" in full.stderr, full.stderr
    assert "nothing of this attempt was left there" in full.stderr
    assert len(_submissions(inbound, AMY)) == 2, "the failed hand-in left no folder under her name"
    assert not list(inbound.glob(".*")), "nor a hidden one"
    # nbgrader's own submit (an older bundle's) leaves its half copy under her name, newest.
    plain = "--ExchangeFactory.submit=nbgrader.exchange.default.submit.ExchangeSubmit"
    half = as_account(AMY, "python", "-m", "nbgrader", "submit", A, plain, cwd=accounts / AMY)
    assert half.returncode != 0
    assert len(_submissions(inbound, AMY)) == 3, "the issue's half copy, as nbgrader leaves it"
    (root / "filler").unlink()
    (inbound / f"{MAX}+{A}+not-a-time").mkdir()  # a name nbgrader cannot read stops no one
    stopped = f"{handin_submit.STAGING}{AMY}+{A}+2026-12-02 00:00:00.000000 UTC+killed"
    (inbound / stopped).mkdir()  # what a hand-in killed half-way (SIGKILL) leaves

    out = accounts / "grades.csv"
    status = grade_command.main(
        ["--course-dir", str(course), "--exchange", str(root), "--no-feedback", "--out", str(out)]
    )
    said = capfd.readouterr().err
    assert status == 0, said
    with open(out) as f:
        rows = {row["student_id"]: row for row in csv.DictReader(f)}
    assert sorted(rows) == [AMY]
    assert rows[AMY]["timestamp"] in (good / "timestamp.txt").read_text(), "her own, whole one"
    collected = course / "submitted" / AMY / A
    assert (collected / "timestamp.txt").read_text() == (good / "timestamp.txt").read_text()
    assert f"belongs to {MAX} (uid {_uid(MAX)}), not to the account {AMY}" in said, said
    assert "it is incomplete: it has no whole submission_secret.txt" in said, said
    assert f"{AMY}'s newest submission that passes is the one collected" in said
    assert f"NOT COLLECTED {MAX}+{A}+not-a-time: its name is not nbgrader's" in said
    assert f"no other submission of {MAX}'s is in the inbound" in said
    assert f"NOT COLLECTED {stopped}: a hand-in that did not finish" in said
    with open(out.with_name("grades-details.csv")) as f:
        flags = [row["flags"] for row in csv.DictReader(f) if row["student"] == AMY]
    assert any(f"belongs to {MAX}" in flag for flag in flags), flags


def _uid(name: str) -> int:
    uid = exchange_collect.account(name)
    assert uid is not None
    return uid


def test_the_hidden_copy_is_never_what_collect_matches(tmp_path):
    """nbgrader's collect globs <student>+<assignment>+*, which passes over hidden names."""
    import glob

    (tmp_path / f"{handin_submit.STAGING}amy+{A}+2026-12-02 01:00:00 UTC+r").mkdir()
    (tmp_path / f"amy+{A}+2026-12-02 02:00:00 UTC+r").mkdir()
    found = [Path(p).name for p in glob.glob(str(tmp_path / f"*+{A}+*"))]
    assert found == [f"amy+{A}+2026-12-02 02:00:00 UTC+r"]

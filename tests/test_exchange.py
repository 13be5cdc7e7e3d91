"""nbgrader's exchange as the kit configures it, through nbgrader's own apps (release_assignment,
fetch_assignment, submit, collect): the job outputs travel with a submission, the snapshots do not,
and nbgrader's size limit is said. tests/test_demo.py plays the whole term, feedback included."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from course import paths
from course.errors import CourseError
from course.instructor import demo, exchange
from course.notebook import handin
from tests.helpers import ROOT

A = paths.ASSIGNMENT
LOG = "run_single_gpu_training.sh.o7"


@pytest.fixture(scope="module")
def cycle(tmp_path_factory):
    """A course released to a fresh exchange; a student who fetched it, ran jobs and submitted."""
    base = tmp_path_factory.mktemp("exchange-cycle")
    course = demo.course_folder(ROOT, base / "course")
    shutil.copytree(ROOT / "notebooks" / A, course / "notebooks" / A)
    root = base / "exchange"
    exchange.run("release_assignment", [A], course, root)
    settings = exchange.settings(course)
    home = base / "ada"
    home.mkdir()
    (home / "nbgrader_config.py").write_text(exchange.student_config(settings, root))
    exchange.run("fetch_assignment", [A], home, root, cache=home / "cache")
    folder = exchange.assignment_folder(home, settings)
    (folder / "runs" / "single_gpu-7.local").mkdir(parents=True)
    (folder / "runs" / "single_gpu-7.local" / "results.json").write_text("{}")
    (folder / "runs" / "single_gpu-7.local" / "snapshot_iter_188").write_bytes(b"\0" * 1000)
    (folder / "runs" / "multi_node-8.local").mkdir()
    (folder / "runs" / "multi_node-8.local" / "snapshot.1.94").write_bytes(b"\0" * 1000)
    (folder / LOG).write_text("course: job 7.local ended with exit status 0\n")
    exchange.run("submit", [A, "--student=ada"], home, root, cache=home / "cache")
    exchange.run("collect", [A], course, root)
    return course, root, home, settings


def test_the_kits_exchange_is_the_course_folders_unless_set(tmp_path, monkeypatch):
    monkeypatch.delenv(exchange.ENV, raising=False)
    assert exchange.settings(ROOT).root == ROOT / "exchange"
    monkeypatch.setenv(exchange.ENV, str(tmp_path / "shared"))
    assert exchange.settings(ROOT).root == tmp_path / "shared"
    course = exchange.settings(ROOT)
    assert course.path_includes_course and course.course_id == "chainer-distributed-training"


@pytest.mark.integration
def test_release_creates_the_exchange_and_students_fetch_into_the_course_folder(cycle):
    course, root, home, settings = cycle
    assert (root / settings.course_id / "outbound" / A / "01_single_gpu.ipynb").is_file()
    assert (home / settings.course_id / A / "jobs" / "site_env.sh").is_file()


@pytest.mark.integration
def test_job_outputs_travel_with_a_submission_and_snapshots_do_not(cycle):
    course, _, _, _ = cycle
    collected = course / "submitted" / "ada" / A
    assert (collected / LOG).is_file() and (
        collected / "runs" / "single_gpu-7.local" / "results.json"
    ).is_file()
    assert not list(collected.rglob("snapshot*"))


@pytest.mark.integration
def test_a_submission_over_nbgraders_size_limit_is_refused_with_its_reason(cycle):
    _, root, home, settings = cycle
    with pytest.raises(CourseError, match="Directory size is too big"):
        exchange.run(
            "submit",
            [A, "--student=ada", "--CourseDirectory.max_dir_size=1"],
            home,
            root,
            cache=home / "cache",
        )
    assert handin.folder_size(exchange.assignment_folder(home, settings)) > 1000


def stand_in(path: Path, size: int) -> None:
    """A file of `size` bytes that takes no disk (sparse): nbgrader counts its size all the same."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        f.truncate(size)


@pytest.mark.integration
def test_a_course_at_production_settings_hands_in_once_the_named_snapshots_go(
    cycle, tmp_path, capsys
):
    """Reedbush-H's plan at width 64: a stage-3 run's 27 rank snapshots of about 120 MB each
    (measured), left by a run that did not finish, and a core file; nbgrader counts both against its
    2 GB. The check names them before nbgrader refuses; removing the snapshots makes it fit."""
    _, root, _, settings = cycle
    home = tmp_path / "kenji"
    home.mkdir()
    (home / "nbgrader_config.py").write_text(exchange.student_config(settings, root))
    exchange.run("fetch_assignment", [A], home, root, cache=home / "cache")
    folder = exchange.assignment_folder(home, settings)
    run = folder / "runs" / "multi_node-12.rbh"
    for rank in range(27):
        stand_in(run / f"snapshot.{rank}.1560", 120_000_000)
    (run / "results.json").write_text("{}")  # unreadable as a record: not known to be finished
    stand_in(folder / "core.4242", 900_000_000)

    assert handin.limits(folder).max_dir_size == settings.max_dir_size * 1000
    assert not handin.check(folder)
    said = capsys.readouterr().out
    assert "nbgrader's submit refuses this folder" in said
    assert "runs/multi_node-12.rbh: 27 file(s), 3,240.0 MB (unfinished" in said
    assert "core.4242" in said.split("Its largest files:")[1]
    # nbgrader's own submit (the Assignment List's too) names them as well.
    with pytest.raises(CourseError, match="Directory size is too big") as refused:
        exchange.run("submit", [A, "--student=kenji"], home, root, cache=home / "cache")
    assert "core.4242" in refused.value.message, refused.value.message
    assert "runs/multi_node-12.rbh: 27 file(s), 3,240.0 MB" in refused.value.message

    with pytest.raises(CourseError, match="there is no run folder"):
        handin.remove_snapshots("multi_node-13.rbh", folder)
    assert handin.remove_snapshots("multi_node-12.rbh", folder) == 27 * 120_000_000
    (folder / "core.4242").unlink()
    assert handin.check(folder)
    assert "ready to hand in" in capsys.readouterr().out
    exchange.run("submit", [A, "--student=kenji"], home, root, cache=home / "cache")
    assert list((root / settings.course_id / "inbound").glob(f"kenji+{A}+*"))


@pytest.mark.integration
def test_course_handin_says_whether_the_work_reached_the_exchange(cycle, tmp_path):
    import os
    import subprocess
    import sys

    _, root, home, settings = cycle
    command = [sys.executable, "-m", "course", "handin", "--student=ben"]
    command.append(f"--Exchange.cache={tmp_path}")
    env = {k: v for k, v in os.environ.items() if k != exchange.ENV}
    done = subprocess.run(command, cwd=home, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Handed in: distributed_training is in the exchange" in done.stdout
    assert list((root / settings.course_id / "inbound").glob(f"ben+{A}+*"))
    # An exchange that is not there (the students' configuration reads COURSE_EXCHANGE first):
    # nbgrader refuses, and the hand-in says so and fails.
    missing = tmp_path / "no-exchange"
    env[exchange.ENV] = str(missing)
    done = subprocess.run(command, cwd=home, env=env, capture_output=True, text=True)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Nothing was handed in" in done.stderr and str(missing) in done.stderr
    assert "ask your instructor which exchange folder" in done.stderr, "nbgrader's refusal, said"


@pytest.mark.integration
def test_collect_says_plainly_when_a_student_id_is_no_account_to_check_the_owner_against(cycle):
    """ada is no account here: the kit's collect (the course's nbgrader_config.py) cannot tell who
    made her folder from its owner, says so once, and collects it as nbgrader does."""
    import os
    import pwd

    from course.instructor import exchange_collect

    course, root, _, _ = cycle
    log = exchange.run("collect", [A, "--update"], course, root)
    (note,) = [note for note in exchange_collect.notes(log) if not note.student]
    me = pwd.getpwuid(os.getuid()).pw_name
    assert note.text.startswith("ownership NOT CHECKED for"), note
    assert f"ada: {me} (uid {os.getuid()})" in note.text
    assert "no account on this machine has their student id as its name" in note.text
    assert (course / "submitted" / "ada" / A / "timestamp.txt").is_file()

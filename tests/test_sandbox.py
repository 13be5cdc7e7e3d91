"""What a student's code sees while it is graded (course.instructor.sandbox): no network, no
exchange, no classmate's or instructor's files, no privileges, and the instructor's data set,
never one the submission names. The real verifier in its bubblewrap sandbox; a planted function
called by a test cell reports what it reached."""

from __future__ import annotations

import json
import shutil
import socket
import tempfile
import threading
from pathlib import Path

import pytest

from course import paths
from course.instructor import sandbox, verify, verify_plan
from course.instructor.verify_protocol import TestCell as Cell  # not a test class
from course.runtime.data import data_dir
from tests.helpers import ROOT, bubblewrap
from tests.verify_helpers import OBSERVING, verified

pytestmark = pytest.mark.integration

PLANTED = """
def reach(port):
    import socket
    try:
        socket.create_connection(("127.0.0.1", port), timeout=5).sendall(b"planted")
        return "connected"
    except OSError as e:
        return type(e).__name__


def read(path):
    try:
        with open(path) as f:
            return f.read()[:100]
    except OSError as e:
        return type(e).__name__


def listing(paths):
    import os
    return {path: sorted(os.listdir(path)) if os.path.isdir(path) else None for path in paths}


def who():
    import os
    return [os.getuid(), os.geteuid(), os.getgid()]


def write(path):
    try:
        open(path, "w").close()
        return "written"
    except OSError as e:
        return type(e).__name__


def data_set():
    import os
    return [os.environ.get("COURSE_DATASET"), os.environ.get("CHAINER_DATASET_ROOT")]
"""


def _printed(verdict, test: str):
    """What the planted function returned, as its test printed it."""
    [stream] = [o for o in verdict.outputs[test] if o.get("output_type") == "stream"]
    return json.loads(stream["text"].strip().splitlines()[-1])


def _cell(test: str, call: str) -> Cell:
    return Cell(test, f"import json; print(json.dumps(observe(returned, {call})))", "", 1)


@pytest.fixture(scope="module")
def sandboxed():
    if not bubblewrap():
        pytest.skip("the grading sandbox (bubblewrap) cannot start here")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(sandbox.SWITCH, "on")
        yield


@pytest.fixture
def exchange():
    """An nbgrader exchange outside /tmp (which the sandbox replaces anyway), holding a classmate's
    submitted notebook in its inbound."""
    root = Path(tempfile.mkdtemp(prefix="course-test-exchange-", dir="/var/tmp"))
    inbound = root / "chainer-distributed-training" / "inbound"
    notebook = inbound / "bob+distributed_training+2026-12-01 10:00:00.000000 UTC" / "01.ipynb"
    notebook.parent.mkdir(parents=True)
    notebook.write_text('{"bob": "the answers"}')
    notebook.chmod(0o644)
    yield notebook
    shutil.rmtree(root)


def test_a_planted_cell_reaches_no_listener_of_the_machine(sandboxed, tmp_path):
    with socket.create_server(("127.0.0.1", 0)) as server:
        server.settimeout(30)
        port = server.getsockname()[1]
        accepted: list[bytes] = []

        def accept():
            try:
                connection, _ = server.accept()
                accepted.append(connection.recv(100))
            except OSError:
                pass

        listener = threading.Thread(target=accept, daemon=True)
        listener.start()
        verdict = verified(tmp_path, PLANTED, [_cell("check_net", f"reach, args=[{port}]")])
        server.close()
        listener.join(timeout=35)
    assert _printed(verdict, "check_net") == "ConnectionRefusedError"  # its own loopback only
    assert accepted == []


def test_a_planted_cell_cannot_read_a_classmates_notebook_in_the_exchange(
    sandboxed, tmp_path, exchange
):
    course = tmp_path / "course"
    (course / "submitted" / "bob").mkdir(parents=True)
    (course / "gradebook.db").write_text("the gradebook")
    tests = [
        _cell("check_exchange", f"read, args=[{str(exchange)!r}]"),
        _cell("check_gradebook", f"read, args=[{str(course / 'gradebook.db')!r}]"),
        _cell(
            "check_source",
            f"read, args=[{str(ROOT / 'solutions' / paths.ASSIGNMENT / '01_single_gpu.ipynb')!r}]",
        ),
        _cell(
            "check_listing",
            "listing, args=[" + repr(["/", "/var", "/home", "/root", str(paths.KIT_ROOT)]) + "]",
        ),
    ]
    verdict = verified(tmp_path, PLANTED, tests)
    assert (
        ROOT / "solutions" / paths.ASSIGNMENT / "01_single_gpu.ipynb"
    ).is_file()  # there outside the sandbox
    for test in ("check_exchange", "check_gradebook", "check_source"):
        assert _printed(verdict, test) == "FileNotFoundError", test
    seen = _printed(verdict, "check_listing")
    assert seen["/var"] is None and seen["/home"] is None
    # of the kit's checkout, only the package and the Python environment (not solutions/)
    assert set(seen[str(paths.KIT_ROOT)]) <= {"course", ".venv"}, seen
    # of /root, at most the folders of the Python environment (pyenv's, on a test machine) and
    # of the instructor's data set (~/.chainer/dataset/pfnet/chainer/cifar, where there is one)
    data = data_dir(verify.data_environment(ROOT)["CHAINER_DATASET_ROOT"])
    bound = {
        p.parts[2]
        for p in [*sandbox._environment_folders(), data]
        if p.is_relative_to("/root") and p.exists()
    }
    assert set(seen["/root"] or []) <= bound, seen
    assert not {"srv", "home", "var", "mnt", "opt", "media"} & set(seen["/"]), seen


def test_a_planted_cell_runs_unprivileged_and_writes_nothing_of_the_machine(sandboxed, tmp_path):
    tests = [
        _cell("check_who", "who, args=[]"),
        _cell("check_write", f"write, args=[{str(tmp_path / 'student' / 'planted.txt')!r}]"),
    ]
    verdict = verified(tmp_path, PLANTED, tests)
    assert _printed(verdict, "check_who") == [65534, 65534, 65534]
    assert _printed(verdict, "check_write") == "OSError"
    assert not (tmp_path / "student" / "planted.txt").exists()


def test_the_setup_cell_loads_the_instructors_data_set_never_the_submissions(sandboxed, tmp_path):
    """A submission's jobs/site_env.sh naming its own data set and folder: the setup cell (the
    notebook's real one) and the tests see the instructor's."""
    jobs = tmp_path / "student" / "jobs"
    jobs.mkdir(parents=True)
    (jobs / "site_env.sh").write_text(
        (ROOT / "jobs" / "site_env.sh")
        .read_text()
        .replace('COURSE_DATASET="${COURSE_DATASET:-synthetic}"', "COURSE_DATASET=zeros")
        + f"export CHAINER_DATASET_ROOT={tmp_path / 'student' / 'data'}\n"
    )
    setup = verify_plan.plans(ROOT / "solutions" / paths.ASSIGNMENT)[0].setup
    cell = [_cell("check_data", "data_set, args=[]")]
    student = tmp_path / "student"
    verdict = verified(tmp_path, PLANTED, cell, setup=f"{setup}\n{OBSERVING}")
    expected = verify.data_environment(ROOT)
    assert expected["COURSE_DATASET"] == "synthetic"
    assert _printed(verdict, "check_data") == [
        expected["COURSE_DATASET"],
        expected["CHAINER_DATASET_ROOT"],
    ]
    assert student.is_dir()

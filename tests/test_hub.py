"""The kit's JupyterHub (jupyterhub/jupyterhub_config.py) for a class, run for real on 127.0.0.1
(tests/hub_server.py starts it).

An instructor, two students and the course's grader account are operating-system users made here
(removed after); the hub starts each one's server as that user. Through the hub's REST API (a token
per user) and HTTP: the instructor releases from the formgrader service; each student's server
fetches with nbgrader's Assignment List API, runs a cell in a kernel, submits a course job from a
kernel with course.submit (the release's `local` site profile: the kit's local scheduler runs it on
this machine, as that student) and submits the assignment; the grader account collects and grades
with `python -m course grade`, the instructor releases the feedback from the formgrader and each
student fetches it. Students reach no instructor tool. Debian's chromium logs a student in through
the hub's login page and shows the Assignment List. tests/test_hub_batch.py runs the servers as
Slurm jobs.

Needs root, npm and JupyterHub; skipped with the reason otherwise (tests/hub_server.py).
"""

from __future__ import annotations

import pwd
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from course import paths
from tests import hub_server
from tests.helpers import PYTHON, ROOT, bubblewrap, until
from tests.hub_server import PASSWORD, START_TIMEOUT, A, Hub, run_cell, start_server

pytestmark = pytest.mark.slow
JOB_TIMEOUT = 300  # seconds for the allreduce job on a loaded machine (about 10 s measured)


@pytest.fixture(scope="module")
def running_hub() -> Iterator[Hub]:
    with hub_server.running(ROOT / "jupyterhub" / "jupyterhub_config.py") as running:
        yield running


@pytest.fixture(scope="module")
def released(running_hub: Hub) -> Hub:
    """The assignment, released by the instructor from the formgrader service."""
    h = running_hub
    formgrader = f"/services/{h.course}/formgrader"

    def service_up() -> bool:
        return h.request("GET", f"{formgrader}/api/status", h.instructor)[0] == 200

    until(service_up, timeout=START_TIMEOUT, what="the formgrader service", every=0.5)
    done = h.ok("POST", f"{formgrader}/api/assignment/{A}/release", h.instructor)
    assert done["success"], done  # type: ignore[index]
    assert (h.exchange / h.course / "outbound" / A / "01_single_gpu.ipynb").is_file()
    return h


def work_a_cell(h: Hub, user: str) -> str:
    """A kernel on the student's server runs one cell in the fetched assignment; its output."""
    code = (
        "import os, getpass\n"
        f"os.chdir(os.path.expanduser('~/{h.course}/{A}'))\n"
        "open('hub-cell.txt', 'w').write(getpass.getuser())\n"
        "print(getpass.getuser(), os.environ['JUPYTERHUB_USER'])\n"
    )
    return run_cell(h, user, code)


def submit_a_job(h: Hub, user: str) -> Path:
    """The student's kernel submits the allreduce benchmark from the fetched assignment (the
    release's profile: course.submit's local scheduler); its log, once it ended with status 0."""
    cell = hub_server.SUBMIT_CELL.format(folder=f"~/{h.course}/{A}", timeout=JOB_TIMEOUT)
    started = time.monotonic()
    printed = run_cell(h, user, cell, timeout=JOB_TIMEOUT + 60)
    print(f"{user}'s job from the kernel: {time.monotonic() - started:.1f} s")  # shown with -s
    scheduler, number, status, *_ = printed.splitlines()[0].split()
    assert (scheduler, status) == ("local", "0"), printed
    folder = h.home(user) / h.course / A
    [log] = folder.glob(f"run_allreduce_benchmark.sh.o{number}")
    assert log.stat().st_uid == pwd.getpwnam(user).pw_uid, "the job ran as the student"
    assert re.search(rf"course: job \S*{number}\S* ended with exit status 0", log.read_text()), (
        printed
    )
    [result] = (folder / "runs").glob(f"allreduce-*{number}*/*.json")
    assert result.stat().st_uid == pwd.getpwnam(user).pw_uid, result
    return log


def assignment_list(h: Hub, user: str) -> dict[str, str]:
    """{assignment: status} in the student's Assignment List (nbgrader's server extension)."""
    answer = h.ok("GET", f"/user/{user}/assignments?course_id={h.course}", user)
    assert answer["success"], answer  # type: ignore[index]
    return {item["assignment_id"]: item["status"] for item in answer["value"]}  # type: ignore[index]


def test_a_term_on_the_hub(released: Hub):
    h = released
    action = {"course_id": h.course, "assignment_id": A}
    for student in h.students:
        start_server(h, student)
        courses = h.ok("GET", f"/user/{student}/courses", student)
        assert courses["value"] == [h.course], courses  # type: ignore[index]  # from the hub group
        assert assignment_list(h, student) == {A: "released"}
        h.ok("POST", f"/user/{student}/assignments/fetch", student, action)
        fetched = h.home(student) / h.course / A
        assert (fetched / "01_single_gpu.ipynb").is_file() and fetched.stat().st_uid != 0
        assert work_a_cell(h, student).split() == [student, student], "the kernel is the student's"
        submit_a_job(h, student)
        submitted = h.ok("POST", f"/user/{student}/assignments/submit", student, action)
        assert submitted["success"], submitted  # type: ignore[index]
        assert assignment_list(h, student) == {A: "submitted"}

    # The grader account collects and grades, as the instructor runs it in the course folder.
    if not bubblewrap():
        pytest.skip("grading runs students' code in bubblewrap's sandbox, which cannot run here")
    grader = h.home(h.grader)
    account = pwd.getpwnam(h.grader)
    as_grader = (
        ["nsenter", f"--target={h.pid}", "--mount"] if hub_server.hidden_interpreter() else []
    )
    as_grader += ["setpriv", f"--reuid={account.pw_uid}", f"--regid={account.pw_gid}"]
    as_grader += ["--init-groups"]
    graded = subprocess.run(
        [*as_grader, PYTHON, "-m", "course", "grade", "--course-dir", str(h.course_dir)]
        + ["--exchange", str(h.exchange)],
        cwd=h.course_dir,
        env={**paths.tool_environment(), "HOME": str(grader), "USER": h.grader},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert graded.returncode == 0, graded.stdout + graded.stderr
    for student in h.students:
        collected = h.course_dir / "submitted" / student / A
        assert (collected / "hub-cell.txt").read_text() == student, "the worked cell was handed in"
        assert (h.course_dir / "feedback" / student / A / "01_single_gpu.html").is_file()

    formgrader = f"/services/{h.course}/formgrader"
    done = h.ok("POST", f"{formgrader}/api/assignment/{A}/release_feedback", h.instructor)
    assert done["success"], done  # type: ignore[index]
    for student in h.students:
        h.ok("POST", f"/user/{student}/assignments/fetch_feedback", student, action)
        [fetched] = (h.home(student) / h.course / A / "feedback").glob("*/01_single_gpu.html")
        made = h.course_dir / "feedback" / student / A / "01_single_gpu.html"
        assert fetched.read_text() == made.read_text(), f"{student}'s own feedback"
        assert re.search(r"Score: [\d.]+ / [\d.]+", fetched.read_text()), "the feedback's score"


def test_students_reach_no_instructor_tool(released: Hub):
    h = released
    student = h.students[0]
    start_server(h, student)
    status, _ = h.request("GET", f"/services/{h.course}/formgrader/api/status", student)
    assert status == 403, f"the formgrader service answered a student: {status}"
    status, _ = h.request("GET", f"/user/{student}/formgrader", student)
    assert status == 404, "the formgrader extension is off in the students' servers"
    start_server(h, h.instructor)
    assert h.request("GET", f"/user/{h.instructor}/api/status", h.instructor)[0] == 200
    status, _ = h.request("GET", f"/user/{h.instructor}/api/status", student)
    assert status == 403, "a student reaches another user's server"


@pytest.fixture
def browser(chromium: tuple[str, str], tmp_path: Path) -> Iterator:
    """Headless chromium that may reach 127.0.0.1 only (--no-sandbox: it runs as root)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    binary, driver = chromium
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--window-size=1400,1000",
        "--no-first-run",
        "--disable-background-networking",
        "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
    ):
        options.add_argument(argument)
    service = Service(executable_path=driver, log_output=str(tmp_path / "chromedriver.log"))
    session = webdriver.Chrome(service=service, options=options)
    yield session
    session.quit()


def test_a_student_logs_in_and_finds_the_assignment_in_the_assignment_list(
    released: Hub, browser, tmp_path
):
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    h = released
    student = h.students[-1]
    start_server(h, student)

    def wait(condition, what: str):
        try:
            return WebDriverWait(
                browser, START_TIMEOUT, 0.25, [StaleElementReferenceException]
            ).until(condition)
        except Exception as e:
            browser.save_screenshot(str(tmp_path / "failed.png"))
            text = browser.find_element("tag name", "body").text[-1500:]
            raise AssertionError(f"{what}: not within {START_TIMEOUT} s; the page:\n{text}") from e

    def found(selector: str):
        return lambda b: b.find_elements("css selector", selector)

    # The hub's own login page (its form carries the _xsrf field), the class's password.
    browser.get(f"{h.url}/hub/login?next=/user/{student}/lab")
    wait(found("#username_input"), "the login page")
    browser.find_element("id", "username_input").send_keys(student)
    browser.find_element("id", "password_input").send_keys(PASSWORD)
    browser.find_element("id", "login_submit").click()
    wait(found("#jp-main-dock-panel"), f"JupyterLab of {student}")

    def nbgrader_menu(b):
        return [
            e
            for e in b.find_elements("css selector", ".lm-MenuBar-itemLabel")
            if e.text == "Nbgrader"
        ]

    wait(nbgrader_menu, "the Nbgrader menu")[0].click()
    entries = {e.text: e for e in wait(found(".lm-Menu .lm-Menu-itemLabel"), "its entries")}
    assert "Assignment List" in entries and not {"Formgrader", "Create assignment"} & set(entries)
    entries["Assignment List"].click()

    def listed(b):
        rows = b.find_elements("css selector", ".list_item")
        return [row for row in rows if A in row.text and h.course in row.text]

    wait(listed, "the assignment in the Assignment List")
    browser.save_screenshot(str(tmp_path / "hub-assignment-list.png"))
    # The formgrader service refuses the student in the browser too.
    browser.get(f"{h.url}/services/{h.course}/formgrader")
    wait(lambda b: "403" in b.find_element("tag name", "body").text, "the formgrader's refusal")

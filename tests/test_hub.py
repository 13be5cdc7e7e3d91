"""The kit's JupyterHub (jupyterhub/jupyterhub_config.py) for a class, run for real on 127.0.0.1.

An instructor, two students and the course's grader account are operating-system users made here
(removed after); the hub starts each one's server as that user. Through the hub's REST API (a token
per user) and HTTP: the instructor releases from the formgrader service; each student's server
fetches with nbgrader's Assignment List API, runs a cell in a kernel and submits; the grader account
collects and grades with `python -m course grade`, the instructor releases the feedback from the
formgrader and each student fetches it. Students reach no instructor tool. Debian's chromium logs a
student in through the hub's login page and shows the Assignment List.

Needs root (useradd, servers as other users), npm (the proxy: `make hub-proxy`) and JupyterHub (the
hub extra); skipped with the reason otherwise.
"""

from __future__ import annotations

import asyncio
import json
import os
import pwd
import re
import secrets
import shutil
import socket
import subprocess
import tempfile
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from course import paths
from course.instructor import demo, exchange, hub
from tests.helpers import PYTHON, ROOT, bubblewrap, until

pytestmark = pytest.mark.slow

A = paths.ASSIGNMENT
PASSWORD = "class-password-" + secrets.token_hex(4)
ADMIN = "course-hub-test"  # this test's own hub service: it makes the users' tokens
START_TIMEOUT = 120  # seconds for the hub, a server or the formgrader to answer (a loaded machine)
STOP_TIMEOUT = 120  # the hub stops every server and the proxy on SIGTERM (about 30 s measured)
WRAPPER = """# The kit's configuration, and what only this test adds: its ports, its token service.
load_subconfig({config!r})
c.JupyterHub.services[0]["url"] = "http://127.0.0.1:{service_port}"
c.JupyterHub.services.append({{"name": {admin!r}, "api_token": {token!r}}})
c.JupyterHub.load_roles.append(
    {{"name": {admin!r}, "services": [{admin!r}], "scopes": ["admin:users", "tokens"]}}
)
"""


@dataclass
class Hub:
    """The running hub: its URL, users by role, and a token per user."""

    url: str
    base: Path
    course: str
    instructor: str
    grader: str
    students: tuple[str, ...]
    exchange: Path
    course_dir: Path
    pid: int  # the hub's (the grader's commands join its mount namespace)
    tokens: dict[str, str] = field(default_factory=dict)

    def home(self, user: str) -> Path:
        return self.base / "home" / user

    def request(self, method: str, path: str, user: str, body: object = None) -> tuple[int, object]:
        """(status, JSON answer or text) of METHOD url/path with `user`'s token."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("Authorization", f"token {self.tokens[user]}")
        try:
            with urllib.request.urlopen(request, timeout=START_TIMEOUT) as answer:
                status, text = answer.status, answer.read().decode()
        except urllib.error.HTTPError as refused:
            status, text = refused.code, refused.read().decode(errors="replace")
        try:
            return status, json.loads(text)
        except ValueError:
            return status, text

    def ok(self, method: str, path: str, user: str, body: object = None) -> object:
        status, answer = self.request(method, path, user, body)
        assert status < 300, f"{method} {path} as {user}: {status} {str(answer)[-1500:]}"
        return answer


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _useradd(name: str, home: Path) -> None:
    subprocess.run(
        ["useradd", "--create-home", "--home-dir", str(home), "--user-group", name],
        check=True,
        capture_output=True,
    )


def _hidden_interpreter() -> Path | None:
    """The folder that hides this Python from other users (pyenv's under root's 0700 home, here),
    or None when every user can run it, as where a site installs the kit."""
    for folder in Path(PYTHON).resolve().parents:
        if folder.parent != folder and not folder.parent.stat().st_mode & 0o001:
            return folder
    return None


def _in_namespace(base: Path) -> list[str]:
    """A command prefix that runs the hub where every user can run this Python: in a private mount
    namespace, the folder that hides it is replaced by one holding only the interpreter's tree."""
    hidden = _hidden_interpreter()
    if hidden is None:
        return []
    if not shutil.which("unshare"):
        pytest.skip(f"{hidden.parent} hides this Python from the hub's users, and no unshare")
    shown = base / "shown"
    (shown / hidden.name).mkdir(parents=True)
    shown.chmod(0o711)
    script = 'mount --bind "$1" "$2" && mount --rbind "$3" "$4" && shift 4 && exec "$@"'
    return ["unshare", "--mount", "--propagation", "private", "--", "sh", "-ec", script] + [
        "sh",
        str(hidden),
        str(shown / hidden.name),
        str(shown),
        str(hidden.parent),
    ]


def _processes_of(uids: set[int]) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and entry.stat().st_uid in uids:
                found.append(int(entry.name))
        except FileNotFoundError:
            continue
    return found


def _stop(process: subprocess.Popen, state: Path, users: list[str]) -> None:
    """Stop the hub (it stops the servers, the service and the proxy), then anything left: the
    proxy by its pid file, the test users' processes by their ids."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=30)
    pid_file = state / "jupyterhub-proxy.pid"
    if pid_file.is_file():
        try:
            os.kill(int(pid_file.read_text()), 9)
        except (ProcessLookupError, ValueError):
            pass
    uids = set()
    for name in users:
        try:
            uids.add(pwd.getpwnam(name).pw_uid)
        except KeyError:
            continue
    for pid in _processes_of(uids):
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass
    until(lambda: not _processes_of(uids), timeout=30, what="the test users' processes ending")


@pytest.fixture(scope="module")
def running_hub() -> Iterator[Hub]:
    if os.geteuid() != 0 or not shutil.which("useradd"):
        pytest.skip("the hub starts servers as other users: needs root and useradd")
    try:
        import jupyterhub  # noqa: F401
    except ImportError:
        pytest.skip('needs JupyterHub: make venv (the "hub" extra)')
    proxy = subprocess.run(["make", "-s", "hub-proxy"], cwd=ROOT, capture_output=True, text=True)
    if proxy.returncode != 0:  # no npm, or no registry: make says which
        pytest.skip("JupyterHub's proxy: " + (proxy.stdout + proxy.stderr).strip()[-600:])

    base = Path(tempfile.mkdtemp(prefix="course-hub-"))
    base.chmod(0o755)  # every user reaches their home, the exchange and the hub's role configs
    (base / "home").mkdir(mode=0o755)
    prefix = "ck" + secrets.token_hex(2)  # this run's users only, never an existing account
    course_id = exchange.settings(ROOT).course_id
    users = [f"{prefix}-kim", f"{prefix}-grader", f"{prefix}-ada", f"{prefix}-ben"]
    state, ex = base / "hub", base / "exchange"
    state.mkdir(mode=0o755)
    ex.mkdir()
    ex.chmod(0o777)  # as nbgrader asks of an exchange: every user writes it
    made: list[str] = []
    process = None
    log = open(state / "hub.log", "w")  # noqa: SIM115 (closed once the hub has stopped)
    try:
        for name in users:
            _useradd(name, base / "home" / name)
            made.append(name)
        instructor, grader, *students = users
        course_dir = demo.course_folder(ROOT, base / "home" / grader / course_id)
        shutil.copytree(ROOT / "notebooks" / A, course_dir / "notebooks" / A)
        subprocess.run(["chown", "-R", f"{grader}:{grader}", str(course_dir)], check=True)

        port, service_port = free_port(), free_port()
        token = secrets.token_hex(32)
        wrapper = state / "test_config.py"
        wrapper.write_text(
            WRAPPER.format(
                config=str(ROOT / "jupyterhub" / "jupyterhub_config.py"),
                service_port=service_port,
                admin=ADMIN,
                token=token,
            )
        )
        env = {
            **paths.tool_environment(),  # alembic on PATH, for the hub's database
            hub.INSTRUCTORS: instructor,
            hub.STUDENTS: ",".join(students),
            hub.GRADER: grader,
            hub.COURSE_DIR: str(course_dir),
            hub.PASSWORD: PASSWORD,
            exchange.ENV: str(ex),
        }
        command = _in_namespace(base) + [
            str(Path(PYTHON).parent / "jupyterhub"),
            "-f",
            str(wrapper),
            "--ip=127.0.0.1",
            f"--port={port}",
            f"--JupyterHub.hub_port={free_port()}",
            f"--ConfigurableHTTPProxy.api_url=http://127.0.0.1:{free_port()}",
        ]
        process = subprocess.Popen(
            command,
            cwd=state,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        running = Hub(
            f"http://127.0.0.1:{port}",
            base,
            course_id,
            instructor,
            grader,
            tuple(students),
            ex,
            course_dir,
            process.pid,
            {ADMIN: token},
        )

        def answers() -> bool:
            assert process.poll() is None, "the hub stopped:\n" + (state / "hub.log").read_text()
            try:
                return running.request("GET", "/hub/api/", ADMIN)[0] == 200
            except OSError:
                return False

        until(answers, timeout=START_TIMEOUT, what="the hub answering", every=0.5)
        for name in (instructor, *students):
            made_token = running.ok("POST", f"/hub/api/users/{name}/tokens", ADMIN, {"note": "t"})
            running.tokens[name] = made_token["token"]  # type: ignore[index]
        yield running
    finally:
        try:
            if process is not None:
                _stop(process, state, made)
        finally:  # the users and their files go even when a process would not
            log.close()
            for name in made:
                subprocess.run(["userdel", "--remove", name], capture_output=True)
            shutil.rmtree(base, ignore_errors=True)


def start_server(h: Hub, user: str) -> None:
    """The user's own server, started through the hub's API; returns once it is ready."""
    status, answer = h.request("POST", f"/hub/api/users/{user}/server", user)
    assert status in (201, 202, 400), f"starting {user}'s server: {status} {answer}"

    def ready() -> bool:
        server = h.ok("GET", f"/hub/api/users/{user}", user)["servers"].get("")  # type: ignore[index]
        return bool(server and server["ready"])

    until(ready, timeout=START_TIMEOUT, what=f"{user}'s server", every=0.5)


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


async def _execute(h: Hub, user: str, kernel: str, code: str) -> str:
    """Run `code` in the kernel over its websocket (through the proxy); its printed output."""
    from tornado.httpclient import HTTPRequest
    from tornado.websocket import websocket_connect

    url = h.url.replace("http", "ws", 1) + f"/user/{user}/api/kernels/{kernel}/channels"
    request = HTTPRequest(url, headers={"Authorization": f"token {h.tokens[user]}"})
    connection = await websocket_connect(request)
    msg_id = uuid.uuid4().hex
    header = {"msg_id": msg_id, "msg_type": "execute_request", "version": "5.3"}
    header |= {"session": uuid.uuid4().hex, "username": user, "date": ""}
    content = {"code": code, "silent": False, "store_history": True, "allow_stdin": False}
    message = {"header": header, "parent_header": {}, "metadata": {}, "content": content}
    await connection.write_message(json.dumps({**message, "channel": "shell", "buffers": []}))
    printed = []
    while True:
        reply = json.loads(await connection.read_message())
        if reply["parent_header"].get("msg_id") != msg_id:
            continue
        kind = reply["msg_type"]
        if kind == "stream":
            printed.append(reply["content"]["text"])
        elif kind == "error":
            raise AssertionError("the cell failed: " + "\n".join(reply["content"]["traceback"]))
        elif kind == "status" and reply["content"]["execution_state"] == "idle":
            connection.close()
            return "".join(printed)


def work_a_cell(h: Hub, user: str) -> str:
    """A kernel on the student's server runs one cell in the fetched assignment; its output."""
    kernel = h.ok("POST", f"/user/{user}/api/kernels", user, {"name": "python3"})["id"]  # type: ignore[index]
    folder = f"{h.course}/{A}"
    code = (
        "import os, getpass\n"
        f"os.chdir(os.path.expanduser('~/{folder}'))\n"
        "open('hub-cell.txt', 'w').write(getpass.getuser())\n"
        "print(getpass.getuser(), os.environ['JUPYTERHUB_USER'])\n"
    )
    try:
        return asyncio.run(asyncio.wait_for(_execute(h, user, kernel, code), START_TIMEOUT))
    finally:
        h.ok("DELETE", f"/user/{user}/api/kernels/{kernel}", user)


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
        submitted = h.ok("POST", f"/user/{student}/assignments/submit", student, action)
        assert submitted["success"], submitted  # type: ignore[index]
        assert assignment_list(h, student) == {A: "submitted"}

    # The grader account collects and grades, as the instructor runs it in the course folder.
    if not bubblewrap():
        pytest.skip("grading runs students' code in bubblewrap's sandbox, which cannot run here")
    grader = h.home(h.grader)
    account = pwd.getpwnam(h.grader)
    as_grader = ["nsenter", f"--target={h.pid}", "--mount"] if _hidden_interpreter() else []
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

"""The kit's JupyterHub run for real in the tests (tests/test_hub.py, tests/test_hub_batch.py).

`running(config, ...)` makes an instructor, students and the course's grader account as
operating-system users (removed after), starts the hub with `config` (one of jupyterhub/*.py) and
this test's token service on 127.0.0.1, and yields a Hub that speaks its REST API with a token per
user. On leaving, it stops the hub (which stops every server, the service and the proxy) and fails
if anything of it, or any process of its users, is still running then.

Needs root (useradd, servers as other users), npm (the proxy: `make hub-proxy`) and JupyterHub (the
hub extra); `require()` skips with the reason otherwise.
"""

from __future__ import annotations

import asyncio
import json
import os
import pwd
import secrets
import shlex
import shutil
import socket
import subprocess
import tempfile
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from course import paths
from course.instructor import demo, exchange, hub
from tests.helpers import PYTHON, ROOT, until

A = paths.ASSIGNMENT
PASSWORD = "class-password-" + secrets.token_hex(4)
ADMIN = "course-hub-test"  # this test's own hub service: it makes the users' tokens
START_TIMEOUT = 180  # seconds for the hub, a server (a batch job too) or the formgrader to answer
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
    pid: int  # the hub's (commands that must see what it sees join its mount namespace)
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

    def log(self) -> str:
        return (self.base / "hub" / "hub.log").read_text(errors="replace")


def require() -> None:
    """Skip the test where the hub cannot run here, saying why."""
    if os.geteuid() != 0 or not shutil.which("useradd"):
        pytest.skip("the hub starts servers as other users: needs root and useradd")
    try:
        import jupyterhub  # noqa: F401
    except ImportError:
        pytest.skip('needs JupyterHub: make venv (the "hub" extra)')
    proxy = subprocess.run(["make", "-s", "hub-proxy"], cwd=ROOT, capture_output=True, text=True)
    if proxy.returncode != 0:  # no npm, or no registry: make says which
        pytest.skip("JupyterHub's proxy: " + (proxy.stdout + proxy.stderr).strip()[-600:])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def hidden_interpreter() -> Path | None:
    """The folder that hides this Python from other users (pyenv's under root's 0700 home, here),
    or None when every user can run it, as where a site installs the kit."""
    for folder in Path(PYTHON).resolve().parents:
        if folder.parent != folder and not folder.parent.stat().st_mode & 0o001:
            return folder
    return None


def show_interpreter(folder: Path) -> list[str]:
    """Shell commands that, in a private mount namespace, let every user run this Python: the
    folder that hides it is replaced by one (made here, in `folder`) holding only the interpreter's
    tree. None are needed where nothing hides it."""
    hidden = hidden_interpreter()
    if hidden is None:
        return []
    shown = folder / "shown"
    (shown / hidden.name).mkdir(parents=True, exist_ok=True)
    shown.chmod(0o711)
    return [
        f"mount --bind {shlex.quote(str(hidden))} {shlex.quote(str(shown / hidden.name))}",
        f"mount --rbind {shlex.quote(str(shown))} {shlex.quote(str(hidden.parent))}",
    ]


def _in_namespace(base: Path, hosts: Path | None) -> list[str]:
    """A command prefix that runs the hub in a private mount namespace where every user can run
    this Python and, given `hosts`, /etc/hosts is that file (the cluster's host names)."""
    steps = show_interpreter(base)
    if hosts is not None:
        steps.append(f"mount --bind {shlex.quote(str(hosts))} /etc/hosts")
    if not steps:
        return []
    if not shutil.which("unshare"):
        pytest.skip("the hub needs a mount namespace of its own here, and there is no unshare")
    script = " && ".join(steps) + ' && exec "$@"'
    return ["unshare", "--mount", "--propagation", "private", "--", "sh", "-ec", script, "sh"]


def processes_of(users: list[str]) -> list[str]:
    """'pid command' of every process of these users."""
    uids = set()
    for name in users:
        try:
            uids.add(pwd.getpwnam(name).pw_uid)
        except KeyError:
            continue
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and entry.stat().st_uid in uids:
                command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
                found.append(f"{entry.name} {command[:200]}")
        except (FileNotFoundError, ProcessLookupError):
            continue
    return found


def _kill(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass


def _stop(process: subprocess.Popen, state: Path, users: list[str]) -> list[str]:
    """Stop the hub (it stops the servers, the service and the proxy); what was still running
    after (the proxy, the users' processes), killed here and returned."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=30)
    left = []
    pid_file = state / "jupyterhub-proxy.pid"
    if pid_file.is_file() and Path(f"/proc/{pid_file.read_text().strip()}").exists():
        left.append(f"the proxy, pid {pid_file.read_text().strip()}")
        _kill([int(pid_file.read_text())])
    try:  # a server's processes end with it: give them a wide margin to go on their own
        until(lambda: not processes_of(users), timeout=30, what="their end", every=0.5)
    except AssertionError:
        left += processes_of(users)
        _kill([int(line.split()[0]) for line in processes_of(users)])
        until(lambda: not processes_of(users), timeout=30, what="the test users' processes ending")
    return left


@contextmanager
def running(
    config: Path, students: int = 2, env: dict[str, str] | None = None, hosts: Path | None = None
) -> Iterator[Hub]:
    """The hub with `config`, an instructor, `students` students and the grader account; `env` adds
    to the hub's environment, `hosts` replaces its /etc/hosts."""
    require()
    base = Path(tempfile.mkdtemp(prefix="course-hub-"))
    base.chmod(0o755)  # every user reaches their home, the exchange and the hub's role configs
    (base / "home").mkdir(mode=0o755)
    prefix = "ck" + secrets.token_hex(2)  # this run's users only, never an existing account
    course_id = exchange.settings(ROOT).course_id
    names = ["ada", "ben", "cy", "dee"][:students]
    users = [f"{prefix}-kim", f"{prefix}-grader", *(f"{prefix}-{name}" for name in names)]
    state, ex = base / "hub", base / "exchange"
    state.mkdir(mode=0o755)
    ex.mkdir()
    ex.chmod(0o777)  # as nbgrader asks of an exchange: every user writes it
    made: list[str] = []
    process = None
    left: list[str] = []
    log = open(state / "hub.log", "w")  # noqa: SIM115 (closed once the hub has stopped)
    try:
        for name in users:
            subprocess.run(
                ["useradd", "--create-home", "--home-dir", str(base / "home" / name)]
                + ["--user-group", name],
                check=True,
                capture_output=True,
            )
            made.append(name)
        instructor, grader, *student_names = users
        course_dir = demo.course_folder(ROOT, base / "home" / grader / course_id)
        shutil.copytree(ROOT / "notebooks" / A, course_dir / "notebooks" / A)
        subprocess.run(["chown", "-R", f"{grader}:{grader}", str(course_dir)], check=True)

        service_port, token = free_port(), secrets.token_hex(32)
        wrapper = state / "test_config.py"
        wrapper.write_text(
            WRAPPER.format(config=str(config), service_port=service_port, admin=ADMIN, token=token)
        )
        hub_env = {
            **paths.tool_environment(),  # alembic on PATH, for the hub's database
            hub.INSTRUCTORS: instructor,
            hub.STUDENTS: ",".join(student_names),
            hub.GRADER: grader,
            hub.COURSE_DIR: str(course_dir),
            hub.PASSWORD: PASSWORD,
            exchange.ENV: str(ex),
            **(env or {}),
        }
        port = free_port()
        command = _in_namespace(base, hosts) + [
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
            env=hub_env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        running_hub = Hub(
            f"http://127.0.0.1:{port}",
            base,
            course_id,
            instructor,
            grader,
            tuple(student_names),
            ex,
            course_dir,
            process.pid,
            {ADMIN: token},
        )

        def answers() -> bool:
            assert process.poll() is None, "the hub stopped:\n" + running_hub.log()
            try:
                return running_hub.request("GET", "/hub/api/", ADMIN)[0] == 200
            except OSError:
                return False

        until(answers, timeout=START_TIMEOUT, what="the hub answering", every=0.5)
        for name in (instructor, *student_names):
            made_token = running_hub.ok("POST", f"/hub/api/users/{name}/tokens", ADMIN, {})
            running_hub.tokens[name] = made_token["token"]  # type: ignore[index]
        yield running_hub
    finally:
        try:
            if process is not None:
                left = _stop(process, state, made)
        finally:  # the users and their files go even when a process would not
            log.close()
            for name in made:
                subprocess.run(["userdel", "--remove", name], capture_output=True)
            shutil.rmtree(base, ignore_errors=True)
    assert not left, "still running after the hub stopped (killed now):\n" + "\n".join(left)


def start_server(h: Hub, user: str, timeout: float = START_TIMEOUT) -> dict:
    """The user's own server, started through the hub's API; its model once it is ready."""
    status, answer = h.request("POST", f"/hub/api/users/{user}/server", user)
    assert status in (201, 202, 400), f"starting {user}'s server: {status} {answer}"

    def ready() -> dict | None:
        model = h.ok("GET", f"/hub/api/users/{user}", user)
        server = model["servers"].get("")  # type: ignore[index]
        if server is None and status != 400 and model["pending"] is None:  # type: ignore[index]
            jobs = sorted(h.home(user).glob("jupyterhub_slurmspawner_*.log"))  # batchspawner's
            said = "".join(f"\n{log.name}:\n{log.read_text()[-3000:]}" for log in jobs[-1:])
            raise AssertionError(
                f"{user}'s server did not start; the hub's log:\n{h.log()[-3000:]}{said}"
            )
        return server if server and server["ready"] else None

    return until(ready, timeout=timeout, what=f"{user}'s server", every=0.5)


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


def run_cell(h: Hub, user: str, code: str, timeout: float = START_TIMEOUT) -> str:
    """A new kernel on the user's server runs `code` (one cell); what it printed."""
    kernel = h.ok("POST", f"/user/{user}/api/kernels", user, {"name": "python3"})["id"]  # type: ignore[index]
    try:
        return asyncio.run(asyncio.wait_for(_execute(h, user, kernel, code), timeout))
    finally:
        h.ok("DELETE", f"/user/{user}/api/kernels/{kernel}", user)


# A cell that submits the allreduce benchmark, the course's cheapest job (one burst of 2 ranks),
# with the kit's course.submit (the site profile's `qsub -j oe`, or the local scheduler), waits for
# it and prints its scheduler, number and exit status, where it submitted from (host, session id),
# then its log.
SUBMIT_CELL = """
import os, socket, course
os.chdir(os.path.expanduser({folder!r}))
job = course.submit("jobs/run_allreduce_benchmark.sh", echo=None,
                    env={{"ROUNDS": "1", "BUDGET": "0.05", "ALGORITHMS": "ring"}})
status = job.wait(timeout={timeout}, echo=None, poll=1)
print(job.scheduler, job.number, status, socket.gethostname(), os.getsid(0))
print(job.find_log().read_text())
"""

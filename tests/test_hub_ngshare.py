"""The kit's JupyterHub with the authenticated exchange (COURSE_HUB_EXCHANGE=ngshare), run for real
(tests/hub_server.py starts it, with its proxy): no student can hand in under a classmate's name.

ngshare runs as a hub service; every server's and the formgrader's nbgrader use ngshare-exchange's
classes. The instructor creates the course and enrols the students with ngshare-exchange's own
course management, from a kernel of their hub server; the formgrader service releases. Student A
fetches, works a cell and submits; student B then tries every route we could think of to hand in as
A: ngshare's API with B's token naming A, a hub token for A, `nbgrader submit --student`,
JUPYTERHUB_USER and USER set to A, an nbgrader_config.py of B's own that puts the shared folder and
A's id back, and writing into A's folder, ngshare's store and the course folder. The formgrader
collects; A's own submission is the one filed as A's, and `course grade` grades it as A's.

Needs root, npm and JupyterHub; skipped with the reason otherwise (tests/hub_server.py).
"""

from __future__ import annotations

import csv
import json
import pwd
import subprocess

import pytest

from course import paths
from course.instructor import hub
from tests import hub_server
from tests.helpers import PYTHON, ROOT, bubblewrap, until
from tests.hub_server import START_TIMEOUT, A, Hub, run_cell, start_server

pytestmark = pytest.mark.slow

# B's attempts, from a kernel of B's own server (everything B's code can reach), printed as JSON.
ATTEMPTS = """
import json, os, subprocess, sys, base64, requests
course, assignment, victim = {course!r}, {assignment!r}, {victim!r}
url, token = os.environ["COURSE_NGSHARE_URL"], os.environ["JUPYTERHUB_API_TOKEN"]
auth = {{"Authorization": "token " + token}}
said = {{}}
content = base64.encodebytes(b"forged by B").decode()
forged = json.dumps([{{"path": "hub-cell.txt", "content": content}}])
# ngshare's API with B's own token, naming A every way a form or a query can.
answer = requests.post(f"{{url}}/submission/{{course}}/{{assignment}}",
                       data={{"files": forged, "user": victim, "student_id": victim,
                             "username": victim}},
                       params={{"user": victim, "student_id": victim}}, headers=auth)
said["api_submit"] = answer.json()
for name, method, path in [
    ("enrol_self_as_instructor", "POST", f"/instructor/{{course}}/{{os.environ['USER']}}"),
    ("read_victims_submission", "GET", f"/submission/{{course}}/{{assignment}}/{{victim}}"),
    ("list_all_submissions", "GET", f"/submissions/{{course}}/{{assignment}}"),
    ("replace_victims_feedback", "POST", f"/feedback/{{course}}/{{assignment}}/{{victim}}"),
    ("create_a_course", "POST", "/course/mine"),
]:
    answer = requests.request(method, url + path, headers=auth,
                              data={{"first_name": "x", "last_name": "x", "email": "",
                                    "files": forged}})
    said[name] = [answer.status_code, answer.json().get("success")]
os.chdir(os.path.expanduser("~"))
def submit(*extra, env=None):
    command = [sys.executable, "-m", "nbgrader", "submit", assignment, "--course", course, *extra]
    done = subprocess.run(command, capture_output=True, text=True,
                          env={{**os.environ, **(env or {{}})}})
    return [done.returncode, (done.stdout + done.stderr)[-800:]]
said["submit_student_flag"] = submit("--student=" + victim)
said["submit_as_env"] = submit(env={{"JUPYTERHUB_USER": victim, "USER": victim}})
# B's own nbgrader_config.py (read after the hub's): the shared folder, A's id, no hub check.
for part in ("inbound", os.path.join("outbound", assignment)):  # as nbgrader's submit wants them
    os.makedirs(os.path.join({exchange!r}, course, part), exist_ok=True)
with open("nbgrader_config.py", "w") as config:
    config.write("c = get_config()\\n"
                 "c.ExchangeFactory.submit = 'nbgrader.exchange.default.submit.ExchangeSubmit'\\n"
                 "c.Exchange.root = " + repr({exchange!r}) + "\\n"
                 "c.Exchange.path_includes_course = True\\n"
                 "c.Authenticator.plugin_class = 'nbgrader.auth.base.NoAuthPlugin'\\n"
                 "c.CourseDirectory.student_id = " + repr(victim) + "\\n")
said["submit_own_config"] = submit()
os.remove("nbgrader_config.py")
for name, path in [("victims_folder", {victims_folder!r}), ("ngshare_store", {store!r}),
                   ("course_submitted", {submitted!r})]:
    try:
        os.makedirs(path, exist_ok=True)
        with open(os.path.join(path, "hub-cell.txt"), "w") as f:
            f.write("forged by B")
        said[name] = "written"
    except OSError as e:
        said[name] = type(e).__name__
print(json.dumps(said))
"""


@pytest.fixture(scope="module")
def ngshare_hub(tmp_path_factory) -> Hub:
    env = {hub.EXCHANGE_KIND: "ngshare", hub.NGSHARE_PORT: str(hub_server.free_port())}
    with hub_server.running(ROOT / "jupyterhub" / "jupyterhub_config.py", env=env) as running:
        yield running


def ngshare(h: Hub, method: str, path: str, user: str) -> tuple[int, object]:
    """ngshare's API through the hub's proxy, with `user`'s hub token."""
    return h.request(method, f"/services/{hub.NGSHARE}{path}", user)


def test_no_student_hands_in_under_a_classmates_name(ngshare_hub: Hub):
    h = ngshare_hub
    victim, intruder = h.students
    until(
        lambda: ngshare(h, "GET", "/healthz", h.instructor)[0] == 200,
        timeout=START_TIMEOUT,
        what="ngshare answering through the proxy",
        every=0.5,
    )
    # The instructor creates the course (the formgrader service and the instructor teach it) and
    # enrols the students, with ngshare-exchange's course management from a kernel of their server.
    start_server(h, h.instructor)
    manage = "[sys.executable, '-m', 'ngshare_exchange.course_management'"
    steps = [f"{manage}, 'create_course', {h.course!r}, {h.course!r}, {h.instructor!r}]"]
    steps += [
        f"{manage}, 'add_student', {h.course!r}, {s!r}, '-f', {s!r}, '-l', 'S', '-e', '',"
        " '--no-gb']"
        for s in h.students
    ]
    printed = run_cell(
        h,
        h.instructor,
        "import subprocess, sys\n"
        + "".join(
            f"r = subprocess.run({step}, capture_output=True, text=True)\n"
            "print(r.returncode, (r.stdout + r.stderr).replace(chr(10), ' '))\n"
            for step in steps
        ),
    )
    assert [line.split()[0] for line in printed.splitlines()] == ["0"] * len(steps), printed
    assert "Successfully created" in printed, printed

    formgrader = f"/services/{h.course}/formgrader"
    until(
        lambda: h.request("GET", f"{formgrader}/api/status", h.instructor)[0] == 200,
        timeout=START_TIMEOUT,
        what="the formgrader service",
        every=0.5,
    )
    done = h.ok("POST", f"{formgrader}/api/assignment/{A}/release", h.instructor)
    assert done["success"], done  # type: ignore[index]
    assert not (h.exchange / h.course).exists(), "released to ngshare, not to the shared folder"

    action = {"course_id": h.course, "assignment_id": A}
    for student in (victim, intruder):
        start_server(h, student)
        listed = h.ok("GET", f"/user/{student}/assignments?course_id={h.course}", student)
        assert [a["assignment_id"] for a in listed["value"]] == [A], (  # type: ignore[index]
            listed,
            ngshare(h, "GET", f"/assignments/{h.course}", student),
            h.log()[-5000:],
        )
        h.ok("POST", f"/user/{student}/assignments/fetch", student, action)
        marker = h.home(student) / h.course / A / "hub-cell.txt"
        cell = f"open({str(marker)!r}, 'w').write({student!r})"
        run_cell(h, student, cell)
        submitted = h.ok("POST", f"/user/{student}/assignments/submit", student, action)
        assert submitted["success"], submitted  # type: ignore[index]

    # B asks the hub for a token of A's: refused.
    status, _ = h.request("POST", f"/hub/api/users/{victim}/tokens", intruder, {})
    assert status == 403, f"the hub gave B a token for A: {status}"
    store = h.base / "hub" / hub.NGSHARE
    attempts = ATTEMPTS.format(
        course=h.course,
        assignment=A,
        victim=victim,
        exchange=str(h.exchange),
        victims_folder=str(h.home(victim) / h.course / A),
        store=str(store / "files"),
        submitted=str(h.course_dir / "submitted" / victim / A),
    )
    said = json.loads(run_cell(h, intruder, attempts).splitlines()[-1])
    print(json.dumps(said, indent=1))  # shown with -s
    # ngshare takes B's hand-in, as B's: the form's and the query's names are not read.
    assert said["api_submit"]["success"], said
    for refused in (
        "enrol_self_as_instructor",
        "read_victims_submission",
        "list_all_submissions",
        "replace_victims_feedback",
        "create_a_course",
    ):
        assert said[refused][1] is False and said[refused][0] >= 400, (refused, said)
    assert said["submit_student_flag"][0] != 0, said
    assert "not possible with ngshare" in said["submit_student_flag"][1], said
    assert said["submit_as_env"][0] == 0, "submitted, as B (below)"
    # B's own configuration puts the shared folder back: the hand-in lands there, where no one
    # collects on this hub.
    assert said["submit_own_config"][0] == 0, said
    assert list((h.exchange / h.course / "inbound").glob(f"{victim}+{A}+*")), said
    for written in ("victims_folder", "ngshare_store", "course_submitted"):
        assert said[written] == "PermissionError", (written, said)

    # ngshare's own list, as the instructor: A's hand-in once, every other as B's.
    status, listing = ngshare(h, "GET", f"/submissions/{h.course}/{A}", h.instructor)
    assert status == 200, listing
    by_student = [s["student_id"] for s in listing["submissions"]]  # type: ignore[index]
    assert sorted(by_student) == sorted([intruder] * 3 + [victim]), listing

    done = h.ok("POST", f"{formgrader}/api/assignment/{A}/collect", h.instructor)
    assert done["success"], done  # type: ignore[index]
    submitted_a = h.course_dir / "submitted" / victim / A
    assert (submitted_a / "hub-cell.txt").read_text() == victim, "A's own hand-in is filed as A's"
    assert (h.course_dir / "submitted" / intruder / A / "hub-cell.txt").is_file()

    if not bubblewrap():
        pytest.skip("grading runs students' code in bubblewrap's sandbox, which cannot run here")
    account = pwd.getpwnam(h.grader)
    as_grader = (
        ["nsenter", f"--target={h.pid}", "--mount"] if hub_server.hidden_interpreter() else []
    )
    as_grader += ["setpriv", f"--reuid={account.pw_uid}", f"--regid={account.pw_gid}"]
    graded = subprocess.run(
        [*as_grader, "--init-groups", PYTHON, "-m", "course", "grade"]
        + ["--course-dir", str(h.course_dir)],
        cwd=h.course_dir,
        env={**paths.tool_environment(), "HOME": str(h.home(h.grader)), "USER": h.grader},
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert graded.returncode == 0, graded.stdout + graded.stderr
    with open(h.course_dir / "grades.csv", newline="") as table:
        graded_students = {row["student_id"] for row in csv.DictReader(table)}
    assert victim in graded_students, graded_students
    feedback = h.course_dir / "feedback" / victim / A / "01_single_gpu.html"
    assert feedback.is_file(), "A's submission graded as A's"

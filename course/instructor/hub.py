"""JupyterHub for a class (jupyterhub/jupyterhub_config.py): the roster read from the environment,
and the Jupyter configuration of each role written from the kit's own (nbgrader's multi-course
setup: hub groups `formgrade-<course>` and `nbgrader-<course>`, the formgrader a hub service named
after the course, the exchange with course names in its paths).

The hub's edition is COURSE_LANG in the hub's environment (as for `make student-bundle`): every
hub user's server, kernels, terminals and jobs get it, and JupyterLab's own language is the
edition's by default (a JupyterLab settings override).

Imported by the hub's configuration only, in the hub's process.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from course import i18n
from course.errors import CourseError
from course.instructor import bundle, exchange

# The hub's settings, one variable each (jupyterhub/jupyterhub_config.py shows a start).
INSTRUCTORS = "COURSE_HUB_INSTRUCTORS"  # hub users who grade, comma-separated
STUDENTS = "COURSE_HUB_STUDENTS"  # hub users who take the course, comma-separated
GRADER = "COURSE_HUB_GRADER"  # the account whose formgrader is the course's service
COURSE_DIR = "COURSE_HUB_COURSE_DIR"  # the course folder, the grader's, in nbgrader's layout
PASSWORD = "COURSE_HUB_PASSWORD"  # a shared password (SharedPasswordAuthenticator); else PAM
# Students' servers as Slurm jobs (jupyterhub/batchspawner_config.py):
HUB_IP = "COURSE_HUB_HUB_IP"  # the hub's address on the network the compute nodes reach
PARTITION = "COURSE_HUB_PARTITION"  # the partition of the servers' jobs; else Slurm's default
WALLTIME = "COURSE_HUB_WALLTIME"  # the servers' time limit (sbatch --time); else the partition's
# The exchange: "ngshare" runs ngshare as a hub service, an exchange that files each hand-in under
# the hub user whose token sent it; else ("folder", the default) the shared folder COURSE_EXCHANGE.
EXCHANGE_KIND = "COURSE_HUB_EXCHANGE"
NGSHARE_PORT = "COURSE_HUB_NGSHARE_PORT"  # where ngshare listens (every interface); else 10101
NGSHARE = "ngshare"  # the service's name: the hub's proxy serves it at /services/ngshare/
# Seconds the hub waits for a service or a server it starts to answer: past it, the whole hub exits
# (a service) or the server is stopped. JupyterHub 6's defaults, 30 s, were passed at a load of 40
# on 2 cores (the formgrader's and an instructor's server took longer).
SERVICE_TIMEOUT = 180
# Set by the hub in every server's and the formgrader's environment when it runs ngshare.
NGSHARE_URL = "COURSE_NGSHARE_URL"

# jupyter_core's marker of a config dir whose IPython 3 settings were migrated (or need not be).
MIGRATED = "migrated"
# nbgrader's JupyterHub plugin: the Assignment List offers the courses of the user's groups.
AUTH_PLUGIN = """
# nbgrader's multi-course setup: a user's courses are their hub groups nbgrader-<course> (students)
# and formgrade-<course> (instructors); the exchange keeps each course under its id.
from nbgrader.auth import JupyterHubAuthPlugin  # noqa: E402

c.Authenticator.plugin_class = JupyterHubAuthPlugin
c.Exchange.path_includes_course = True
"""
# The same lines end the course's nbgrader_config.py (tests/test_hub_config.py checks): with the
# hub's ngshare, every exchange app (Assignment List, Formgrader, `nbgrader submit`) talks to it.
NGSHARE_SWITCH = """
# The hub's authenticated exchange (COURSE_HUB_EXCHANGE=ngshare): ngshare files each hand-in under
# the hub user whose token sent it, so no one can hand in under a classmate's name.
if os.environ.get("COURSE_NGSHARE_URL"):
    import ngshare_exchange  # noqa: E402

    ngshare_exchange.configureExchange(c, os.environ["COURSE_NGSHARE_URL"])
"""


@dataclass(frozen=True)
class Roster:
    """Who the hub serves for the course."""

    course_id: str
    instructors: tuple[str, ...]
    students: tuple[str, ...]
    grader: str
    course_dir: Path
    exchange: Path | None  # the shared folder; None with ngshare
    ngshare_url: str | None  # ngshare's address for the servers; None with the shared folder
    lang: str  # the edition: the language of every hub user's course messages and JupyterLab


def _names(variable: str, env: dict[str, str]) -> tuple[str, ...]:
    names = tuple(name.strip() for name in env.get(variable, "").split(",") if name.strip())
    if not names:
        raise CourseError(
            f"{variable} names no hub user",
            f"set it to the operating-system user names, comma-separated: {variable}=ada,ben",
        )
    return names


def roster(env: dict[str, str] | None = None) -> Roster:
    """The course's hub users from the environment; a clear error for what is missing."""
    env = dict(os.environ if env is None else env)
    ngshare_url = _ngshare_url(env)
    needed = (COURSE_DIR,) if ngshare_url else (COURSE_DIR, exchange.ENV)
    missing = [name for name in needed if not env.get(name)]
    if missing:
        raise CourseError(
            f"the hub's configuration needs {' and '.join(missing)}",
            f"{COURSE_DIR}: the grader's course folder (nbgrader_config.py, solutions/, the release"
            f" in notebooks/); {exchange.ENV}: the exchange every user can write",
        )
    course_dir = Path(env[COURSE_DIR])
    if not (course_dir / "nbgrader_config.py").is_file():
        raise CourseError(
            f"{course_dir} has no nbgrader_config.py",
            f"point {COURSE_DIR} at a copy of the kit's course folder, owned by the grader",
        )
    lang = env.get(i18n.VARIABLE, "").strip() or i18n.DEFAULT
    if lang not in i18n.LANGUAGES:
        raise CourseError(
            f"{i18n.VARIABLE}={lang!r} in the hub's environment is not an edition of the course",
            f"start the hub with {i18n.VARIABLE} set to {' or '.join(i18n.LANGUAGES)} (unset: "
            "English)",
        )
    course = exchange.settings(course_dir)
    return Roster(
        course_id=course.course_id,
        instructors=_names(INSTRUCTORS, env),
        students=_names(STUDENTS, env),
        grader=env.get(GRADER) or f"grader-{course.course_id}",
        course_dir=course_dir,
        exchange=Path(env[exchange.ENV]) if env.get(exchange.ENV) else None,
        ngshare_url=ngshare_url,
        lang=lang,
    )


def _ngshare_url(env: dict[str, str]) -> str | None:
    """ngshare's address as the servers reach it (the hub's address on the nodes' network when the
    servers are batch jobs), or None when the hub keeps the shared-folder exchange."""
    kind = env.get(EXCHANGE_KIND, "folder").strip() or "folder"
    if kind not in ("folder", NGSHARE):
        raise CourseError(
            f"{EXCHANGE_KIND}={kind!r} is no exchange the hub offers",
            f"set {EXCHANGE_KIND}=ngshare (the authenticated exchange) or leave it unset (the"
            f" shared folder {exchange.ENV})",
        )
    if kind == "folder":
        return None
    port = env.get(NGSHARE_PORT, "10101").strip()
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise CourseError(
            f"{NGSHARE_PORT}={port!r} is not a port", f"set a free port, e.g. {NGSHARE_PORT}=10101"
        )
    host = env.get(HUB_IP, "").strip() or "127.0.0.1"
    return f"http://{host}:{port}/services/{NGSHARE}"


def ngshare_service(r: Roster, state: Path) -> dict:
    """JupyterHub.services' entry that runs ngshare as the hub's account, its database and files in
    `state`/ngshare (the hub's alone: no student can write what was handed in). The instructors are
    its administrators: they create the course and enrol its students (docs/instructors.md)."""
    assert r.ngshare_url is not None, "the hub keeps the shared-folder exchange"
    store = state / NGSHARE
    store.mkdir(mode=0o700, exist_ok=True)
    store.chmod(0o700)
    port = r.ngshare_url.split(":")[-1].split("/")[0]
    return {
        "name": NGSHARE,
        "url": f"http://127.0.0.1:{port}",
        "timeout": SERVICE_TIMEOUT,
        "command": [sys.executable, "-m", "course.instructor.ngshare_service"]
        + ["--admins=" + ",".join(r.instructors), f"--database=sqlite:///{store / 'ngshare.db'}"]
        + [f"--storage={store / 'files'}"],
    }


def server_environment(r: Roster) -> dict[str, str]:
    """What every hub user's server adds to its environment (its kernels, terminals and jobs
    inherit it): the edition's language, which the servers would not get from the hub's own
    environment (the spawner passes on only what it is told to)."""
    return {i18n.VARIABLE: r.lang}


@dataclass(frozen=True)
class BatchSettings:
    """Where the students' servers run as Slurm jobs, and how the hub is reached from there."""

    hub_ip: str
    partition: str
    walltime: str


def batch_settings(env: dict[str, str] | None = None) -> BatchSettings:
    """The batch spawner's settings from the environment; a clear error for a wrong one."""
    env = dict(os.environ if env is None else env)
    address = env.get(HUB_IP, "").strip()
    try:
        reachable = not ipaddress.ip_address(address).is_loopback
    except ValueError:
        reachable = False
    if not reachable:
        raise CourseError(
            f"{HUB_IP}={address!r} is not an address the compute nodes can reach the hub at",
            f"set it to the hub host's IP address on the nodes' network, e.g. {HUB_IP}=10.0.0.1",
        )
    walltime = env.get(WALLTIME, "").strip()
    if walltime and not re.fullmatch(r"(\d+-)?\d+(:\d\d){0,2}", walltime):
        raise CourseError(
            f"{WALLTIME}={walltime!r} is not a time limit sbatch reads",
            f"write it as hours:minutes:seconds, e.g. {WALLTIME}=4:00:00",
        )
    return BatchSettings(address, env.get(PARTITION, "").strip(), walltime)


def groups(r: Roster) -> dict[str, dict[str, list[str]]]:
    """JupyterHub.load_groups: nbgrader's groups for the course."""
    return {
        f"formgrade-{r.course_id}": {"users": [*r.instructors, r.grader]},
        f"nbgrader-{r.course_id}": {"users": list(r.students)},
    }


def roles(r: Roster) -> list[dict]:
    """JupyterHub.load_roles: instructors reach the course's formgrader service, students only see
    that it exists; servers act with their user's rights (nbgrader's plugin reads their groups)."""
    service = r.course_id
    return [
        {
            "name": f"formgrade-{service}",
            "groups": [f"formgrade-{service}"],
            "scopes": [
                f"access:services!service={service}",
                "list:services",
                f"read:services!service={service}",
            ],
        },
        {
            "name": f"nbgrader-{service}",
            "groups": [f"nbgrader-{service}"],
            "scopes": ["list:services", f"read:services!service={service}"],
        },
        {"name": "server", "scopes": ["inherit"]},
        # The formgrader adds students to nbgrader-<course> when they are added to its gradebook.
        {
            "name": f"grader-{service}",
            "services": [service],
            "scopes": ["list:users", "read:users", "admin:groups", "list:groups"],
        },
    ]


def student_config(folder: Path, r: Roster) -> Path:
    """The students' JUPYTER_CONFIG_DIR: the bundle's (nbgrader's instructor tools off) and the
    bundle's nbgrader configuration (exchange, what submit leaves out, the kit's submit), with
    nbgrader's JupyterHub plugin."""
    bundle.student_jupyter_config(folder)
    _lab_language(folder, r.lang)
    settings = exchange.settings(r.course_dir)
    text = exchange.student_config(settings, r.exchange) + AUTH_PLUGIN + NGSHARE_SWITCH
    _write(folder / "nbgrader_config.py", text)
    # Every Jupyter start whose user has ~/.ipython (IPython makes it on the first server's start)
    # migrates IPython 3's settings and marks the config dir, unless a marker is there already:
    # this shared dir is the hub's, so a student's second start failed writing it (PermissionError)
    # and left the hub waiting for a server that had exited. The marker says "nothing to migrate".
    _write(folder / MIGRATED, "the hub's shared configuration: nothing of IPython 3 to migrate\n")
    return folder


def instructor_config(folder: Path, r: Roster) -> Path:
    """A folder for the instructors' and the grader's JUPYTER_CONFIG_PATH: every nbgrader tool on
    (the default), the course's exchange (the shared folder, or ngshare when the hub runs it) and
    nbgrader's JupyterHub plugin."""
    folder.mkdir(parents=True, exist_ok=True)
    root = f"c.Exchange.root = os.environ.get({exchange.ENV!r}) or {str(r.exchange)!r}\n"
    text = (
        '"""nbgrader for the course\'s instructors on the hub (course/instructor/hub.py)."""\n'
        "import os\n\nc = get_config()  # noqa: F821\n"
        + (root if r.exchange else "")
        + AUTH_PLUGIN
        + NGSHARE_SWITCH
    )
    _write(folder / "nbgrader_config.py", text)
    _lab_language(folder, r.lang)
    return folder


def _lab_language(folder: Path, lang: str) -> None:
    """JupyterLab in the edition's language by default: its settings override (overrides.json in
    the app settings folder, here one of the hub's own, which the kit's JupyterLab does not have
    otherwise), named in the folder's jupyter_server_config.json."""
    server_config = folder / "jupyter_server_config.json"
    config = json.loads(server_config.read_text()) if server_config.is_file() else {}
    config.pop("LabApp", None)
    if lang in bundle.LAB_LOCALES:
        settings = folder / "lab-settings"
        settings.mkdir(exist_ok=True)
        settings.chmod(0o755)
        locale = {"@jupyterlab/translation-extension:plugin": {"locale": bundle.LAB_LOCALES[lang]}}
        _write(settings / "overrides.json", json.dumps(locale, indent=2) + "\n")
        config["LabApp"] = {"app_settings_dir": str(settings)}
    _write(server_config, json.dumps(config, indent=2) + "\n")


def _write(path: Path, text: str) -> None:
    """Atomically, readable by every hub user."""
    partial = path.with_suffix(".partial")
    partial.write_text(text)
    partial.chmod(0o644)
    partial.replace(path)


def singleuser() -> str:
    """The single-user server of the kit's environment (every hub user must be able to run it)."""
    return str(Path(sys.executable).parent / "jupyterhub-singleuser")

"""JupyterHub for the course, with nbgrader's multi-course setup (tested by tests/test_hub.py).

Run as root (the hub starts each user's server as that operating-system user), from a folder for the
hub's state (its database and cookie secret) that every hub user can read:

    COURSE_HUB_INSTRUCTORS=kim COURSE_HUB_STUDENTS=ada,ben COURSE_HUB_GRADER=grader-course \\
    COURSE_HUB_COURSE_DIR=/home/grader-course/chainer-distributed-training \\
    COURSE_EXCHANGE=/srv/nbgrader/exchange \\
    /path/to/kit/.venv/bin/jupyterhub -f /path/to/kit/jupyterhub/jupyterhub_config.py

With COURSE_HUB_EXCHANGE=ngshare the hand-ins go to ngshare, a hub service that files each one
under the hub user whose token sent it, instead of the shared folder COURSE_EXCHANGE.

Users log in with their system password (PAM), or with COURSE_HUB_PASSWORD, a password shared by
the class, when it is set. COURSE_LANG=ja makes it the Japanese edition's hub: every user's course
messages, kernels, terminals, jobs and JupyterLab are Japanese by default. The proxy is the kit's
(`make hub-proxy`) when built, else configurable-http-proxy on PATH. docs/instructors.md ("On
JupyterHub") explains each setting.
"""

import sys
from pathlib import Path

KIT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(KIT))  # the kit's package, also when the hub runs another interpreter

from course import paths  # noqa: E402
from course.instructor import hub  # noqa: E402

c = get_config()  # noqa: F821 (JupyterHub provides it)
env = paths.tool_environment()
roster = hub.roster(env)
course = roster.course_id

# --- who logs in ---------------------------------------------------------------------------------
c.Authenticator.allowed_users = set(roster.instructors) | set(roster.students)
if env.get(hub.PASSWORD):
    # JupyterHub 5's replacement of the dummy authenticator: one password for the class.
    c.JupyterHub.authenticator_class = "shared-password"
    c.SharedPasswordAuthenticator.user_password = env[hub.PASSWORD]
# else JupyterHub's default: PAM, the users' system passwords.

# --- nbgrader's groups and what each may reach ---------------------------------------------------
c.JupyterHub.load_groups = hub.groups(roster)
c.JupyterHub.load_roles = hub.roles(roster)

# --- the formgrader: the grader account's server, a hub service named after the course -----------
# Instructors open it at /services/<course>/formgrader; students are refused (403).
state = Path.cwd()
# Where every server and the formgrader find the exchange: ngshare's address, or the shared folder.
exchange_env = (
    {hub.NGSHARE_URL: roster.ngshare_url}
    if roster.ngshare_url
    else {"COURSE_EXCHANGE": str(roster.exchange)}
)
instructor_config = hub.instructor_config(state / "jupyter-instructor", roster)
c.JupyterHub.services = [
    {
        "name": course,
        "url": "http://127.0.0.1:9999",
        "command": [hub.singleuser(), "--debug"],
        "user": roster.grader,
        "cwd": str(roster.course_dir),
        "environment": {
            "JUPYTERHUB_DEFAULT_URL": "/lab",
            "JUPYTER_CONFIG_PATH": str(instructor_config),
            **exchange_env,
            "PATH": env["PATH"],
            **hub.server_environment(roster),
        },
        "oauth_no_confirm": True,
        "timeout": hub.SERVICE_TIMEOUT,
    }
]
if roster.ngshare_url:
    c.JupyterHub.services.append(hub.ngshare_service(roster, state))

# --- everyone's own server -----------------------------------------------------------------------
c.Spawner.cmd = [hub.singleuser()]
c.Spawner.default_url = "/lab"
# A server that has not answered within http_timeout is stopped (30 s by default, passed at a load
# of 40 on 2 cores): the services' margin.
c.Spawner.http_timeout = hub.SERVICE_TIMEOUT
c.Spawner.environment = {
    **exchange_env,
    "PATH": env["PATH"],
    **hub.server_environment(roster),  # the edition's language (COURSE_LANG=ja: the Japanese one)
}
student_config = hub.student_config(state / "jupyter-student", roster)


def role_config(spawner) -> None:
    """Students get the bundle's configuration (no instructor tools); instructors every tool."""
    if spawner.user.name in roster.students:
        role = {"JUPYTER_CONFIG_DIR": str(student_config)}
    else:
        role = {"JUPYTER_CONFIG_PATH": str(instructor_config)}
    spawner.environment = {**spawner.environment, **role}  # a copy: the setting is shared


c.Spawner.pre_spawn_hook = role_config

# --- the proxy -----------------------------------------------------------------------------------
proxy = KIT / "build" / "hub-proxy" / "node_modules" / ".bin" / "configurable-http-proxy"
if proxy.exists():
    c.ConfigurableHTTPProxy.command = [str(proxy)]

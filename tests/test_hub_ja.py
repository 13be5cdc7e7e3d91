"""The kit's JupyterHub as the Japanese edition's hub (COURSE_LANG=ja in the hub's environment, as
docs/instructors.md says), run for real on 127.0.0.1 by tests/hub_server.py: a student and an
instructor who set nothing read the course in Japanese in their kernels, in their terminals and in
JupyterLab's own menus. tests/test_hub.py runs the English hub through a whole term.

Needs root, npm and JupyterHub; skipped with the reason otherwise (tests/hub_server.py).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import pytest

from tests import hub_server
from tests.helpers import PYTHON, ROOT
from tests.hub_server import START_TIMEOUT, Hub, run_cell, start_server

pytestmark = pytest.mark.slow

# A kernel's view: the variable the hub passed, the kit's language, a kit message, and a terminal
# command the kernel starts (its help, which argparse prints through the kit's catalog).
CELL = """
import os, subprocess, sys
from course import i18n
from course.i18n import _
print(os.environ.get("COURSE_LANG"), i18n.language())
print(_("no job script {script}").format(script="x.sh"))
print(subprocess.run([sys.executable, "-m", "course", "handin", "--help"],
                     capture_output=True, text=True, check=True).stdout)
"""
TERMINAL_MARK = "course-lang-is"
LAB_LANGUAGE = "@jupyterlab/translation-extension:plugin"


@pytest.fixture(scope="module")
def japanese_hub() -> Iterator[Hub]:
    config = ROOT / "jupyterhub" / "jupyterhub_config.py"
    with hub_server.running(config, students=1, env={"COURSE_LANG": "ja"}) as running:
        yield running


async def _terminal_says(h: Hub, user: str, command: str) -> str:
    """What a new JupyterLab terminal of the user's server prints for `command` (terminado's
    websocket), up to TERMINAL_MARK, which `command` must print last (spelt so that the terminal's
    echo of the command never holds it)."""
    from tornado.httpclient import HTTPRequest
    from tornado.websocket import websocket_connect

    name = h.ok("POST", f"/user/{user}/api/terminals", user)["name"]  # type: ignore[index]
    try:
        url = h.url.replace("http", "ws", 1) + f"/user/{user}/terminals/websocket/{name}"
        request = HTTPRequest(url, headers={"Authorization": f"token {h.tokens[user]}"})
        connection = await websocket_connect(request)
        await connection.write_message(json.dumps(["stdin", command + "\r"]))
        printed = ""
        while f"{TERMINAL_MARK}=" not in printed:
            message = await connection.read_message()
            assert message is not None, "the terminal closed: " + printed
            kind, *content = json.loads(message)
            if kind == "stdout":
                printed += content[0]
        connection.close()
        return printed
    finally:
        h.ok("DELETE", f"/user/{user}/api/terminals/{name}", user)


def test_a_user_of_the_japanese_hub_reads_japanese_without_setting_anything(japanese_hub: Hub):
    h = japanese_hub
    for user in (h.students[0], h.instructor):
        start_server(h, user)
        language, message, helped = run_cell(h, user, CELL).split("\n", 2)
        assert language == "ja ja", f"{user}'s kernel: {language}"
        assert message == "ジョブスクリプト x.sh がありません", message
        assert "このヘルプを表示して終了します" in helped, helped

        # A terminal: the kit's command, then the variable. The terminal's shell is a login shell,
        # whose /etc/profile sets PATH anew: the kit's interpreter by its path.
        mark = TERMINAL_MARK.replace("-is", '"-is="')
        command = f"{PYTHON} -m course handin --help; echo {mark}$COURSE_LANG"
        said = asyncio.run(asyncio.wait_for(_terminal_says(h, user, command), START_TIMEOUT))
        assert f"{TERMINAL_MARK}=ja" in said, f"{user}'s terminal: {said}"
        assert "このヘルプを表示して終了します" in said, f"{user}'s terminal: {said}"

        # JupyterLab's language: the edition's by default, not a setting the user made.
        answer = h.ok("GET", f"/user/{user}/lab/api/settings/{LAB_LANGUAGE}", user)
        default = answer["schema"]["properties"]["locale"]["default"]  # type: ignore[index]
        assert default == "ja_JP", f"{user}'s JupyterLab language: {default}"
        assert "locale" not in answer["settings"], answer["settings"]  # type: ignore[index]
        pack = h.ok("GET", f"/user/{user}/lab/api/translations/ja_JP", user)
        assert pack["data"], f"JupyterLab has no Japanese language pack: {pack}"  # type: ignore[index]

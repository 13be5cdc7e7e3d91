"""A student's function as the grader's checks get it: a Remote handle whose observations run in a
forked child process and come back as JSON, so that a test can tell a check that judges only facts
from one that touches the student's objects (a Remote cannot be called)."""

from __future__ import annotations

import importlib
import inspect
import json
import os
import textwrap
from typing import Any

import pytest

from course.notebook.checks.inputs import remove_scratch
from course.notebook.checks.observe import Remote


class RemoteRaised(Exception):
    """What the student's function raised in the child, by name and message."""


def remote(function: Any) -> Remote:
    """`function` (a def of a notebook module) as a Remote handle; the sources are those of every
    function of its module."""
    namespace = function.__globals__
    sources = {
        name: textwrap.dedent(inspect.getsource(value))
        for name, value in namespace.items()
        if inspect.isfunction(value) and value.__module__ == function.__module__
    }

    def ask(observer: str, names: list[str], inputs: dict[str, Any]) -> Any:
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: run the observer on the real functions, send the facts
            os.close(read)
            try:
                module, name = observer.split(":")
                found = getattr(importlib.import_module(module), name)
                reply: dict[str, Any] = {"facts": found(*[namespace[n] for n in names], **inputs)}
            except BaseException as e:
                reply = {"raised": f"{type(e).__name__}: {e}"}
            with os.fdopen(write, "w") as f:
                json.dump(reply, f)
            remove_scratch()  # as the grader's observing child does before os._exit
            os._exit(0)
        os.close(write)
        with os.fdopen(read) as f:
            text = f.read()
        os.waitpid(pid, 0)
        reply = json.loads(text)
        if "raised" in reply:
            raise RemoteRaised(reply["raised"])
        return reply["facts"]

    return Remote(function.__name__, sources, ask)


# Each check test runs twice: on the function itself (as in a notebook) and on a Remote handle (as
# under the grader).
HANDLES = pytest.mark.parametrize(
    "handle",
    [pytest.param(lambda function: function, id="here"), pytest.param(remote, id="remote")],
)

"""One test cell under the verifier, in two processes: the test's trusted process runs the cell and
judges, its child runs the student's functions.

The worker (course.instructor.verify_worker) forks the trusted process for each test. That process
first forks the child, then takes the test's hidden part from the grader, so the child never holds
it. It runs the cell, visible and hidden part, where the student's functions are
`Remote` handles (course.notebook.checks.observe): a check asks the child to run an observer on the
real functions and gets plain facts back (`Observation`, `Observed`), which it judges against what
it computes itself. Nothing of the student's code runs in the trusted process; the child can only
answer for the observation it was asked, on a channel made for this test and closed with it; the
outputs nbgrader scores are written by the trusted process alone, on a pipe the child does not hold.
"""

from __future__ import annotations
import __future__

import ast
import builtins
import importlib
import json
import os
import resource
import secrets
import signal
import sys
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NoReturn

from course import i18n, lessons
from course.contracts import message
from course.i18n import _
from course.instructor.verify_protocol import (
    OBSERVERS,
    Observation,
    Observed,
    Output,
    ProtocolError,
    TestCell,
    TestReply,
    VerificationError,
)
from course.lessons.core import mn_ranks
from course.notebook.checks import inputs, sealed_json
from course.notebook.checks.observe import Remote, freeze_kit

# Every lesson loaded here, in the trusted process, so that each test's child inherits them all.
lessons.load_all()

# What one test may take of the machine, so that one submission cannot starve the grading of others:
# address space per process of the test (setrlimit; its MPI ranks each get as much), and the
# largest answer the child may send for one observation.
MEMORY_LIMIT = 8 * 2**30
FACTS_LIMIT = 64 * 2**20


def compile_functions(code: str, filename: str, namespace: dict[str, Any]) -> dict[str, str]:
    """Define the student's functions (course.instructor.verify_functions keeps only defs) in
    `namespace` without running any of their code: annotations stay text, not evaluated. Returns
    {name: source} of each."""
    flags = __future__.annotations.compiler_flag
    exec(compile(code, filename, "exec", flags=flags, dont_inherit=True), namespace)
    tree = ast.parse(code)
    return {
        node.name: ast.get_source_segment(code, node) or ""
        for node in tree.body
        if isinstance(node, ast.FunctionDef)
    }


def run(
    test: TestCell,
    trusted: Mapping[str, Any],
    student: dict[str, Any],
    sources: Mapping[str, str],
    report: int,
    timeout: float,
) -> NoReturn:
    """The body of a test's trusted process: fork the child, take the hidden part, run the cell
    with the student's functions as Remote handles, send a TestReply on `report`, exit.
    `trusted` holds the setup cell's names, `student` those and the student's functions."""
    requests_r, requests_w = os.pipe()
    replies_r, replies_w = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(report)
        _serve(requests_r, replies_w, student)
    os.close(requests_r)
    os.close(replies_w)
    channel = _Channel(child, requests_w, replies_r)
    test = TestCell(test.id, test.visible, _own_hidden_part(), test.points)
    namespace = dict(trusted)
    namespace.update({name: Remote(name, sources, channel.ask) for name in sources})
    known = set(mn_ranks.cached())
    outputs: list[Output] = []

    def too_long(signum: int, frame: Any) -> None:
        raise TimeoutError(_("this cell ran past the {timeout:g} s limit").format(timeout=timeout))

    signal.signal(signal.SIGALRM, too_long)
    signal.alarm(int(timeout))
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    visible_failed = True
    said: message.Record | None = None  # how the cell's error was made (course.contracts.message)
    try:
        value = _run_cell(test.visible, namespace)
        visible_failed = False
        if test.hidden.strip():
            value = _run_cell(test.hidden, namespace)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            outputs.append(
                {
                    "output_type": "execute_result",
                    "execution_count": 1,
                    "metadata": {},
                    "data": {"text/plain": repr(value)},
                }
            )
    except BaseException as e:  # the cell's error is its result, as in a kernel
        why = (
            _("this test used more than the {limit:g} GiB of memory a test may use").format(
                limit=MEMORY_LIMIT / 2**30
            )
            if isinstance(e, MemoryError)
            else str(e)
        )
        said = message.record_of(why) if isinstance(e, MemoryError) else message.of_exception(e)
        outputs.append(
            {
                "output_type": "error",
                "ename": type(e).__name__,
                "evalue": why,
                "traceback": traceback.format_exception_only(type(e), e),
            }
        )
    signal.alarm(0)
    channel.close()
    probes = {key: facts for key, facts in mn_ranks.cached().items() if key not in known}
    os.write(report, TestReply(outputs, visible_failed, probes, said).to_json().encode())
    os._exit(0)


def _run_cell(code: str, namespace: dict[str, Any]) -> object:
    """Run a cell as IPython would; the value of its last line when that is an expression."""
    tree = ast.parse(code)
    last = tree.body[-1] if tree.body else None
    if isinstance(last, ast.Expr):
        tree.body.pop()
    else:
        last = None
    exec(compile(tree, "<test cell>", "exec"), namespace)
    return (
        eval(compile(ast.Expression(last.value), "<test cell>", "eval"), namespace)
        if last
        else None
    )


def _own_hidden_part() -> str:
    """This test's hidden part, from the grader on stdin (verify_protocol.ASK); stdin is then
    /dev/null, so that nothing started later reads the grader's pipe."""
    line = b""
    while not line.endswith(b"\n"):
        chunk = os.read(0, 1)
        if not chunk:
            raise VerificationError("the grader gave no hidden part for this test", "")
        line += chunk
    _stdin_from_devnull()
    hidden = json.loads(line)
    if not isinstance(hidden, str):
        raise VerificationError("the grader's hidden part is not text", "")
    return hidden


def _stdin_from_devnull() -> None:
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)


class _Channel:
    """The trusted process's end of the channel to its child."""

    def __init__(self, child: int, requests: int, replies: int) -> None:
        self.child, self.requests, self.replies = child, requests, replies
        self.pending = b""

    def ask(self, observer: str, functions: list[str], inputs: dict[str, Any]) -> Any:
        """The child's facts of observer(*functions, **inputs); what the student's code raised
        there is raised here, under its own name."""
        token = secrets.token_hex(16)
        asked = Observation(observer, functions, inputs, token)
        os.write(self.requests, (asked.to_json() + "\n").encode())
        answer = self._line()
        try:
            observed = Observed.from_json(answer)
        except ProtocolError as e:
            raise ChannelBroken(
                # TRANSLATORS: {error} is what was wrong with the answer (the grader's English)
                _(
                    "the process running your functions answered with something else than facts "
                    "({error})"
                ).format(error=e.message)
            ) from None
        if observed.token != token:
            raise ChannelBroken(
                _("the process running your functions answered another question than the one asked")
            )
        if observed.raised is not None:
            raise _rebuilt(observed.raised)
        return observed.facts

    def _line(self) -> str:
        while b"\n" not in self.pending:
            chunk = os.read(self.replies, 1 << 16)
            if not chunk:
                raise ChannelBroken(
                    # TRANSLATORS: {how} is how it ended ("killed by SIGKILL", "exit status 1")
                    _("the process running your functions ended without an answer ({how})").format(
                        how=self._ended()
                    )
                )
            self.pending += chunk
            if len(self.pending) > FACTS_LIMIT:
                raise ChannelBroken(
                    _(
                        "the process running your functions answered with more than {limit} MiB"
                    ).format(limit=FACTS_LIMIT // 2**20)
                )
        line, self.pending = self.pending.split(b"\n", 1)
        return line.decode(errors="replace")

    def _ended(self) -> str:
        ended, status = os.waitpid(self.child, 0)
        self.child = 0
        code = os.waitstatus_to_exitcode(status)
        return ended_how(code)

    def close(self) -> None:
        """End the child and everything it started (its process group)."""
        for fd in (self.requests, self.replies):
            os.close(fd)
        if self.child:
            for kill in (os.killpg, os.kill):  # its group, and itself if it left the group
                try:
                    kill(self.child, signal.SIGKILL)
                except OSError:  # gone already
                    pass
            os.waitpid(self.child, 0)


def ended_how(code: int) -> str:
    """How a process with exit code `code` ended, in the student's language."""
    if code < 0:
        return _("killed by {signal}").format(signal=signal.Signals(-code).name)
    return _("exit status {status}").format(status=code)


class ChannelBroken(Exception):
    """The child broke off or garbled the channel: the test fails, as a cell whose kernel died."""


def _rebuilt(raised: dict[str, Any]) -> BaseException:
    """The student's exception, raised again here: the built-in class of that name, else a new
    class named after theirs (only its name and message cross, and the record of a kit's message,
    kept only where it renders to the very words the child sent: a record the student's code made
    up cannot put other words in the instructor's English column)."""
    name, said = raised["name"], raised["message"]
    try:
        rendered = i18n.render(raised["said"], i18n.language())
    except (ValueError, TypeError, AttributeError, KeyError, IndexError):  # not a record
        rendered = None
    text = message.rebuilt(said, raised["said"]) if rendered == said else said
    kind = getattr(builtins, name, None)
    error: BaseException
    try:
        if not (isinstance(kind, type) and issubclass(kind, Exception)):
            kind = type(name if name.isidentifier() else "StudentError", (Exception,), {})
        error = kind(text)
    except Exception:  # a built-in exception that wants other arguments
        error = Exception(f"{name}: {said}")
    for note in raised["notes"]:
        error.add_note(note)
    return error


def _serve(requests: int, replies: int, namespace: dict[str, Any]) -> NoReturn:
    """The child: answer each Observation on `requests` with an Observed on `replies`, running the
    observer on the student's functions in `namespace`, until the trusted process closes the
    channel."""
    os.setpgid(0, 0)  # one group, ended as one when the test is over
    _stdin_from_devnull()
    keep = {0, 1, 2, requests, replies}
    for entry in Path("/proc/self/fd").iterdir():
        fd = int(entry.name)
        if fd not in keep:
            try:
                os.close(fd)
            except OSError:  # the listing's own descriptor, closed already
                pass
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    freeze_kit()
    # What the answers are read and written with, made before any of the student's code runs and
    # held only in this frame's own variables: C objects (sealed_json) and builtins that no later
    # patch of json, of the protocol's classes, or of a function's closure reaches. What a function
    # changes of the kit's or the standard library's objects otherwise is flagged for the
    # instructor from its source (course.instructor.verify_flags).
    encode, scan, write, join = sealed_json.encoder(), sealed_json.scanner(), os.write, "".join
    leave, tidy = os._exit, inputs.remove_scratch
    observers = {
        f"{name}:{attr}": value
        for name, module in list(sys.modules.items())
        if name.startswith(OBSERVERS) and module is not None
        for attr, value in list(vars(module).items())
        if callable(value) and getattr(value, "__module__", None) == name
    }
    asked = os.fdopen(requests, "rb")
    for line in asked:
        token = ""
        try:
            request = scan(line.decode(errors="replace"), 0)[0]
            token = request["token"]
            observer = observers.get(request["observer"]) or _imported(request["observer"])
            functions = [namespace[function] for function in request["functions"]]
            found = observer(*functions, **request["inputs"])
            # Observed's fields
            answer = join(encode({"facts": found, "raised": None, "token": token}, 0))
        except BaseException as e:  # the student's exception is the observation's answer
            try:
                notes = [str(note) for note in getattr(e, "__notes__", [])]
                said = message.of_exception(e)  # a kit's message raised here keeps its record
                raised = {"name": type(e).__name__, "message": str(e), "notes": notes, "said": said}
                answer = join(encode({"facts": None, "raised": raised, "token": token}, 0))
            except BaseException:  # an exception that cannot be told: its class's name only
                raised = {"name": "StudentError", "message": "", "notes": [], "said": ""}
                answer = join(encode({"facts": None, "raised": raised, "token": token}, 0))
        write(replies, (answer + "\n").encode())
    tidy()  # the trainers' scratch folders: os._exit skips atexit
    leave(0)


def _imported(observer: str) -> Any:
    """An observer of a module the worker had not imported yet."""
    module, name = observer.split(":")
    return getattr(importlib.import_module(module), name)

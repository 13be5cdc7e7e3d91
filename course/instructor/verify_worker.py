"""The verifier's sandboxed worker: each test cell runs in processes of its own, forked from a
clean one.

`python -P -m course.instructor.verify_worker` (started by course.instructor.verify, inside the
sandbox) reads a Request on stdin and writes its Reply as the last line of stdout. For each
notebook it sets up one clean process: the setup cell, then the student's functions (defs only:
nothing of the student's runs). Each test cell, visible and hidden part, runs in a trusted process
forked from it, which judges, and that process's child, which runs the student's functions
(course.instructor.verify_test): one test cannot prepare another, and the student's code never
runs where the judgement is made.
"""

from __future__ import annotations

import json
import os
import select
import signal
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from course.contracts.message import Record, record_of
from course.i18n import _
from course.instructor import process_limit, verify_test
from course.instructor.verify_functions import digest, functions, solution_sources
from course.instructor.verify_protocol import (
    ASK,
    SANDBOXED,
    Output,
    Plan,
    ProtocolError,
    Reply,
    Request,
    TestCell,
    TestReply,
    Verdict,
    VerificationError,
)
from course.lessons.core import mn_ranks


def _undumpable() -> None:
    """Keep the tests' processes out of this one's /proc entries (its open pipes to the grader
    among them): Linux lets only a privileged process read those of an undumpable process, and the
    sandbox has no privileges."""
    import ctypes

    pr_set_dumpable = 4
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(pr_set_dumpable, 0, 0, 0, 0) != 0:
        raise VerificationError(
            f"the grader could not protect its pipes (prctl: errno {ctypes.get_errno()})", ""
        )


# The printed output of a test kept (the rest is read and dropped, so the test does not block on a
# full pipe).
OUTPUT_LIMIT = 2**20


def _run_test(
    notebook: str,
    test: TestCell,
    trusted: Mapping[str, Any],
    student: dict[str, Any],
    sources: Mapping[str, str],
    timeout: float,
) -> tuple[list[Output], list[str], bool, Record | None]:
    """Fork the trusted process of `test` (verify_test.run); (its outputs, notes, whether its
    visible part failed, the record of its error's message), with what the test printed as a stream
    output. The stage-3 probe's facts it gathered are kept for the notebook's next tests."""
    printed_r, printed_w = os.pipe()
    report_r, report_w = os.pipe()
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:
        os.close(printed_r)
        os.close(report_r)
        os.dup2(printed_w, 1)
        os.dup2(printed_w, 2)
        sys.stdout = open(1, "w", buffering=1, closefd=False)
        sys.stderr = sys.stdout
        verify_test.run(test, trusted, student, sources, report_w, timeout)
    os.close(printed_w)
    os.close(report_w)
    sys.stdout.write(json.dumps([ASK, notebook, test.id]) + "\n")  # for the child to read
    sys.stdout.flush()
    printed, reported, dropped = b"", b"", False
    # The child's own alarm ends it first; this deadline, when it swallows that.
    deadline = time.monotonic() + timeout + 15
    open_fds = {printed_r, report_r}
    status: int | None = None
    while open_fds and time.monotonic() < deadline:
        ready, _w, _x = select.select(list(open_fds), [], [], 0.2 if status is None else 0)
        if status is not None and not ready:
            break  # the test has ended and nothing it wrote is left to read
        for fd in ready:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                open_fds.discard(fd)
            elif fd == printed_r:
                kept = chunk[: max(0, OUTPUT_LIMIT - len(printed))]
                printed, dropped = printed + kept, dropped or len(kept) < len(chunk)
            else:
                reported += chunk
        if status is None:
            ended, code = os.waitpid(pid, os.WNOHANG)
            if ended:  # what it left running must not outlive it (nor hold its pipes open)
                status = code
                _end_strays()
    while status is None and time.monotonic() < deadline:  # its pipes closed: it is ending
        ended, code = os.waitpid(pid, os.WNOHANG)
        if ended:
            status = code
            _end_strays()
        else:
            time.sleep(0.02)
    timed_out = status is None
    if status is None:
        os.kill(pid, signal.SIGKILL)
        _pid, status = os.waitpid(pid, 0)
        _end_strays()
    for fd in open_fds:
        os.close(fd)
    if dropped:
        kept_note = _("[the grader kept the first {size} KiB of what this test printed]").format(
            size=OUTPUT_LIMIT // 2**10
        )
        printed += f"\n{kept_note}\n".encode()
    stream = (
        [{"output_type": "stream", "name": "stdout", "text": printed.decode(errors="replace")}]
        if printed
        else []
    )
    if timed_out:
        said = _("this cell ran past the {timeout:g} s limit").format(timeout=timeout)
        return (
            stream + [_error("TimeoutError", said)],
            ["timed out"],  # the instructor's flag: English
            True,
            record_of(said),
        )
    try:
        result = TestReply.from_json(reported.decode(errors="replace"))
    except ProtocolError:  # nothing, or not a reply: the test's own code may write to the pipe
        code = os.waitstatus_to_exitcode(status)
        why = f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"
        # TRANSLATORS: {how} is how it ended ("killed by SIGKILL", "exit status 1")
        said = _("the test's process ended without a result ({how})").format(
            how=verify_test.ended_how(code)
        )
        return (
            stream + [_error("TestProcessDied", said)],
            [f"the test's process ended without a result ({why})"],  # the instructor's: English
            True,
            record_of(said),
        )
    mn_ranks.remember(result.probes)
    return stream + result.outputs, [], result.visible_failed, result.said


def _end_strays() -> None:
    """In the sandbox, end every process a test left behind (a fork that outlived its test could
    otherwise reach a later test's pipes through /proc): all but its init, this process and its
    parents. Outside a sandbox the machine's other processes are not the test's: nothing is done."""
    if os.environ.get(SANDBOXED) != "1":
        return
    keep, pid = {1}, os.getpid()
    while pid > 1:
        keep.add(pid)
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            break
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) not in keep:
            try:
                os.kill(int(entry.name), signal.SIGKILL)
            except OSError:  # gone already
                pass
    while True:  # reap the ones that were this process's children
        try:
            if os.waitpid(-1, os.WNOHANG) == (0, 0):
                break
        except ChildProcessError:
            break


def _error(name: str, message: str) -> Output:
    """An error output of a test cell, as a kernel shows one."""
    return {"output_type": "error", "ename": name, "evalue": message, "traceback": []}


def _verify_notebook(plan: Plan, folder: Path, timeout: float) -> Verdict:
    path = folder / plan.notebook
    if not path.is_file():
        return Verdict(plan.notebook, "", missing=True)
    try:
        submitted = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise VerificationError(
            _("{notebook} is not a readable notebook (not JSON: {error})").format(
                notebook=plan.notebook, error=e
            ),
            "",
        ) from None
    sources = solution_sources(submitted, plan.solution_ids)
    verdict = Verdict(plan.notebook, digest(sources))
    code, notes = functions(sources)
    if notes:
        verdict.flags[""] = notes
    functions_file = (
        Path(tempfile.mkdtemp(prefix="functions-")) / f"{Path(plan.notebook).stem}_functions.py"
    )
    functions_file.write_text(code)
    started = time.monotonic()
    trusted: dict[str, Any] = {
        "__name__": f"notebook_{Path(plan.notebook).stem}",
        "__file__": str(functions_file),
    }
    with open(os.devnull, "w") as quiet:  # the setup cell's greeting is not a test's output
        stdout, sys.stdout = sys.stdout, quiet
        try:
            exec(compile(plan.setup, "<setup cell>", "exec"), trusted)
        finally:
            sys.stdout = stdout
    student = dict(trusted)
    # defs only: nothing of the student's runs
    function_sources = verify_test.compile_functions(code, str(functions_file), student)
    verdict.seconds[""] = round(time.monotonic() - started, 3)
    events = os.environ.get(process_limit.EVENTS)  # the submission's process group, if any
    memory = os.environ.get(process_limit.MEMORY_EVENTS)  # and its memory group
    for test in plan.tests:
        started = time.monotonic()
        refused = process_limit.refused(Path(events)) if events else 0
        ended = process_limit.ended_for_memory(Path(memory)) if memory else 0
        outputs, cell_notes, visible_failed, said = _run_test(
            plan.notebook, test, trusted, student, function_sources, timeout
        )
        limits = []  # the errors of the submission's limits, after the test's own
        if memory and process_limit.ended_for_memory(Path(memory)) > ended:
            size = process_limit.memory_limit_of(Path(memory)) / 2**30
            limits.append(
                (
                    "MemoryLimit",
                    _(
                        "this test's processes together held more than the {size:g} GiB of "
                        "memory a submission may hold at once: the grader ended one of them"
                    ).format(size=size),
                )
            )
            cell_notes.append(f"met the memory limit of {size:g} GiB (its processes together)")
        if events and process_limit.refused(Path(events)) > refused:
            limit = process_limit.limit_of(Path(events))
            limits.append(
                (
                    "ProcessLimit",
                    _(
                        "this test tried to run more than the {limit} processes at once that a "
                        "submission may run: the grader refused the rest"
                    ).format(limit=limit),
                )
            )
            cell_notes.append(f"met the limit of {limit} processes")  # the instructor's: English
        outputs += [_error(name, said_there) for name, said_there in limits]
        if said is None and limits:  # the first error is the one the instructor's column shows
            said = record_of(limits[0][1])
        if said is not None:
            verdict.said[test.id] = said
        verdict.seconds[test.id] = round(time.monotonic() - started, 3)
        verdict.outputs[test.id] = outputs
        if visible_failed:
            verdict.visible_failed.append(test.id)
        if cell_notes:
            verdict.flags[test.id] = cell_notes
    return verdict


def worker() -> None:
    """The sandboxed process: a Request from stdin, its Reply on stdout (the last line)."""
    _undumpable()
    request = Request.from_json(os.fdopen(0, "rb", buffering=0, closefd=False).readline().decode())
    os.environ["NBGRADER_EXECUTION"] = "autograde"  # as under nbgrader: jobs are not submitted
    folder = Path(request.folder)
    try:
        reply = Reply([_verify_notebook(plan, folder, request.timeout) for plan in request.plans])
    except VerificationError as e:
        reply = Reply(None, e.message)
    sys.stdout.write("\n" + reply.to_json() + "\n")


if __name__ == "__main__":
    worker()

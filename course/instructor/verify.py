"""The verifier: the points of every test cell come from here, not from a kernel the student's code
ran in.

For each submission, one process in the sandbox (course.instructor.sandbox) takes the student's
functions, and only those: the `def`s of the notebook's solution cells, compiled without running
anything the student wrote (decorators and computed defaults are refused, annotations stay text).
Everything else in those cells, such as code that patches the checks or the IPython shell, is left
out and reported. Each test cell, visible and hidden part, comes from the instructor's source
notebook and runs in a trusted process forked from that clean process, so one test cannot prepare
another. There the student's functions are only handles: the checks ask the test's child process to
run them and get plain facts back, which they judge against references they compute themselves
(course.instructor.verify_test). The outputs the trusted process produces are what nbgrader scores
(`VerifiedExecute` replaces nbgrader's Execute), so nbgrader keeps the gradebook, the feedback and
the export.

Each test's hidden part goes to that test's trusted process alone (verify_protocol.ASK), and each
submission's processes are limited (course.instructor.process_limit). What the student's code can
still do: forge the facts of its own observations, which only helps where forging them is as hard
as answering the exercise; the flags (names the exercises never need) point an instructor to it.

The verifier's parts: this module is the grader's side (start the sandboxed process, read its reply,
what to flag of a submission); verify_plan reads the source notebook into plans, verify_functions
takes the student's defs, verify_worker runs the tests in the sandbox, verify_test runs one test
in its two processes, and verify_protocol holds the typed messages between them.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from course import i18n, paths
from course.cluster import siteenv
from course.errors import GradingError
from course.i18n import N_
from course.instructor import nbgrader_cells, process_limit, sandbox
from course.instructor.verify_protocol import (
    ASK,
    SANDBOXED,
    Plan,
    ProtocolError,
    Reply,
    Request,
    Verdict,
    VerificationError,
)
from course.runtime.data import data_dir

# What of the grader's environment the worker gets: MPI, threads, Chainer, the GPUs.
_PASSED_ON = (
    "OMPI_",
    "PRTE_",
    "PMIX_",
    "OMP_",
    "OPENBLAS_",
    "MKL_",
    "CHAINER_",
    "CUDA_VISIBLE_DEVICES",
    "LD_LIBRARY_PATH",
)


def _run_worker(
    folder: Path,
    readable: list[Path],
    request: Request,
    env: dict[str, str],
    group: process_limit.ProcessLimit | None,
    budget: float,
    lang: str = i18n.DEFAULT,
) -> tuple[int, str, str]:
    """The worker's run for one submission, in the sandbox where it is on (seeing `folder` and
    `readable`), in `group` if any, within `budget` seconds for all its tests: (exit status, what it
    printed, its error output). The request goes without hidden parts; each test's is given when
    the worker asks for it (ASK), each once. What it says of the submission is in `lang`, the
    submission's language."""
    if group is not None:
        env.update(group.environment())
    argv = [sys.executable, "-P", "-m", "course.instructor.verify_worker"]
    if sandbox.enabled():
        env[SANDBOXED] = "1"
        argv = sandbox.command(argv, readable=[folder, *readable], workdir=folder, env=env)
        run_env = None
    else:
        run_env = {**os.environ, **env, "PYTHONSAFEPATH": "1"}
    if group is not None:
        argv = group.command(argv)
    parts = {(plan.notebook, test.id): test.hidden for plan in request.plans for test in plan.tests}
    shown = Request(
        request.folder,
        request.timeout,
        [
            Plan(p.notebook, p.setup, p.solution_ids, [replace(t, hidden="") for t in p.tests])
            for p in request.plans
        ],
    )
    # A submission whose every test runs to near its limit would hold the class for hours.
    budget = min(budget, 60 + len(parts) * (request.timeout + 20))
    with tempfile.TemporaryFile("w+") as errors:
        worker = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=errors,
            text=True,
            cwd=folder,
            env=run_env,
        )
        lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=_read_lines, args=(worker.stdout, lines), daemon=True).start()
        printed = []
        deadline = time.monotonic() + budget
        try:
            assert worker.stdin is not None
            worker.stdin.write(shown.to_json() + "\n")
            worker.stdin.flush()
            while (line := lines.get(timeout=max(0.0, deadline - time.monotonic()))) is not None:
                asked = _asked(line)
                if asked is None:
                    printed.append(line)
                    continue
                worker.stdin.write(json.dumps(parts.pop(asked)) + "\n")  # KeyError: asked twice
                worker.stdin.flush()
            status = worker.wait(timeout=max(1.0, deadline - time.monotonic()))
        except (queue.Empty, subprocess.TimeoutExpired):
            raise VerificationError(
                i18n.in_language(
                    lang, N_("the grader's process for this submission ran past {budget:g} s")
                ).format(budget=budget),
                "",
            ) from None
        except (KeyError, BrokenPipeError) as e:
            raise ProtocolError(
                f"the grader's process for this submission asked wrongly ({e!r})"
            ) from None
        finally:
            if worker.poll() is None:
                worker.kill()
                worker.wait()
        errors.seek(0)
        return status, "".join(printed), errors.read()


def _read_lines(stream: Any, lines: queue.Queue[str | None]) -> None:
    for line in stream:
        lines.put(line)
    lines.put(None)


def _asked(line: str) -> tuple[str, str] | None:
    """(notebook, test) when `line` is the worker's request for a hidden part, else None."""
    if not line.startswith(f'["{ASK}"'):
        return None
    _, notebook, test = json.loads(line)
    return notebook, test


# Seconds all the tests of one submission may take together (`course grade --submission-timeout`):
# a solved submission takes 15 s on 2 cores, one whose every test runs to its cell limit hours.
SUBMISSION_TIMEOUT = 900.0


def data_environment(course_root: Path) -> dict[str, str]:
    """The data set the setup cells load, as the instructor's jobs/site_env.sh (of `course_root`,
    else of the kit) and the grader's environment name it: never one a submission names (its own
    site_env.sh is read by the setup cell, which keeps what is set already)."""
    sites = [Path(course_root) / paths.JOBS_DIR / siteenv.FILE]
    sites.append(paths.KIT_ROOT / paths.JOBS_DIR / siteenv.FILE)
    found = next((site for site in sites if site.is_file()), None)
    settings = siteenv.SiteSettings.read(found) if found else siteenv.SiteSettings()
    root = (
        os.environ.get("CHAINER_DATASET_ROOT")
        or settings.dataset_root
        or str(Path.home() / ".chainer" / "dataset")
    )
    return {"COURSE_DATASET": settings.dataset or "auto", "CHAINER_DATASET_ROOT": root}


def verify(
    folder: Path,
    notebook_plans: list[Plan],
    *,
    grading_config: Path,
    timeout: float,
    lang: str = i18n.DEFAULT,
    course_root: Path | None = None,
    submission_timeout: float = SUBMISSION_TIMEOUT,
    memory_limit: int = process_limit.MAX_MEMORY,
) -> list[Verdict]:
    """Verify the submission in `folder` in its own sandboxed process, each test cell within
    `timeout` seconds and all of them within `submission_timeout`, its processes together within
    `memory_limit` bytes (where cgroups allow), its checks speaking `lang` (the edition's) and
    loading the data set `course_root`'s site names (default: the kit's); VerificationError when it
    gives no answer."""
    folder = Path(folder).resolve()
    env = {name: value for name, value in os.environ.items() if name.startswith(_PASSED_ON)}
    env.update(data_environment(course_root or paths.KIT_ROOT))
    env[i18n.VARIABLE] = lang
    request = Request(str(folder), timeout, notebook_plans)
    with tempfile.TemporaryDirectory(prefix="course-verify-") as tmp:
        config = Path(tmp) / "grading.toml"
        config.write_text(Path(grading_config).read_text())
        env["COURSE_GRADING_CONFIG"] = str(config)
        # course grade says once when there is none
        group, _ = process_limit.start(memory=memory_limit)
        try:
            data = data_dir(env["CHAINER_DATASET_ROOT"])  # only the data sets of that folder
            status, stdout, stderr = _run_worker(
                folder, [Path(tmp), data], request, env, group, submission_timeout, lang
            )
        finally:
            if group is not None:
                group.close()
    if status != 0 or not stdout.strip():
        # The submission's failure, in its language (the grader's own may differ): the parent
        # speaks for the submission here.
        how = (
            i18n.in_language(lang, N_("killed by {signal}")).format(
                signal=signal.Signals(-status).name
            )
            if status < 0
            else i18n.in_language(lang, N_("exit status {status}")).format(status=status)
        )
        lines = stderr.strip().splitlines()
        last = lines[-1][:200] if lines else i18n.in_language(lang, N_("no error message"))
        raise VerificationError(
            i18n.in_language(
                lang,
                # TRANSLATORS: {how} is how the process ended ("killed by SIGKILL", "exit status
                # 1"); {last} is the last line of its error output
                N_(
                    "the grader's process for this submission ended without a result "
                    "({how}: {last})"
                ),
            ).format(how=how, last=last),
            "",
        )
    try:
        reply = Reply.from_json(stdout.strip().splitlines()[-1])
    except ProtocolError as e:
        raise ProtocolError(
            f"the grader's process for this submission answered wrongly: {e}"
        ) from None
    if reply.verdicts is None:
        raise VerificationError(reply.failure, "")
    return reply.verdicts


def _failed(outputs: list[dict[str, Any]]) -> bool:
    return any(output.get("output_type") == "error" for output in outputs)


def disagreements(notebook: Path, verdict: Verdict) -> list[str]:
    """Test cells that the handed-in notebook shows as run and passing, and whose same (visible)
    part fails in the verifier's run."""
    try:
        cells = json.loads(Path(notebook).read_text())["cells"]
    except (OSError, ValueError, KeyError):
        return []
    found = []
    for cell in cells:
        grade_id = nbgrader_cells.grade_id(cell)
        if (
            grade_id in verdict.visible_failed
            and cell.get("execution_count")
            and not _failed(cell.get("outputs", []))
        ):
            found.append(grade_id)
    return found


def deleted_tests(notebook: Path, plan: Plan) -> list[str]:
    """The test cells of `plan` that the handed-in notebook does not have (deleted, or their
    nbgrader marks changed); nbgrader puts them back and grades the instructor's copy."""
    try:
        cells = json.loads(Path(notebook).read_text())["cells"]
    except (OSError, ValueError, KeyError):
        return []
    present = {nbgrader_cells.grade_id(cell) for cell in cells}
    return [test.id for test in plan.tests if test.id not in present]


DELETED = (
    "the test cell {test} is missing from the submission (deleted, or its nbgrader marks "
    "changed): graded on the instructor's copy, which nbgrader put back"
)


# Packages the notebooks import: a folder or module of one of these names in a submission would
# shadow it in a kernel started there (the verifier runs with Python's -P, which leaves the current
# folder out).
_SHADOWED = ("course", "chainer", "chainermn", "numpy", "cupy", "nbgrader", "IPython")


def shadowing(folder: Path) -> list[str]:
    """Notes on files in a submission named like a package the notebooks import."""
    return [
        f"the submission holds {entry.name}, which would shadow the kit's {entry.stem} package in "
        "a kernel "
        "(the grader ignores it)"
        for entry in sorted(Path(folder).iterdir())
        if entry.stem in _SHADOWED and (entry.is_dir() or entry.suffix == ".py")
    ]


def check_sandbox() -> None:
    """GradingError before anything is graded when the sandbox cannot run here."""
    if not sandbox.enabled():
        return
    run = subprocess.run(
        sandbox.command(["/bin/true"], readable=[], workdir=Path("/"), env={}),
        capture_output=True,
        text=True,
    )
    if run.returncode != 0:
        raise GradingError(
            f"the grading sandbox does not start here: {run.stderr.strip()[:300]}",
            f"grading needs unprivileged user namespaces or root for bubblewrap (or "
            f"{sandbox.SWITCH}=off, knowing the risk)",
        )

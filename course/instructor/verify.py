"""The verifier: the points of every test cell come from here, not from a kernel the student's code ran in.

For each submission, one process in the sandbox (course.instructor.sandbox) takes the student's
functions, and only those: the `def`s of the notebook's solution cells, compiled without running
anything the student wrote (decorators and computed defaults are refused). Everything else in those
cells, such as code that patches the checks or the IPython shell, is left out and reported. Each test
cell, visible and hidden part, comes from the instructor's source notebook and runs in a child process
forked from that clean process, so one test cannot prepare another; a test that changes the kit's code
while it runs gets no points. The outputs it produces are what nbgrader scores (`VerifiedExecute`
replaces nbgrader's Execute), so nbgrader keeps the gradebook, the feedback and the export.

Not defended: code that runs inside a test can read that test's own inputs, and can write to the
pipe the child reports on; the flags below (names the exercises never need) point an instructor to it.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path

from course import paths
from course.errors import CourseError, GradingError

SOLUTION_MARKERS = ("### BEGIN SOLUTION", "### END SOLUTION")
HIDDEN_MARKERS = ("### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS")
# nbgrader's markers of hidden tests that its feedback leaves out too
ALWAYS_HIDDEN_MARKERS = ("### BEGIN ALWAYS HIDDEN TESTS", "### END ALWAYS HIDDEN TESTS")
CELL_TIMEOUT = 180.0  # seconds a test cell may run (VerifiedExecute.timeout in nbgrader_config.py)
# Names a solution never needs; where one appears the instructor is told (not a penalty by itself).
SUSPICIOUS = {
    "get_ipython",
    "sys",
    "gc",
    "inspect",
    "ctypes",
    "builtins",
    "__builtins__",
    "importlib",
    "os",
    "subprocess",
    "signal",
    "socket",
    "setattr",
    "delattr",
    "globals",
    "locals",
    "vars",
    "exec",
    "eval",
    "compile",
    "__import__",
    "open",
    "__globals__",
    "__code__",
    "__dict__",
    "_getframe",
    "modules",
}
_KIT_PREFIXES = ("course", "chainer", "chainermn", "numpy", "builtins")


class VerificationError(CourseError):
    """A submission the verifier could not grade (its process was killed, or ran past its time)."""


@dataclass
class TestCell:
    id: str
    visible: str  # what the student's notebook shows
    hidden: str  # between the hidden-test markers (what nbgrader adds when it grades)
    points: float


def _split(source: str) -> tuple[str, str]:
    """(visible part, hidden part) of a test cell's source."""
    visible, hidden, inside = [], [], False
    for line in source.splitlines():
        if line.strip() in HIDDEN_MARKERS + ALWAYS_HIDDEN_MARKERS:
            inside = line.strip() in (HIDDEN_MARKERS[0], ALWAYS_HIDDEN_MARKERS[0])
            continue
        (hidden if inside else visible).append(line)
    return "\n".join(visible), "\n".join(hidden)


@dataclass
class Plan:
    """What the instructor's source notebook says about one notebook: how to set up, what to test."""

    notebook: str  # file name, e.g. 01_single_gpu.ipynb
    setup: str
    solution_ids: list[str]
    tests: list[TestCell]


@dataclass
class Verdict:
    """What one notebook of one submission got: outputs per test cell, and what the instructor should know."""

    notebook: str
    digest: str  # of the solution cells verified: nbgrader's copy must have the same
    outputs: dict[str, list[dict]] = field(default_factory=dict)
    flags: dict[str, list[str]] = field(
        default_factory=dict
    )  # grade_id ("" for the notebook) -> notes
    missing: bool = False
    visible_failed: list[str] = field(
        default_factory=list
    )  # test cells whose part the student sees failed
    seconds: dict[str, float] = field(default_factory=dict)  # per test cell, and "" for setting up


def plans(source: Path) -> list[Plan]:
    """The plans of every notebook of the source (instructor's) assignment folder."""
    found = []
    for path in sorted(Path(source).glob("*.ipynb")):
        cells = json.loads(path.read_text())["cells"]
        meta = [(cell, cell.get("metadata", {}).get("nbgrader", {})) for cell in cells]
        setup = next("".join(cell["source"]) for cell in cells if cell.get("id") == "setup")
        found.append(
            Plan(
                path.name,
                setup,
                [
                    m["grade_id"]
                    for cell, m in meta
                    if cell["cell_type"] == "code" and m.get("solution")
                ],
                [
                    TestCell(m["grade_id"], *_split("".join(cell["source"])), m["points"])
                    for cell, m in meta
                    if cell["cell_type"] == "code" and m.get("grade")
                ],
            )
        )
    return found


def solution_sources(notebook: dict, solution_ids: list[str]) -> dict[str, str]:
    """{grade_id: source} of a submitted notebook's solution cells (those the source notebook has)."""
    found = {}
    for cell in notebook.get("cells", []):
        grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if cell.get("cell_type") == "code" and grade_id in solution_ids:
            found[grade_id] = (
                "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            )
    return found


def digest(sources: dict[str, str]) -> str:
    return hashlib.sha256(json.dumps(sources, sort_keys=True).encode()).hexdigest()


# --- what the student wrote: the defs, and what else is there ------------------------------------


def _names(node: ast.AST) -> set[str]:
    found = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            found.add(sub.id)
        elif isinstance(sub, ast.Attribute):
            found.add(sub.attr)
        elif isinstance(sub, (ast.Import, ast.ImportFrom)):
            found |= {alias.name.split(".")[0] for alias in sub.names}
            if isinstance(sub, ast.ImportFrom) and sub.module:
                found.add(sub.module.split(".")[0])
    return found


def functions(sources: dict[str, str]) -> tuple[str, list[str]]:
    """(the source of the student's defs, notes on what was left out or looks wrong)."""
    kept, notes = [], []
    for grade_id, source in sources.items():
        try:
            tree = ast.parse(source)
        except SyntaxError as e:
            notes.append(
                f"{grade_id}: a syntax error at line {e.lineno} ({e.msg}): its functions are missing"
            )
            continue
        lines = source.splitlines(keepends=True)
        for node in tree.body:
            if not isinstance(node, ast.FunctionDef):
                if not isinstance(node, (ast.Import, ast.ImportFrom, ast.Pass)) and not (
                    isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
                ):
                    notes.append(
                        f"{grade_id}: line {node.lineno} runs code outside a function (left out: only "
                        f"the functions are graded){_uses(node)}"
                    )
                continue
            if node.decorator_list:
                notes.append(
                    f"{grade_id}: {node.name} has a decorator, which would run code of its own: left out"
                )
                continue
            defaults = [d for d in [*node.args.defaults, *node.args.kw_defaults] if d is not None]
            if not all(_literal(d) for d in defaults):
                notes.append(
                    f"{grade_id}: {node.name} computes a default value, which would run code: left out"
                )
                continue
            suspicious = _names(node) & SUSPICIOUS
            if suspicious:
                notes.append(
                    f"{grade_id}: {node.name} uses {', '.join(sorted(suspicious))}, which the exercise "
                    "never needs: read it"
                )
            kept.append("".join(lines[node.lineno - 1 : node.end_lineno]))
    return "\n\n".join(kept) + "\n", notes


def _literal(node: ast.AST) -> bool:
    try:
        ast.literal_eval(node)
    except ValueError:
        return False
    return True


def _uses(node: ast.AST) -> str:
    suspicious = _names(node) & SUSPICIOUS
    return f"; it uses {', '.join(sorted(suspicious))}" if suspicious else ""


# --- inside the sandbox: the clean process and one child per test --------------------------------


def _kit_state() -> dict[tuple[str, str], int]:
    """Identity of every function, class and module the kit and its libraries expose (and of class members)."""
    import types

    kinds = (
        types.FunctionType,
        types.BuiltinFunctionType,
        type,
        types.ModuleType,
        types.MethodType,
        staticmethod,
        classmethod,
        property,
    )
    state = {}
    for name, module in list(sys.modules.items()):
        if module is None or not name.startswith(_KIT_PREFIXES):
            continue
        for attr, value in list(vars(module).items()):
            if isinstance(value, kinds):
                state[(name, attr)] = id(value)
                if isinstance(value, type) and getattr(value, "__module__", None) == name:
                    for member, inner in list(vars(value).items()):
                        if isinstance(inner, kinds):
                            state[(f"{name}.{attr}", member)] = id(inner)
    return state


def _changed(before: dict[tuple[str, str], int]) -> list[str]:
    after = _kit_state()
    return [
        f"{owner}.{name}"
        for (owner, name), ident in before.items()
        if after.get((owner, name)) != ident
    ]


def _run_cell(code: str, namespace: dict) -> object:
    """Run a cell as IPython would; the value of its last line when that is an expression."""
    tree = ast.parse(code)
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    exec(compile(tree, "<test cell>", "exec"), namespace)
    return (
        eval(compile(ast.Expression(last.value), "<test cell>", "eval"), namespace)
        if last
        else None
    )


def _child(test: TestCell, namespace: dict, before: dict, report: int, timeout: float) -> None:
    """The body of a test's child process: run it, send its outputs on `report`, exit."""
    outputs: list[dict] = []

    def too_long(signum: int, frame) -> None:
        raise TimeoutError(f"this cell ran past the {timeout:g} s limit")

    signal.signal(signal.SIGALRM, too_long)
    signal.alarm(int(timeout))
    visible_failed = True
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
        outputs.append(
            {
                "output_type": "error",
                "ename": type(e).__name__,
                "evalue": str(e),
                "traceback": traceback.format_exception_only(type(e), e),
            }
        )
    signal.alarm(0)
    changed = _changed(before)
    if changed:
        outputs.append(
            {
                "output_type": "error",
                "ename": "Tampering",
                "evalue": f"the kit's code changed while this test ran ({', '.join(changed[:3])}): no points",
                "traceback": [],
            }
        )
    os.write(
        report,
        json.dumps(
            {"outputs": outputs, "tampered": changed[:3], "visible_failed": visible_failed}
        ).encode(),
    )
    os._exit(0)


def _run_test(
    test: TestCell, namespace: dict, before: dict, timeout: float
) -> tuple[list[dict], list[str], bool]:
    """Fork a child for `test`; (its outputs, notes, whether its visible part failed), with what it printed as
    a stream output."""
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
        _child(test, namespace, before, report_w, timeout)
    os.close(printed_w)
    os.close(report_w)
    printed, reported = b"", b""
    deadline = (
        time.monotonic() + timeout + 15
    )  # the child's own alarm first; this when it swallows that
    open_fds = {printed_r, report_r}
    while open_fds and time.monotonic() < deadline:
        ready, _, _ = select.select(list(open_fds), [], [], 1.0)
        for fd in ready:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                open_fds.discard(fd)
                os.close(fd)
            elif fd == printed_r:
                printed += chunk
            else:
                reported += chunk
    timed_out = bool(open_fds)
    if timed_out:
        os.kill(pid, signal.SIGKILL)
        for fd in open_fds:
            os.close(fd)
    _, status = os.waitpid(pid, 0)
    stream = (
        [{"output_type": "stream", "name": "stdout", "text": printed.decode(errors="replace")}]
        if printed
        else []
    )
    if timed_out:
        return (
            stream + [_error("TimeoutError", f"this cell ran past the {timeout:g} s limit")],
            ["timed out"],
            True,
        )
    try:
        result = json.loads(reported)
    except ValueError:
        why = (
            f"killed by {signal.Signals(-os.waitstatus_to_exitcode(status)).name}"
            if os.waitstatus_to_exitcode(status) < 0
            else f"exit status {os.waitstatus_to_exitcode(status)}"
        )
        return (
            stream
            + [_error("TestProcessDied", f"the test's process ended without a result ({why})")],
            [f"the test's process ended without a result ({why})"],
            True,
        )
    tampered = result["tampered"]
    notes = (
        [f"possible tampering: {', '.join(tampered)} changed during the test"] if tampered else []
    )
    return stream + result["outputs"], notes, result["visible_failed"]


def _error(name: str, message: str) -> dict:
    return {"output_type": "error", "ename": name, "evalue": message, "traceback": []}


def _verify_notebook(plan: Plan, folder: Path, timeout: float) -> Verdict:
    path = folder / plan.notebook
    if not path.is_file():
        return Verdict(plan.notebook, "", missing=True)
    try:
        submitted = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise VerificationError(
            f"{plan.notebook} is not a readable notebook (not JSON: {e})", ""
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
    namespace = {
        "__name__": f"notebook_{Path(plan.notebook).stem}",
        "__file__": str(functions_file),
    }
    with open(os.devnull, "w") as quiet:  # the setup cell's greeting is not a test's output
        stdout, sys.stdout = sys.stdout, quiet
        try:
            exec(compile(plan.setup, "<setup cell>", "exec"), namespace)
        finally:
            sys.stdout = stdout
    exec(
        compile(code, str(functions_file), "exec"), namespace
    )  # defs only: nothing of the student's runs
    before = _kit_state()
    verdict.seconds[""] = round(time.monotonic() - started, 3)
    for test in plan.tests:
        started = time.monotonic()
        outputs, cell_notes, visible_failed = _run_test(test, namespace, before, timeout)
        verdict.seconds[test.id] = round(time.monotonic() - started, 3)
        verdict.outputs[test.id] = outputs
        if visible_failed:
            verdict.visible_failed.append(test.id)
        if cell_notes:
            verdict.flags[test.id] = cell_notes
    return verdict


def worker() -> None:
    """The sandboxed process: plans from stdin, the verdicts as JSON on stdout (the last line)."""
    request = json.loads(sys.stdin.read())
    os.environ["NBGRADER_EXECUTION"] = "autograde"  # as under nbgrader: jobs are not submitted
    # One run of the stage-3 ranks serves all the checks of a notebook, each in its own child process.
    os.environ["COURSE_PROBE_CACHE"] = tempfile.mkdtemp(prefix="probe-cache-")
    folder, timeout = Path(request["folder"]), request["timeout"]
    verdicts = []
    try:
        for plan_data in request["plans"]:
            plan = Plan(**{**plan_data, "tests": [TestCell(**t) for t in plan_data["tests"]]})
            verdicts.append(asdict(_verify_notebook(plan, folder, timeout)))
    except VerificationError as e:
        sys.stdout.write("\n" + json.dumps({"failure": e.message}) + "\n")
        return
    sys.stdout.write("\n" + json.dumps({"verdicts": verdicts}) + "\n")


# --- outside: one sandboxed process per submission -------------------------------------------------


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


def verify(
    folder: Path,
    notebook_plans: list[Plan],
    *,
    hidden: list[Path],
    grading_config: Path,
    timeout: float = CELL_TIMEOUT,
) -> list[Verdict]:
    """Verify the submission in `folder` in its own sandboxed process; VerificationError when it gives no answer."""
    from course.instructor import sandbox

    folder = Path(folder).resolve()
    env = {name: value for name, value in os.environ.items() if name.startswith(_PASSED_ON)}
    request = {
        "folder": str(folder),
        "timeout": timeout,
        "plans": [asdict(plan) for plan in notebook_plans],
    }
    with tempfile.TemporaryDirectory(prefix="course-verify-") as tmp:
        config = Path(tmp) / "grading.toml"
        config.write_text(Path(grading_config).read_text())
        env["COURSE_GRADING_CONFIG"] = str(config)
        argv = [sys.executable, "-P", "-m", "course.instructor.verify"]
        if sandbox.enabled():
            argv = sandbox.command(
                argv, readable=[folder, Path(tmp)], hidden=hidden, workdir=folder, env=env
            )
            run_env = None
        else:
            run_env = {**os.environ, **env, "PYTHONSAFEPATH": "1"}
        budget = 60 + sum(len(plan.tests) for plan in notebook_plans) * (timeout + 20)
        try:
            run = subprocess.run(
                argv,
                input=json.dumps(request),
                capture_output=True,
                text=True,
                cwd=folder,
                env=run_env,
                timeout=budget,
            )
        except subprocess.TimeoutExpired:
            raise VerificationError(
                f"the grader's process for this submission ran past {budget:g} s", ""
            ) from None
    if run.returncode != 0 or not run.stdout.strip():
        how = (
            f"killed by {signal.Signals(-run.returncode).name}"
            if run.returncode < 0
            else f"exit status {run.returncode}"
        )
        last = (run.stderr.strip().splitlines() or ["no error message"])[-1][:200]
        raise VerificationError(
            f"the grader's process for this submission ended without a result ({how}: {last})", ""
        )
    answer = json.loads(run.stdout.strip().splitlines()[-1])
    if "failure" in answer:
        raise VerificationError(answer["failure"], "")
    return [Verdict(**data) for data in answer["verdicts"]]


def _failed(outputs: list[dict]) -> bool:
    return any(output.get("output_type") == "error" for output in outputs)


def disagreements(notebook: Path, verdict: Verdict) -> list[str]:
    """Test cells that the handed-in notebook shows as run and passing, and whose same (visible) part fails
    in the verifier's run."""
    try:
        cells = json.loads(Path(notebook).read_text())["cells"]
    except (OSError, ValueError, KeyError):
        return []
    found = []
    for cell in cells:
        grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if (
            grade_id in verdict.visible_failed
            and cell.get("execution_count")
            and not _failed(cell.get("outputs", []))
        ):
            found.append(grade_id)
    return found


# Packages the notebooks import: a folder or module of one of these names in a submission would shadow it
# in a kernel started there (the verifier runs with Python's -P, which leaves the current folder out).
_SHADOWED = ("course", "chainer", "chainermn", "numpy", "cupy", "nbgrader", "IPython")


def shadowing(folder: Path) -> list[str]:
    """Notes on files in a submission named like a package the notebooks import."""
    return [
        f"the submission holds {entry.name}, which would shadow the kit's {entry.stem} package in a kernel "
        "(the grader ignores it)"
        for entry in sorted(Path(folder).iterdir())
        if entry.stem in _SHADOWED and (entry.is_dir() or entry.suffix == ".py")
    ]


def private_paths(root: Path, submitted: Path) -> list[Path]:
    """What a student's code must not see: the course folder and every submission."""
    return [Path(root), Path(submitted), paths.KIT_ROOT]


def check_sandbox() -> None:
    """GradingError before anything is graded when the sandbox cannot run here."""
    from course.instructor import sandbox

    if not sandbox.enabled():
        return
    run = subprocess.run(
        sandbox.command(["/bin/true"], readable=[], hidden=[], workdir=Path("/"), env={}),
        capture_output=True,
        text=True,
    )
    if run.returncode != 0:
        raise GradingError(
            f"the grading sandbox does not start here: {run.stderr.strip()[:300]}",
            f"grading needs unprivileged user namespaces or root for bubblewrap (or "
            f"{sandbox.SWITCH}=off, knowing the risk)",
        )


if __name__ == "__main__":
    worker()

"""What several test files share: paths, data builders, checks (fixtures: tests/conftest.py).

A test file imports these from here, never from another test file, so that each test file can be
moved, split or run alone.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import nbformat
import pytest

from course.cluster import siteenv, sites
from course.contracts import jobend, joblog, prediction, results, stages
from course.notebook import checks, scripts
from course.notebook.checks import CheckFailed
from tests import apt
from tests.solutions import SOLUTIONS, solution_functions, solution_source

# The automatic points a solved student's CPU run earns where every tier it can reach is granted
# (test_grading's grading.toml): all but stage 2's throughput and prediction (2 + 2), which need two
# GPUs.
SOLVED_ON_CPU = 60


def core_cases(cases: Any, core: set[str] | frozenset[str]) -> list:
    """Parameters for `cases` (their names), each not in `core` marked extended: make test runs
    the core cases, make test-extended the others (pyproject.toml's markers)."""
    unknown = set(core) - set(cases)
    assert not unknown, f"no such case: {sorted(unknown)}"
    return [
        pytest.param(case, marks=() if case in core else pytest.mark.extended) for case in cases
    ]


def default_stop_signals() -> None:
    """A child's preexec_fn: SIGINT, SIGHUP and SIGTERM at their defaults, as a terminal or a
    scheduler starts a program. A test run started in the background (`make test &`, nohup)
    ignores SIGINT and SIGHUP, and a child that inherits an ignored signal can neither trap nor
    die of it (bash), nor see Ctrl-C (Python)."""
    for stop in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
        signal.signal(stop, signal.SIG_DFL)


def until(condition, timeout: float = 20.0, what: str = "the condition", every: float = 0.05):
    """Poll `condition` until it returns something true, and return that; fail after `timeout`
    seconds (a wide margin: a busy machine is no reason to fail)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        time.sleep(every)
    raise AssertionError(f"{what} did not happen within {timeout} s")


ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
NOTEBOOKS = sorted(p.name for p in SOLUTIONS.glob("*.ipynb"))  # the assignment's, by file name


def until_first_job(folder: Path, notebooks: list[str], env: dict[str, str]) -> None:
    """Run `notebooks[0]` of `folder` whole, as its student would (its one job: a stage-1 run,
    which notebook 07's resource request measures), then each other one up to the cell that
    submits its first job (a notebook without a job whole): their checks pass and their scripts
    are written; no other job runs."""
    from course.instructor import demo

    for name in notebooks:
        path = folder / name
        if name != notebooks[0]:
            notebook = nbformat.read(path, as_version=4)
            first = next(
                (i for i, cell in enumerate(notebook.cells) if "course.submit(" in cell.source),
                len(notebook.cells),
            )
            notebook.cells = notebook.cells[:first]
            path = folder / f".until-first-job-{name}"
            nbformat.write(notebook, path)
        try:
            errors = demo.run_notebook(path, env=env)
        finally:
            if path.name != name:
                path.unlink()
        assert not errors, f"{name}: {errors}"


def bubblewrap() -> bool:
    """Whether the grading sandbox can run here; installs Debian's bubblewrap where root and apt-get
    can."""
    if not shutil.which("bwrap") and apt.can_install():
        apt.install("bubblewrap", timeout=600)
    if not shutil.which("bwrap"):
        return False
    # Lazy: only the tests that grade need the verifier.
    from course.errors import GradingError
    from course.instructor import verify

    try:
        verify.check_sandbox()
    except GradingError:
        return False
    return True


def python(
    *arguments: str,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    timeout: float | None = None,
) -> subprocess.CompletedProcess[str]:
    """`python ARGUMENTS` with this interpreter, run to its end, its output captured as text."""
    return subprocess.run(
        [PYTHON, *arguments], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )


def python_ok(*arguments: str, **options: Any) -> str:
    """What `python ARGUMENTS` (`options`: python's) prints; the test fails with all its output
    where it does not exit 0."""
    run = python(*arguments, **options)
    assert run.returncode == 0, run.stdout + run.stderr
    return run.stdout


# --- a notebook's namespace, from its cells ---------------------------------------------------


def module_from_file(path: Path, name: str) -> ModuleType:
    """The module `name` run from `path`: a real file, so that inspect.getsource finds its
    functions."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# The notebooks' setup cell: what a student's functions see in the notebook.
NOTEBOOK_SETUP = """\
import chainer
import chainer.functions as F
import chainer.links as L
import numpy as np
from chainer import training
from chainer.training import extensions
import chainermn

import course
"""


def notebook(folder: Path, cells: str, name: str = "notebook") -> ModuleType:
    """A notebook's namespace: its setup cell and `cells`, run from a real file (so their source can
    be read)."""
    path = folder / f"{name}.py"
    path.write_text(NOTEBOOK_SETUP + cells)
    return module_from_file(path, f"{name}_{folder.name}")


def functions(module: ModuleType, stage: stages.Stage) -> list:
    """The stage's functions, as the notebook defines them, in the stage's order."""
    return [getattr(module, name) for name in stage.functions]


# What the notebooks' setup cells import for the students' functions, as the checks' tests
# load them (chainermn for stage 3 only).
CHECKED_NOTEBOOK_SETUP = """\
import math

import chainer
import chainer.links as L
import numpy as np
from chainer import training
from chainer.training import extensions
{extra}
import course

"""


def notebook_module(folder: Path, stage_name: str, **replaced: str) -> ModuleType:
    """The stage's solution functions, some `replaced` by other source, in one module of a real file
    (so that inspect.getsource finds them), as a notebook's namespace holds them."""
    sources = {**solution_functions(stage_name), **replaced}
    path = folder / f"{stage_name}_notebook.py"
    extra = "import chainermn\n" if stage_name == "multi_node" else ""
    path.write_text(
        CHECKED_NOTEBOOK_SETUP.format(extra=extra)
        + "".join(f"\n\n{source}" for source in sources.values())
    )
    return module_from_file(path, f"{stage_name}_{folder.name}")


def replaced_once(source: str, old: str, new: str) -> str:
    """`source` with `old`, which it must hold exactly once, replaced by `new`."""
    assert source.count(old) == 1, f"{old!r} is not once in\n{source}"
    return source.replace(old, new)


# The graded cells of notebook 03 that check the stage's functions on their own, in order.
STAGE_3_CELLS = (
    "check_communicator",
    "check_device_binding",
    "check_scatter",
    "check_optimizer",
    "check_learning_rate_schedule",
    "check_trainer",
    "check_resource_request",
    "check_run_lines",
)


def check_cells(stage_name: str) -> dict[str, str]:
    """{grade_id: source} of the notebook's graded cells that check the stage's functions on their
    own, hidden tests included (the allreduce exercise's checks read job outputs:
    tests/test_allreduce_checks.py has them; test_scaling_checks.py has the derivations')."""
    from tests.solutions import notebooks_of

    return {
        cell.metadata.nbgrader.grade_id: cell.source
        for name in notebooks_of(stage_name, ("job_functions",))
        for cell in nbformat.read(SOLUTIONS / name, as_version=4).cells
        if cell.metadata.get("nbgrader", {}).get("grade")
        and cell.source.startswith("checks.")
        and not cell.source.startswith(("checks.allreduce.", "checks.scaling."))
    }


def run_stage_3_checks(module: ModuleType, handles: bool = False) -> dict[str, str]:
    """{grade_id: its CheckFailed message} of the check cells that fail, each run as nbgrader runs
    it; with `handles`, on Remote handles of the stage's functions (tests.remote), as the grader's
    checks get them."""
    from tests.remote import remote

    namespace = {"checks": checks, **vars(module)}
    if handles:
        namespace.update({name: remote(namespace[name]) for name in stages.MULTI_NODE.functions})
    failed = {}
    for grade_id, source in check_cells("multi_node").items():
        try:
            exec(source, dict(namespace))
        except CheckFailed as e:
            failed[grade_id] = str(e)
    return failed


# --- a student's folder and the outputs of jobs, as a job leaves them ---------------------------


def student_folder(tmp_path: Path, name: str, stage: str = "single_gpu") -> Path:
    """A student's folder: the kit's job scripts (local profile) and the stage's script from the
    solutions."""
    folder = tmp_path / name
    folder.mkdir()
    shutil.copytree(ROOT / "jobs", folder / "jobs")
    module = notebook(tmp_path, solution_source(stage), name=f"solved_{name}")
    scripts.write_script(stage, functions(module, stages.get(stage)), folder)
    (folder / "stage").write_text(stage)
    return folder


def make_run(
    folder: Path,
    stage: str,
    number: int,
    images_per_sec: float,
    workers: int = 1,
    *,
    device_kind="gpu",
    width=16,
    communicator=None,
    allreduce=None,
    complete=True,
    logged_images_per_sec=None,
    logged_workers=None,
    log=True,
    age=0,
    wall_seconds=None,
    fields=None,
    predicted: Any = ...,
) -> tuple[Path, str]:
    """A finished run of `stage` as job <number>.local: its results file (with `fields` added or
    replaced) and, with log=True, its job log. `predicted`: the prediction submitted with the job
    (course.contracts.prediction: made_at and answers), None for a job submitted without one; left
    out, the run is one of a kit before predictions (no field, no log line)."""
    job = stages.get(stage)
    job_id = f"{number}.local"
    path = folder / results.RUNS_DIR / f"{stage}-{job_id}" / results.FILENAME
    devices = ["@cupy:0" if device_kind == "gpu" else "@numpy"] * workers
    record = {
        "stage": stage,
        "workers": workers,
        "hosts": ["n1"] * workers,
        "devices": devices,
        "job": {"id": job_id, "name": job.job_script, "scheduler": "local"},
        "script": {"name": job.script, "sha256": None},
        "device_kind": device_kind,
        "gpu_model": "Tesla P100" if device_kind == "gpu" else None,
        "communicator": communicator,
        "allreduce": allreduce,
        "model": {"name": "vgg", "width": width},
        "batch_size": {"per_worker": 32, "total": 32 * workers},
        "dataset": {"name": "synthetic"},
        "complete": complete,
        "error": None if complete else "KeyboardInterrupt: ",
        "throughput": {"images_per_sec": images_per_sec, "std": 1.0, "counted_iterations": 40},
        "log": [{"epoch": 1, "validation/main/accuracy": 0.3}],
    }
    if wall_seconds is not None:
        record["wall_seconds"] = wall_seconds
    if predicted is not ...:
        record["prediction"] = predicted
    record.update(fields or {})
    digest = results.write(path, record)
    if age:  # older than the runs made after it, as results.find orders them
        os.utime(path, (path.stat().st_mtime - age,) * 2)
    if log:
        header = joblog.RunHeader(
            stage=stage,
            job_id=job_id,
            scheduler="local",
            workers=logged_workers or workers,
            hosts=record["hosts"],
            devices=devices,
            batch_per_worker=32,
            learning_rate=0.05,
            seed=0,
            communicator=communicator,
            allreduce=allreduce,
            gpu_model=record["gpu_model"],
        )
        rate = images_per_sec if logged_images_per_sec is None else logged_images_per_sec
        launched = (
            [
                joblog.launch_line(job_id, "local", [("n1", workers)]),
                joblog.launch_command_line(["mpiexec", "-n", str(workers), job.script]),
            ]
            if stage == stages.MULTI_NODE.name
            else []
        )
        shown = None if predicted in (None, ...) else prediction.canonical(predicted)
        lines = [
            *launched,
            header.format(),
            *([] if predicted is ... else [joblog.prediction_line(shown)]),
            "epoch  main/loss",
            joblog.throughput_line(rate, 40, 5, 3),
            joblog.results_line(path.relative_to(folder), digest),
            jobend.end_line(job_id, 0, datetime.now(UTC)),
        ]
        (folder / joblog.log_name(job.job_script, number)).write_text("\n".join(lines) + "\n")
    return path, digest


def local_site(folder: Path, gpus_per_node: int = 0) -> Path:
    """`folder` with a copy of sites/local.toml (`gpus_per_node` GPUs a node) applied to its
    jobs/site_env.sh."""
    text = (
        (ROOT / "sites" / "local.toml")
        .read_text()
        .replace("gpus_per_node = 0", f"gpus_per_node = {gpus_per_node}")
    )
    (folder / "local.toml").write_text(text)
    (folder / "jobs").mkdir()
    (folder / "jobs" / siteenv.FILE).write_text(
        siteenv.SiteSettings.from_profile(sites.load_profile(str(folder / "local.toml"))).to_shell()
    )
    return folder


def plan_runs(plan: list) -> list[tuple]:
    """(nodes, ranks per node, communicator, allreduce, lr rule) of each run of a plan."""
    return [(r.nodes, r.per_node, r.communicator, r.allreduce, r.lr_rule) for r in plan]

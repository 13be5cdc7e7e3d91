"""Shared fixtures and the unit tier's guard. Tests use their own data folder, never ~/.chainer.

The tiers (markers registered in pyproject.toml; the Makefile runs them):
  unit      no MPI, jobs, nbgrader apps, Slurm or browser: neither `integration` nor `slow`
  fast      the unit tier and the quick tests that start those: not `slow`
  test      everything but `extended` (make test: every capability once, within its budget)
  extended  the other cases of what make test covers (make test-extended; make test-all: both)
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from course import gpu
from tests import apt, pbs_cluster, slurm_cluster
from tests.helpers import NOTEBOOKS, PYTHON, ROOT, until_first_job

# One BLAS thread per process, as in the course (a CPU device is one core).
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")


# Under pytest-xdist (`make test`, --dist loadgroup) each test file runs on one worker, so that its
# module fixtures (a graded batch, a cluster) are made once; the tests that start a scheduler's
# daemons share this machine's munge, namespaces and bridge, so they all run on one worker.
CLUSTER_MARKERS = ("slurm", "pbs")


def _group(item: pytest.Item) -> str:
    clusters = any(item.get_closest_marker(marker) for marker in CLUSTER_MARKERS)
    return "clusters" if clusters else item.path.stem


# The order the groups are dealt to the workers in: the longest first, so that the run does not end
# with one worker on a long group while the others idle (measured in make test on 2 cores: the
# clusters' jobs; the solved student's run, then its grading; then the single long end-to-end runs).
# The other groups follow by what they start (end-to-end runs, then brief integration tests, then
# unit tests, each as collected), so that the quick unit tests fill in the end of the run.
LONGEST_FIRST = (
    "clusters",
    "test_grading",
    "test_bundle_term",
    "test_hub",
    "test_exchange_integrity",
    "test_browser",
    "test_training",
    "test_grading_batch",
)
# After those: the solved student's run (student_run) is made by test_grading's worker, and the
# groups that read it wait for it; dealt after the other end-to-end runs, they find it made.
READ_THE_SOLVED_RUN = ("test_notebooks", "test_allocation")


def _rank(items: list[pytest.Item]) -> dict[str, tuple[int, int]]:
    """Each group's place in the dealing order (see LONGEST_FIRST)."""
    rank: dict[str, tuple[int, int]] = {}
    for item in items:
        group = _group(item)
        if group in LONGEST_FIRST:
            place = (0, LONGEST_FIRST.index(group))
        elif group in READ_THE_SOLVED_RUN:
            place = (2, 0)
        elif item.get_closest_marker("slow"):
            place = (1, 0)
        elif item.get_closest_marker("integration"):
            place = (3, 0)
        else:
            place = (4, 0)
        rank[group] = min(rank.get(group, place), place)
    return rank


@pytest.hookimpl(trylast=True)
def pytest_configure(config) -> None:
    """Under `--dist loadgroup`, xdist deals the groups in the order of the collected tests only
    without its default reordering by the number of tests in a group, which would deal the long
    single-test groups (test_bundle_term, test_hub) last: the run would end on them alone."""
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


# First: xdist's worker reads the groups in its own hook of the same name; after it, they would be
# ignored and a module's tests spread over the workers, each making the module's cluster.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    if config.pluginmanager.hasplugin("xdist"):  # `-p no:xdist` runs in one process: no groups
        for item in items:
            item.add_marker(pytest.mark.xdist_group(_group(item)))
        rank = _rank(items)
        items.sort(key=lambda item: rank[_group(item)])  # stable: else as collected
    if not any("gpu" in item.keywords for item in items):
        return
    found = gpu.visible_gpus() if gpu.cupy_installed() else None
    if found is None or found.count == 0:
        reason = "needs CuPy and a GPU" if found is None else "no GPU visible"
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(pytest.mark.skip(reason=reason))


@pytest.hookimpl(optionalhook=True)  # xdist's hook: unknown under `-p no:xdist`
def pytest_xdist_node_collection_finished(node, ids: list[str]) -> None:
    """Each worker's test ids, as xdist's controller gets them: under --dist loadgroup every one
    ends with its group (`...@clusters`). Where xdist dropped the groups, two workers could start
    the same cluster at once, each removing the other's namespace: the run stops here instead."""
    if node.config.getvalue("dist") != "loadgroup":
        return
    lost = [nodeid for nodeid in ids if nodeid.rfind("@") <= nodeid.rfind("]")]
    if lost:
        import xdist

        pytest.exit(
            f"pytest-xdist {xdist.__version__} dropped the test groups under pytest "
            f"{pytest.__version__} (e.g. {lost[0]}), so a module's tests would start its cluster "
            "on several workers at once (pytest-xdist issue 1386): install the pinned versions "
            "(make venv), or run without -n",
            returncode=pytest.ExitCode.USAGE_ERROR,
        )


@pytest.fixture
def data_root(tmp_path, monkeypatch) -> Path:
    """An empty Chainer data folder for this test."""
    root = tmp_path / "chainer-data"
    monkeypatch.setenv("CHAINER_DATASET_ROOT", str(root))
    return root


@pytest.fixture
def mpi_env() -> dict[str, str]:
    """The environment for running mpiexec from the tests (also as root, as CI does)."""
    return {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


@pytest.fixture(scope="session")
def quick_env(tmp_path_factory) -> dict[str, str]:
    """Settings for short course runs, for kernels and jobs: make demo's quick ones (this process's
    environment is left alone)."""
    from course.instructor.demo_settings import QUICK_DATASET, QUICK_IMAGES, QUICK_SETTINGS

    root = tmp_path_factory.mktemp("quick")
    env = {
        **os.environ,
        "CHAINER_DATASET_ROOT": str(root / "data"),
        "XDG_STATE_HOME": str(root / "state"),
        **QUICK_SETTINGS,
    }
    train, test = map(str, QUICK_IMAGES)
    subprocess.run(
        [PYTHON, "-m", "course", "data", "synthetic", "--train", train, "--test", test]
        + ["--name", QUICK_DATASET],
        env=env,
        check=True,
        capture_output=True,
    )
    return env


def _made_once(tmp_path_factory, name: str, make) -> Path:
    """make(folder)'s folder, made once per test run, also when pytest-xdist's workers share it
    (`make test`): the first worker to need it makes it under a lock in the run's shared folder,
    the others wait and read it. Tests copy it before changing anything."""
    from filelock import FileLock

    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):  # a worker's, not `-p no:xdist`'s, folder
        shared = shared.parent  # the folder every worker's own temporary folder is in
    made = shared / f"{name}.made"
    with FileLock(shared / f"{name}.lock"):
        if not made.exists():
            made.write_text(str(make(shared / name)))
    return Path(made.read_text())


# A CPU student, on GPU nodes too (CUDA_VISIBLE_DEVICES= hides the GPUs from the kit and CuPy): the
# tests that use these expect the CPU course (stage 2 refused, naive in stage 3). The gpu tests run
# their own jobs.
@pytest.fixture(scope="session")
def student_run(quick_env, tmp_path_factory) -> Path:
    """A student who solved every notebook and ran each top to bottom, real jobs included."""
    from course.instructor import demo

    env = {**quick_env, "CUDA_VISIBLE_DEVICES": ""}
    return _made_once(
        tmp_path_factory,
        "student-run",
        lambda folder: demo.play_student(ROOT, folder, echo=lambda line: None, env=env),
    )


@pytest.fixture(scope="session")
def solved_assignment(quick_env, tmp_path_factory) -> Path:
    """The solved assignment as its student has it after stage 1's job: the training and job
    scripts that notebooks 01-03 write, and notebook 07's request in the stage-3 job script. The
    cluster tests submit its jobs themselves, so they need not wait for student_run's other jobs
    (five minutes on an idle machine, far more on a busy one)."""
    from course import paths
    from course.instructor import demo, release

    def make(folder: Path) -> Path:
        release.generate(ROOT, folder / "release")
        solved = demo.student_copy(
            folder / "release" / paths.ASSIGNMENT,
            ROOT / "solutions" / paths.ASSIGNMENT,
            folder / "student" / paths.ASSIGNMENT,
        )
        # the core's notebooks, then 07's request and run part (the stage-3 job's directives)
        notebooks = [*NOTEBOOKS[:3], "07_run_part.ipynb"]
        until_first_job(solved, notebooks, {**quick_env, "CUDA_VISIBLE_DEVICES": ""})
        return solved

    return _made_once(tmp_path_factory, "solved-assignment", make)


@pytest.fixture
def grading_config(tmp_path, monkeypatch, request) -> Path:
    """The test module's GRADING text as grading.toml, the one course.contracts.grading_rules
    reads."""
    path = tmp_path / "grading.toml"
    path.write_text(request.module.GRADING)
    monkeypatch.setenv("COURSE_GRADING_CONFIG", str(path))
    return path


@pytest.fixture
def folder(tmp_path) -> Path:
    """Where the student submits from: runs/ and the job logs."""
    (tmp_path / "student").mkdir()
    return tmp_path / "student"


@pytest.fixture(scope="session")
def chromium() -> tuple[str, str]:
    """(browser, driver): Debian's chromium and its chromedriver, installed with apt-get where root
    can; else the test is skipped with the reason (no browser is downloaded from anywhere else)."""
    import shutil

    if not (shutil.which("chromium") and shutil.which("chromedriver")) and apt.can_install():
        apt.install("chromium", "chromium-driver")
    browser, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if not (browser and driver):
        pytest.skip(
            "needs Debian's chromium and chromium-driver: apt-get install chromium chromium-driver "
            "(as root)"
        )
    return browser, driver


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[slurm_cluster.Cluster]:
    """A real one-node Slurm cluster for the test module; skips the test where none can start."""
    try:
        running = slurm_cluster.start(tmp_path_factory.mktemp("slurm"))
    except slurm_cluster.Unavailable as e:
        pytest.skip(f"no Slurm cluster here: {e}")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(
            "SLURM_CONF", str(running.conf)
        )  # for qstat, which Job.wait runs from this process
        yield running
    running.stop()


@pytest.fixture(scope="module")
def two_node_cluster(tmp_path_factory) -> Iterator[slurm_cluster.Cluster]:
    """A real two-node Slurm cluster for the test module; skips the test where none can start.
    After the module (a failed test too) its namespaces, bridge and every daemon must be gone."""
    try:
        running = slurm_cluster.start(tmp_path_factory.mktemp("slurm2"), nodes=2)
    except slurm_cluster.Unavailable as e:
        pytest.skip(f"no two-node Slurm cluster here: {e}")
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("SLURM_CONF", str(running.conf))  # for qstat, which Job.wait runs here
            yield running
    finally:
        running.stop()
    namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert "course-cnode" not in namespaces
    bridge = subprocess.run(["ip", "link", "show", slurm_cluster.BRIDGE], capture_output=True)
    assert bridge.returncode != 0
    deadline = time.monotonic() + 30
    while subprocess.run(["pgrep", "-f", str(running.conf)], capture_output=True).returncode == 0:
        assert time.monotonic() < deadline, "a daemon of the two-node cluster outlived its stop"
        time.sleep(1)


def _pbs(tmp_path_factory, nodes: int) -> Iterator[pbs_cluster.Cluster]:
    """A real OpenPBS cluster of `nodes` moms (built once, see tests/pbs_build.py); skips the test
    where none can run (no root, namespaces or OpenPBS), fails it where one could but did not start.
    Nothing of it outlives the module, even a failed test."""
    try:
        running = pbs_cluster.start(tmp_path_factory.mktemp("pbs"), nodes=nodes)
    except pbs_cluster.Unavailable as e:
        pytest.skip(f"no OpenPBS cluster here: {e}")
    try:
        with pytest.MonkeyPatch.context() as patch:
            env = running.env(dict(os.environ))  # for qstat, which Job.wait runs from this process
            patch.setenv("PATH", env["PATH"])
            patch.setenv("PBS_CONF_FILE", env["PBS_CONF_FILE"])
            yield running
    finally:
        running.stop()
    left = pbs_cluster.leftovers(running)
    assert left == [], f"the PBS cluster left these behind: {left}"


@pytest.fixture(scope="module")
def pbs(tmp_path_factory) -> Iterator[pbs_cluster.Cluster]:
    """A real one-node OpenPBS cluster for the test module."""
    yield from _pbs(tmp_path_factory, 1)


@pytest.fixture(scope="module")
def pbs_two_nodes(tmp_path_factory) -> Iterator[pbs_cluster.Cluster]:
    """A real OpenPBS cluster of one server and two moms for the test module; where Open MPI cannot
    reach the second node, its `ssh` says why."""
    yield from _pbs(tmp_path_factory, 2)


# --- the unit tier's guard -----------------------------------------------------------------------

# The Makefile's `test-unit` sets it; then a test that starts what the tier promises not to fails.
TIER_VARIABLE = "COURSE_TEST_TIER"
LAUNCHERS = {"mpiexec", "mpirun", "orterun", "prterun", "srun"}
SCHEDULERS = {"qsub", "sbatch", "salloc"}
COURSE_COMMANDS = {"launch", "submit", "grade", "release", "demo"}  # `python -m course <command>`
MODULES_REFUSED = {  # python -m MODULE: what it starts
    "nbgrader": "an nbgrader app",
    "course.cluster.supervisor": "a job (the local scheduler)",
    "course.cluster.launch": "`course launch`",
}

# Where nbgrader's apps, converters (autograde, generate_assignment) and exchange actions start.
NBGRADER_ENTRY_POINTS = (
    ("nbgrader.apps.baseapp", "NbGrader", "initialize"),
    ("nbgrader.converters.base", "BaseConverter", "start"),
    ("nbgrader.exchange.abc.exchange", "Exchange", "start"),
)


def started_by(args: object, shell: bool = False) -> str | None:
    """What Popen(args, shell=shell) would start that a unit test must not, or None."""
    if isinstance(args, (str, bytes, os.PathLike)):
        text = os.fsdecode(args)
        argv = shlex.split(text) if shell else [text]
    else:
        argv = [os.fsdecode(arg) for arg in args]  # type: ignore[attr-defined]
    if not argv:
        return None
    program = Path(argv[0]).name
    if program in LAUNCHERS:
        return f"MPI ranks ({program})"
    if program in SCHEDULERS:
        return f"a job ({program})"
    if program == "nbgrader":
        return "an nbgrader app"
    if program == "course" and argv[1:2] and argv[1] in COURSE_COMMANDS:
        return f"`course {argv[1]}`"
    if any(Path(arg).parent.name == "jobs" and Path(arg).name.startswith("run_") for arg in argv):
        return "a job (a job script run as the scheduler would)"
    if "-m" in argv[:-1]:  # python -m MODULE ...
        module, *rest = argv[argv.index("-m") + 1 :]
        if module == "course" and rest and rest[0] in COURSE_COMMANDS:
            return f"`course {rest[0]}`"
        return MODULES_REFUSED.get(module)
    return None


def unit_tier_failure(what: str) -> str:
    return (
        f"this test starts {what}, which the unit tier does not: mark it "
        "@pytest.mark.integration (or slow, for a long end-to-end run), or pytestmark in its module"
    )


@pytest.fixture(scope="session", autouse=True)
def unit_tier_guard() -> Iterator[list[str]]:
    """In the unit tier, starting MPI ranks, a job (local scheduler, qsub, sbatch), `course launch`
    or an nbgrader app fails the test at once, naming the marker to add; it yields what was refused
    in other threads, where a failure does not reach the test.

    Session-wide, so that module and session fixtures are guarded too. Every process start goes
    through subprocess.Popen, so the guard reads the arguments there. An nbgrader app run in this
    process is caught at nbgrader's own entry points once a test module has imported nbgrader
    (collection does; importing it for every run would cost seconds)."""
    refused_in_threads: list[str] = []
    if os.environ.get(TIER_VARIABLE) != "unit":
        yield refused_in_threads
        return

    def refuse(what: str) -> None:
        if threading.current_thread() is not threading.main_thread():
            refused_in_threads.append(what)
        pytest.fail(unit_tier_failure(what), pytrace=False)

    popen_init = subprocess.Popen.__init__

    def guarded_popen_init(self, args, *rest, **options) -> None:
        what = started_by(args, bool(options.get("shell")))
        if what is not None:
            refuse(what)
        popen_init(self, args, *rest, **options)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(subprocess.Popen, "__init__", guarded_popen_init)
        for module, owner, method in NBGRADER_ENTRY_POINTS:
            loaded = sys.modules.get(module)
            if loaded is not None:
                patch.setattr(
                    getattr(loaded, owner), method, lambda *a, **k: refuse("an nbgrader app")
                )
        yield refused_in_threads


@pytest.fixture(autouse=True)
def unit_tier_guard_of_threads(unit_tier_guard: list[str]) -> Iterator[None]:
    """Fails the test that started, in another thread, what the unit tier does not."""
    yield
    if unit_tier_guard:
        what = unit_tier_guard[0]
        unit_tier_guard.clear()
        pytest.fail(unit_tier_failure(what), pytrace=False)


def pytest_terminal_summary(terminalreporter) -> None:
    """The harvesting test's table (tests/test_harvesting.py), when it ran in this process."""
    from tests import harvesting

    if harvesting.ROWS:
        terminalreporter.write_sep(
            "-", "what a student who only harvests the checks' messages earned"
        )
        for line in harvesting.table():
            terminalreporter.write_line(line)

"""Shared fixtures. Tests use their own data folder and never touch ~/.chainer."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from course import gpu

# One BLAS thread per process, as in the course (a CPU device is one core).
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable


def pytest_collection_modifyitems(config, items):
    if not any("gpu" in item.keywords for item in items):
        return
    found = gpu.visible_gpus() if gpu.cupy_installed() else None
    if found is None or found.count == 0:
        reason = "needs CuPy and a GPU" if found is None else "no GPU visible"
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(pytest.mark.skip(reason=reason))


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
    """Settings for short course runs, for kernels and jobs (this process's environment is left alone)."""
    root = tmp_path_factory.mktemp("quick")
    env = {
        **os.environ,
        "CHAINER_DATASET_ROOT": str(root / "data"),
        "XDG_STATE_HOME": str(root / "state"),
        "COURSE_DATASET": "small",
        "COURSE_TRAIN_ARGS": "--model vgg --width 8 --batchsize 32 --epoch 2 --warmup 2",
        "ROUNDS": "1",
        "BUDGET": "0.15",
    }  # the allreduce benchmark: one turn of each algorithm, briefly
    import subprocess

    subprocess.run(
        [
            PYTHON,
            "-m",
            "course",
            "data",
            "synthetic",
            "--train",
            "1024",
            "--test",
            "256",
            "--name",
            "small",
        ],
        env=env,
        check=True,
        capture_output=True,
    )
    return env


@pytest.fixture(scope="session")
def student_run(quick_env, tmp_path_factory) -> Path:
    """A student who solved every notebook and ran each top to bottom, real jobs included."""
    from course.instructor import demo

    # A CPU student, on GPU nodes too (CUDA_VISIBLE_DEVICES= hides the GPUs from the kit and CuPy): the tests
    # that use it expect the CPU course (stage 2 refused, naive in stage 3). The gpu tests run their own jobs.
    return demo.play_student(
        ROOT,
        tmp_path_factory.mktemp("student-run"),
        echo=lambda line: None,
        env={**quick_env, "CUDA_VISIBLE_DEVICES": ""},
    )


@pytest.fixture
def grading_config(tmp_path, monkeypatch, request) -> Path:
    """The test module's GRADING text as grading.toml, the one course.instructor.scoring reads."""
    path = tmp_path / "grading.toml"
    path.write_text(request.module.GRADING)
    monkeypatch.setenv("COURSE_GRADING_CONFIG", str(path))
    return path


@pytest.fixture
def folder(tmp_path) -> Path:
    """Where the student submits from: runs/ and the job logs."""
    (tmp_path / "student").mkdir()
    return tmp_path / "student"


def bubblewrap() -> bool:
    """Whether the grading sandbox can run here; installs Debian's bubblewrap where root and apt-get can."""
    import shutil

    if not shutil.which("bwrap") and os.geteuid() == 0 and shutil.which("apt-get"):
        import subprocess

        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        for command in (
            ["apt-get", "update", "-qq"],
            ["apt-get", "install", "-y", "-qq", "bubblewrap"],
        ):
            subprocess.run(command, capture_output=True, env=env, timeout=600)
    if not shutil.which("bwrap"):
        return False
    from course.errors import GradingError
    from course.instructor import verify

    try:
        verify.check_sandbox()
    except GradingError:
        return False
    return True


@pytest.fixture(scope="session")
def chromium() -> tuple[str, str]:
    """(browser, driver): Debian's chromium and its chromedriver, installed with apt-get where root can; else
    the test is skipped with the reason (no browser is downloaded from anywhere else)."""
    import shutil
    import subprocess

    if (
        not (shutil.which("chromium") and shutil.which("chromedriver"))
        and os.geteuid() == 0
        and shutil.which("apt-get")
    ):
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        for command in (
            ["apt-get", "update", "-qq"],
            ["apt-get", "install", "-y", "-qq", "chromium", "chromium-driver"],
        ):
            subprocess.run(command, capture_output=True, env=env, timeout=900)
    browser, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if not (browser and driver):
        pytest.skip(
            "needs Debian's chromium and chromium-driver: apt-get install chromium chromium-driver "
            "(as root)"
        )
    return browser, driver

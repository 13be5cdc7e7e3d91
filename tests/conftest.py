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

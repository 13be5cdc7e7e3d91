from __future__ import annotations

import os
import subprocess

from course.diagnostics import doctor
from course.runtime import data_prepare
from tests.helpers import PYTHON


def run_doctor(data_root) -> subprocess.CompletedProcess:
    return subprocess.run(
        [PYTHON, "-m", "course", "doctor"],
        capture_output=True,
        text=True,
        env={**os.environ, "CHAINER_DATASET_ROOT": str(data_root)},
    )


def test_doctor_reports_every_part_and_passes_here(data_root):
    data_prepare.prepare_synthetic(20, 20)
    run = run_doctor(data_root)
    assert run.returncode == 0, run.stdout
    for part in (
        "Python",
        "Chainer",
        "CuPy",
        "GPUs",
        "cuDNN",
        "NCCL",
        "CUDA kernels",
        "MPI",
        "scheduler",
        "site profile",
        "data",
    ):
        assert f"] {part}" in run.stdout
    assert "[ok] Chainer       7.8.1" in run.stdout
    assert "mpi4py 4.1.2" in run.stdout
    assert "synthetic (20+20, 32 px)" in run.stdout


def test_doctor_fails_without_data_and_says_what_to_run(data_root):
    run = run_doctor(data_root)
    assert run.returncode == 1
    assert "[!!] data" in run.stdout and "python -m course data synthetic" in run.stdout


def test_a_broken_data_set_is_reported_not_a_traceback(data_root):
    info = data_prepare.prepare_synthetic(20, 20)
    info.path.write_bytes(b"broken")
    run = run_doctor(data_root)
    assert run.returncode == 1 and "Traceback" not in run.stdout + run.stderr
    assert "truncated or corrupt" in run.stdout


def test_a_check_that_crashes_becomes_a_finding(monkeypatch):
    def crash():
        raise ImportError("libfoo.so: cannot open shared object file")

    monkeypatch.setattr(doctor, "CHECKS", [crash])
    [check] = doctor.run_checks()
    assert check.status == doctor.PROBLEM and "libfoo.so" in check.detail

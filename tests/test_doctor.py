from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from course.diagnostics import doctor
from course.runtime import data_prepare
from tests.helpers import PYTHON, ROOT
from tests.mpi_helpers import other_mpi_launcher


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


@pytest.fixture
def python_without_mpiexec(tmp_path) -> Path:
    """A Python with the kit's packages and no mpiexec beside it, as on a cluster whose MPI comes
    from a module: PATH decides which mpiexec jobs run, LD_LIBRARY_PATH which libmpi mpi4py
    loads."""
    env = tmp_path / "env"
    subprocess.run([PYTHON, "-m", "venv", "--without-pip", str(env)], check=True)
    [site] = (env / "lib").glob("python3*/site-packages")
    (site / "kit.pth").write_text(f"{ROOT}\n{sysconfig.get_paths()['purelib']}\n")
    return env / "bin" / "python"


@pytest.mark.integration
@pytest.mark.parametrize("foreign", ["stand-in", "slurm"])
def test_doctor_refuses_another_mpis_mpiexec_first_on_path(
    foreign, python_without_mpiexec, tmp_path, data_root
):
    if foreign == "slurm":  # Debian's slurm-wlm-torque: an srun wrapper as /usr/bin/mpiexec
        if not Path("/usr/bin/mpiexec.slurm").is_file():
            pytest.skip(
                "Slurm's mpiexec wrapper is not installed (apt-get install slurm-wlm-torque)"
            )
        (tmp_path / "slurm-bin").mkdir()
        (tmp_path / "slurm-bin" / "mpiexec").symlink_to("/usr/bin/mpiexec.slurm")
        launcher = tmp_path / "slurm-bin" / "mpiexec"
        says = "Unknown option: version"
    else:
        launcher = other_mpi_launcher(tmp_path)
        says = "HYDRA build details:"
    data_prepare.prepare_synthetic(20, 20)
    kit_mpi = Path(sys.prefix).resolve() / "bin"  # the mpi extra's Open MPI, and its libmpi
    env = {
        **os.environ,
        "CHAINER_DATASET_ROOT": str(data_root),
        "LD_LIBRARY_PATH": str(Path(sys.prefix) / "lib"),
        "PATH": f"{launcher.parent}{os.pathsep}{os.environ['PATH']}",
    }
    doctor_run = [str(python_without_mpiexec), "-m", "course", "doctor"]
    run = subprocess.run(doctor_run, capture_output=True, text=True, env=env, cwd=tmp_path)
    assert run.returncode == 1, run.stdout + run.stderr
    [line, fix] = [
        text.strip()
        for text in run.stdout.splitlines()
        if "] MPI " in text or "first on PATH" in text
    ]
    assert line.startswith(f"[!!] MPI           mpiexec {launcher} is not the launcher of Open MPI")
    assert f"(it says: {says})" in line, line
    assert (
        fix
        == f"-> put {kit_mpi} first on PATH, or set the site profile's mpiexec to {kit_mpi}/mpiexec"
    )
    # With the kit's MPI first on PATH, as the fix says, the same Python passes.
    env["PATH"] = f"{kit_mpi}{os.pathsep}{env['PATH']}"
    run = subprocess.run(doctor_run, capture_output=True, text=True, env=env, cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"[ok] MPI           mpiexec {kit_mpi}/mpiexec; mpi4py" in run.stdout

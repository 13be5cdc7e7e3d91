"""GPU detection without initialising CUDA, and the GPU paths themselves (marked gpu)."""
from __future__ import annotations

import json
import subprocess

import pytest

from course import gpu, results
from course.runtime import data
from tests.conftest import PYTHON

ROWS = [("0", "GPU-aaa", "Tesla P100"), ("1", "GPU-bbb", "Tesla P100"), ("2", "GPU-ccc", "Tesla P100")]


@pytest.mark.parametrize("visible,indices", [(None, ["0", "1", "2"]), ("1,2", ["1", "2"]), ("GPU-bbb", ["1"]),
                                             ("", []), ("-1", []), ("0,7,1", ["0"])])
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
    probe = ("import course, chainer, json; c = chainer.backends.cuda; "
             "print(json.dumps([c.available, c.cudnn_enabled, c.cupy.cuda.nccl.available]))")
    available, cudnn, nccl = json.loads(subprocess.run([PYTHON, "-c", probe], capture_output=True, text=True,
                                                       check=True).stdout)
    assert available and cudnn and nccl


@pytest.mark.gpu
def test_reference_training_on_the_first_gpu(tmp_path, data_root):
    data.prepare_synthetic(2000, 200)
    subprocess.run([PYTHON, "-m", "course", "train", "--device", "@cupy:0", "--width", "32", "--epoch", "2"],
                   cwd=tmp_path, check=True, capture_output=True, text=True)
    [path] = results.find(tmp_path)
    record = results.load(path)
    assert record["device_kind"] == "gpu" and record["gpu_model"]
    assert record["devices"] == ["@cupy:0"] and record["versions"]["cudnn"]
    assert record["log"][-1]["validation/main/accuracy"] > 0.3

"""The pins live in pyproject.toml; constraints.txt and environment.yml must agree with them."""

from __future__ import annotations

import re

import pytest

from tests.helpers import ROOT
from tools import pins


def test_every_direct_dependency_is_an_exact_pin():
    assert pins.runtime_pins()["chainer"] == "7.8.1"
    for extra in ("mpi", "gpu", "dev", "hub"):
        assert pins.extra_pins(extra), extra
    with pytest.raises(ValueError, match="not an exact pin"):
        pins.parse_pins(["numpy>=1.26"])


def test_design_card_versions():
    found = pins.all_pins()
    assert found["numpy"] == "1.26.4" and found["setuptools"] == "69.5.1"
    assert found["cupy-cuda12x"] == "13.6.0" and found["nvidia-cudnn-cu12"].startswith("8.9.")
    assert pins.python_version() == "3.11"


def test_constraints_lock_agrees_with_pyproject():
    locked = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            name, version = line.split("==")
            locked[name] = version
    for name, version in pins.all_pins().items():
        if name == "wheel":  # a build tool only, not installed into the environment
            continue
        assert locked.get(name) == version, (
            f"{name}: pyproject {version}, constraints {locked.get(name)}"
        )


def test_environment_yml_is_generated_from_pyproject():
    assert (ROOT / "environment.yml").read_text() == pins.render_environment_yml(), (
        "regenerate it: python tools/pins.py conda > environment.yml"
    )


def test_environment_yml_pins_the_same_versions():
    text = (ROOT / "environment.yml").read_text()
    assert re.search(r"^  - python=3\.11$", text, re.M)
    for name, version in pins.runtime_pins().items():
        assert re.search(rf"^\s+- {re.escape(name)}[=]=?{re.escape(version)}$", text, re.M), name
    assert re.search(r"^      - -e \.$", text, re.M), (
        "the kit itself is installed from the repository"
    )


def test_bootstrap_names_the_build_tools_chainer_needs():
    assert pins.bootstrap_requirements() == ["setuptools==69.5.1", "wheel==0.48.0", "numpy==1.26.4"]


def test_cuda_headers_match_nvrtc():
    """CuPy 13 compiles kernels with NVRTC 12.2+ only with the CUDA headers of
    nvidia-cuda-runtime-cu12 at NVRTC's major.minor version (CuPy issue 8466); without them no
    kernel compiles on a node lacking a toolkit."""
    gpu = pins.extra_pins("gpu")
    nvrtc, runtime = gpu["nvidia-cuda-nvrtc-cu12"], gpu.get("nvidia-cuda-runtime-cu12")
    assert runtime is not None, "pin nvidia-cuda-runtime-cu12 in the gpu extra, at NVRTC's version"
    assert runtime.split(".")[:2] == nvrtc.split(".")[:2], (
        f"runtime headers {runtime}, NVRTC {nvrtc}"
    )

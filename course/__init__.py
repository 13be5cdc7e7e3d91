"""The course kit: what the notebooks, the job scripts and the tests share.

``import course`` stays light (no Chainer) so that the command line answers fast; the
training pieces are imported on first use, e.g. ``course.Throughput``.
"""
from __future__ import annotations

from course import gpu as _gpu

__version__ = "0.1.0"

# Before anything imports CuPy, so that cuDNN from the gpu extra is found (see course.gpu).
_gpu.preload_cuda_libraries()

_LAZY = {
    "Throughput": ("course.throughput", "Throughput"),
    "models": ("course.models", None),
    "data": ("course.data", None),
    "training": ("course.training", None),
    "jobs": ("course.jobs", None),
    "report": ("course.report", None),
    "results": ("course.results", None),
    "checks": ("course.checks", None),
    "grading": ("course.grading", None),
    "notebook": ("course.notebook", None),
}


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module 'course' has no attribute {name!r}")
    import importlib

    module_name, attr = _LAZY[name]
    module = importlib.import_module(module_name)
    return getattr(module, attr) if attr else module

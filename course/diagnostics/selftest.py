"""`python -m course doctor --gpu-selftest`: run the GPU paths of the course on this node, briefly.

For an instructor on a GPU node (inside a job on a cluster). Each step runs for real and prints
what it measured; the whole output is what to paste into a bug report:

  1. compile and run a CuPy kernel, checked against NumPy
  2. cuDNN convolution forward and backward against Chainer on NumPy
  3. a 1-rank NCCL allreduce
  4. a few iterations of stage 1's reference training with and without cuDNN, and the speedup
  5. with 2 or more GPUs: MultiprocessParallelUpdater (stage 2) for a few iterations, over NCCL

Steps 4 and 5 run in child processes: MultiprocessParallelUpdater refuses a parent holding a CUDA
context, and each training run starts clean.
"""

from __future__ import annotations

import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from wcwidth import ljust, width

from course import gpu, i18n, paths
from course.i18n import _

STAGE_2 = "stage2"  # the child's argument: `python -m course.diagnostics.selftest stage2 ...`


class _Failed(Exception):
    pass


def _kernel() -> str:
    import cupy
    import numpy

    square = cupy.ElementwiseKernel("T x", "T y", "y = x * x", "course_selftest_square")
    x = numpy.arange(1000, dtype=numpy.float32)
    y = square(cupy.asarray(x)).get()
    if not numpy.array_equal(y, x * x):
        raise _Failed(_("an elementwise kernel computed wrong values"))
    device = cupy.cuda.Device()
    return _("compiled and ran on GPU {id} (compute capability {capability})").format(
        id=device.id, capability=device.compute_capability
    )


def _cudnn_convolution() -> str:
    import chainer
    import chainer.functions as F
    import numpy

    cuda = chainer.backends.cuda
    if not cuda.cudnn_enabled:
        raise _Failed(
            _('Chainer does not use cuDNN: pip install -e ".[gpu]"; eval "$(python -m course env)"')
        )
    rng = numpy.random.default_rng(0)
    x, w, gy = (
        rng.standard_normal(s).astype(numpy.float32)
        for s in ((4, 3, 16, 16), (8, 3, 3, 3), (4, 8, 16, 16))
    )

    def grads(xp_x, xp_w, xp_gy):
        vx, vw = chainer.Variable(xp_x), chainer.Variable(xp_w)
        y = F.convolution_2d(vx, vw, pad=1)
        y.grad = xp_gy
        y.backward()
        return [cuda.to_cpu(a) for a in (y.array, vx.grad, vw.grad)]

    expected = grads(x, w, gy)
    with chainer.using_config("use_cudnn", "always"):
        if not chainer.should_use_cudnn(">=auto"):
            raise _Failed(_("chainer.should_use_cudnn is False with use_cudnn='always'"))
        found = grads(*(cuda.to_gpu(a) for a in (x, w, gy)))
    for name, a, b in zip(
        (_("forward"), _("input gradient"), _("weight gradient")), found, expected
    ):
        if not numpy.allclose(a, b, rtol=1e-3, atol=1e-3):
            raise _Failed(
                # TRANSLATORS: {what} is "forward", "input gradient" or "weight gradient"
                _("cuDNN {what} differs from NumPy by up to {error:.2e}").format(
                    what=name, error=abs(a - b).max()
                )
            )
    return _("cuDNN {version}: forward and backward match NumPy").format(
        version=cuda.libcudnn.getVersion()
    )


def _nccl() -> str:
    import cupy
    from cupy.cuda import nccl

    if not nccl.available:
        raise _Failed(
            _('CuPy cannot load NCCL: pip install -e ".[gpu]"  (installs nvidia-nccl-cu12)')
        )
    comm = nccl.NcclCommunicator(1, nccl.get_unique_id(), 0)
    x = cupy.arange(16, dtype=cupy.float32)
    y = cupy.empty_like(x)
    comm.allReduce(
        x.data.ptr, y.data.ptr, x.size, nccl.NCCL_FLOAT32, nccl.NCCL_SUM, cupy.cuda.Stream.null.ptr
    )
    cupy.cuda.Stream.null.synchronize()
    if not bool((x == y).all()):
        raise _Failed(_("a 1-rank NCCL allreduce changed the data"))
    return _("NCCL {version}: 1-rank allreduce").format(version=nccl.get_version())


def _child(argv: list[str], what: str, env: dict[str, str] | None = None) -> str:
    """A child's stdout; _Failed "`what` failed:" with the end of its output where it fails."""
    run = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=900)
    if run.returncode != 0:
        # TRANSLATORS: {what} is a command, or what it ran; the child's output follows
        raise _Failed(
            _("{what} failed:").format(what=what) + "\n" + (run.stdout + run.stderr)[-2000:]
        )
    return run.stdout


def _course(env: dict[str, str], *arguments: str) -> str:
    return _child(
        [sys.executable, "-m", "course", *arguments], f"python -m course {' '.join(arguments)}", env
    )


def _stage1(folder: Path) -> str:
    env = {**os.environ, "CHAINER_DATASET_ROOT": str(folder / "data")}
    _course(env, "data", "synthetic", "--train", "4096", "--test", "256", "--name", "selftest")
    rates = {}
    for cudnn in ("always", "never"):
        out = _course(
            {**env, "CHAINER_USE_CUDNN": cudnn},
            "train",
            "--device",
            "@cupy:0",
            "--dataset",
            "selftest",
            "--width",
            "32",
            "--batchsize",
            "64",
            "--iterations",
            "40",
            "--warmup",
            "10",
            "--no-eval",
            "--out",
            str(folder / f"cudnn-{cudnn}"),
        )
        match = re.search(r"^Throughput: ([\d.]+)", out, re.M)
        if not match:
            raise _Failed(
                _("no Throughput line with use_cudnn={setting}:").format(setting=cudnn)
                + "\n"
                + out[-1500:]
            )
        rates[cudnn] = float(match.group(1))
    return _(
        "stage 1, 40 iterations: {cudnn:.0f} img/s with cuDNN, {plain:.0f} without (x{speedup:.2f})"
    ).format(cudnn=rates["always"], plain=rates["never"], speedup=rates["always"] / rates["never"])


def _stage2(folder: Path, count: int) -> str:
    out = _child(
        [
            sys.executable,
            "-m",
            "course.diagnostics.selftest",
            STAGE_2,
            str(count),
            str(folder / "stage2"),
        ],
        _("MultiprocessParallelUpdater on {count} GPUs").format(count=count),
    )
    iterations, gpus, nccl = out.split()[-3:]  # what the child prints last
    return _(
        "MultiprocessParallelUpdater: {iterations} iterations on {gpus} GPUs, NCCL {nccl}"
    ).format(iterations=iterations, gpus=gpus, nccl=nccl)


def stage_2(count: int, out: str) -> None:
    """In a child process (`python -m course.diagnostics.selftest stage2 COUNT OUT`): a few
    iterations of MultiprocessParallelUpdater on `count` GPUs, which forks one worker per GPU and
    all-reduces their gradients with NCCL; it prints the iterations done, the GPUs and NCCL's
    version. Run as a module, after `import course`, which loads the gpu extra's CUDA libraries
    before Chainer."""
    import chainer
    import chainer.links as L
    import numpy as np
    from chainer import training
    from chainer.training.updaters import MultiprocessParallelUpdater

    from course.runtime import models

    x = np.random.rand(256, 3, 32, 32).astype(np.float32)
    t = np.random.randint(0, 10, 256).astype(np.int32)
    data = chainer.datasets.TupleDataset(x, t)
    parts = chainer.datasets.split_dataset_n_random(data, count)
    iterators = [chainer.iterators.SerialIterator(part, 32) for part in parts]
    model = L.Classifier(models.build("vgg", width=8))
    optimizer = chainer.optimizers.MomentumSGD(0.01)
    optimizer.setup(model)
    devices = {"main": 0, **{f"w{i}": i for i in range(1, count)}}
    updater = MultiprocessParallelUpdater(iterators, optimizer, devices=devices)
    trainer = training.Trainer(updater, (5, "iteration"), out=out)
    trainer.run()
    print(updater.iteration, count, chainer.backends.cuda.cupy.cuda.nccl.get_version())


def run(echo: Callable[[str], None] = print) -> int:
    """Run the steps on this node's GPUs; 0 when all pass, 1 when one fails or there is no GPU."""
    found = gpu.visible_gpus()
    echo(
        _("course GPU self-test on {host} (Python {version})").format(
            host=platform.node(), version=platform.python_version()
        )
    )
    if found.count == 0:
        echo(
            "  [!!] "
            + _(
                "no GPU: this machine has none visible (nvidia-smi and CuPy see none). Run the "
                "self-test on a GPU node, e.g. inside a job:  python -m course doctor "
                "--gpu-selftest"
            )
        )
        return 1
    if not gpu.cupy_installed():
        echo(
            "  [!!] "
            + _("CuPy is not installed: {command}").format(command=paths.install_command(gpu=True))
        )
        return 1
    echo(
        "  "
        + _("GPUs: {count} ({names}), driver {driver}").format(
            count=found.count, names=i18n.listed(found.names), driver=found.driver or _("unknown")
        )
    )
    gpu.preload_cuda_libraries()
    stage_2_name = _("stage 2")
    steps: list[tuple[str, Callable[[], str]]] = [
        (_("kernel"), _kernel),
        ("cuDNN", _cudnn_convolution),
        ("NCCL", _nccl),
    ]
    with tempfile.TemporaryDirectory(prefix="course-selftest-") as tmp:
        steps.append((_("stage 1"), lambda: _stage1(Path(tmp))))
        if found.count >= 2:
            steps.append((stage_2_name, lambda: _stage2(Path(tmp), found.count)))
        # the steps' names in one column (8 wide in English), as a terminal counts columns
        column = max(8, width(stage_2_name), *(width(n) for n, _step in steps))
        failed = 0
        for name, step in steps:
            started = time.monotonic()
            try:
                echo(f"  [ok] {ljust(name, column)} {step()} ({time.monotonic() - started:.1f} s)")
            except Exception as e:  # each step's failure is a finding; the others still run
                failed += 1
                kind = type(e).__name__ if not isinstance(e, _Failed) else _("failed")
                echo(f"  [!!] {ljust(name, column)} {kind}: {e}")
    if found.count < 2:
        echo(
            f"  [--] {ljust(stage_2_name, column)} "
            + _("needs 2 or more GPUs (NCCL refuses two ranks on one GPU): not run")
        )
    return 1 if failed else 0


if __name__ == "__main__" and sys.argv[1:2] == [STAGE_2]:
    stage_2(int(sys.argv[2]), sys.argv[3])

"""The CUDA kernels the course runs, compiled with NVRTC for a GPU architecture: no GPU needed.

`python -m course kernels`; how and why is the command's help (`description`), written once there
and shown in the student's language.
"""

from __future__ import annotations

import ast
import json
import time
import types
import warnings
from pathlib import Path

from course import i18n, paths
from course.cli import command_parser
from course.diagnostics.nvrtc import (
    Kernel,
    KernelError,
    compile_kernel,
    elementwise,
    header_folders,
    load_cupy,
    module_source,
    nvrtc_version,
    raw,
    reduction,
)
from course.i18n import _


def description() -> str:
    """The command's help: what it does and how, in the student's language."""
    return _(
        "The CUDA kernels the course runs, compiled with NVRTC for a GPU architecture: no GPU "
        "needed.\n"
        "\n"
        "CuPy compiles a kernel when it first runs, on the GPU node, so a kernel that cannot "
        "compile there\n"
        "(missing CUDA headers, a CuPy that dropped a type the kernel uses) fails in the middle "
        "of a job.\n"
        "This module builds the same source and options CuPy would for each kernel on the "
        "course's path and\n"
        "compiles it for the architectures a site may have, without a device: CuPy's own code "
        "generators\n"
        "make the source (they need no GPU); only the last step, which asks the GPU for its "
        "architecture and\n"
        "loads the result, is done here by NVRTC alone.\n"
        "\n"
        "    python -m course kernels [--arch 60,70,80,90] [--json]\n"
        "\n"
        "Chainer creates most of its kernels inside the functions that run them, so they are "
        "read from\n"
        "Chainer's source by name (`_from_source`); a kernel that Chainer renames or drops is an "
        "error here.\n"
    )


# Compute capabilities of the GPUs a site may have, with an example of each.
ARCHITECTURES = {"60": "P100", "70": "V100", "80": "A100", "90": "H100"}


def cub_block_reduction() -> Kernel:
    """A float32 sum over CUB's BlockLoad and BlockReduce, with the headers and options CuPy's CUB
    reductions use (cupy/_core/_cub_reduction.pyx): cupy.sum and mean on contiguous arrays take this
    path."""
    code = r"""
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_load.cuh>
extern "C" __global__ void course_cub_sum(const float* x, float* out, int n) {
  typedef cub::BlockLoad<float, 256, 4, cub::BLOCK_LOAD_DIRECT> Load;
  typedef cub::BlockReduce<float, 256> Reduce;
  __shared__ typename Load::TempStorage load_storage;
  __shared__ typename Reduce::TempStorage reduce_storage;
  float items[4];
  Load(load_storage).Load(x + blockIdx.x * 1024, items, n - blockIdx.x * 1024, 0.0f);
  float total = Reduce(reduce_storage).Sum(items);
  if (threadIdx.x == 0) atomicAdd(out, total);
}
"""
    return Kernel(
        "cupy (CUB reductions)",
        "course_cub_sum",
        *module_source(code, ("--std=c++17", "-DCUB_DISABLE_BF16_SUPPORT")),
    )


def _from_source(module: str, name: str, **names) -> object:
    """The kernel called `name` that a Chainer module makes with cuda.elementwise, cuda.reduce or
    cuda.raw, built from the arguments written there. Those three only check that CUDA is usable
    and pass their arguments to cupy.ElementwiseKernel, ReductionKernel and RawKernel, which are
    called here directly: no module is imported, so Chainer need not see a usable CUDA.
    `names` gives the values of variables the arguments use (for '{} x'.format(dtype.name):
    dtype=...)."""
    import importlib.util

    cupy = load_cupy()
    makers = {
        "elementwise": cupy.ElementwiseKernel,
        "reduce": cupy.ReductionKernel,
        "raw": cupy.RawKernel,
    }
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise KernelError(
            _("{module} is not installed: install the gpu extra ({command})").format(
                module=module, command=paths.install_command(gpu=True)
            )
        )
    path = Path(spec.origin)

    def value(node: ast.expr):
        return eval(compile(ast.Expression(node), str(path), "eval"), {"__builtins__": {}}, names)

    for node in ast.walk(ast.parse(path.read_text())):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in makers
            and ast.unparse(node.func.value) in ("cuda", "chainer.cuda")
        ):
            continue
        try:
            args = [value(a) for a in node.args]
            kwargs = {k.arg: value(k.value) for k in node.keywords if k.arg is not None}
        except (NameError, AttributeError):
            continue  # built from variables that this call of _from_source does not give
        if name in args:
            return makers[node.func.attr](*args, **kwargs)
    raise KernelError(
        _(
            "{module} has no CUDA kernel {name} any more: update course/diagnostics/kernels.py"
        ).format(module=module, name=repr(name))
    )


def _chainer_kernels() -> list[Kernel]:
    from chainer.functions.pooling import max_pooling_nd_kernel

    cupy = load_cupy()
    f32 = {"T": "float32"}
    conv, bn = "chainer.utils.conv", "chainer.functions.normalization.batch_normalization"
    sce, mom = "chainer.functions.loss.softmax_cross_entropy", "chainer.optimizers.momentum_sgd"
    relu, dropout = "chainer.functions.activation.relu", "chainer.functions.noise.dropout"
    mpu = "chainer.training.updaters.multiprocess_parallel_updater"
    packing, nccl = (
        "chainermn.communicators._memory_utility",
        "chainermn.communicators.pure_nccl_communicator",
    )
    conv_scalars = ("h", "w", "out_h", "out_w", "kh", "kw", "sy", "sx", "ph", "pw", "dy", "dx")
    pool_fwd = cupy.ElementwiseKernel(*max_pooling_nd_kernel.MaxPoolingNDKernelForward.generate(2))
    pool_bwd = cupy.ElementwiseKernel(*max_pooling_nd_kernel.MaxPoolingNDKernelBackward.generate(2))
    pool_scalars = tuple(
        p.name for p in pool_fwd.in_params + pool_bwd.in_params if p.dtype is not None and not p.raw
    )
    return [
        # Convolution without cuDNN: im2col, a cuBLAS matmul, col2im for the input's gradient.
        elementwise(conv, _from_source(conv, "im2col"), f32, conv_scalars),
        elementwise(conv, _from_source(conv, "col2im"), f32, conv_scalars),
        elementwise(bn, _from_source(bn, "bn_fwd"), {"T": "float32", "U": "float32"}),
        elementwise(
            bn,
            _from_source(bn, "bn_bwd"),
            {"T": "float32", "U": "float32", "X": "float32"},
            ("inv_m",),
        ),
        elementwise(
            bn,
            _from_source(bn, "update_mean_var"),
            {"T": "float32", "U": "float32"},
            ("decay", "adjust"),
        ),
        elementwise(
            "chainer.functions.pooling.max_pooling_nd",
            pool_fwd,
            {"T": "float32", "S": "int32"},
            pool_scalars,
        ),
        elementwise(
            "chainer.functions.pooling.max_pooling_nd",
            pool_bwd,
            {"T": "float32", "S": "int32"},
            pool_scalars,
        ),
        elementwise(relu, _from_source(relu, "relu_bwd"), f32),
        elementwise(
            dropout,
            _from_source(dropout, "dropout_fwd"),
            {"T": "float32", "R": "float32"},
            ("scale", "ratio"),
        ),
        reduction(
            sce,
            _from_source(sce, "crossent_fwd"),
            {"S": "int32", "T": "float32", "U": "float32"},
            ("n_channel", "ignore_label"),
        ),
        elementwise(
            sce,
            _from_source(sce, "softmax_crossent_bwd"),
            {"S": "int32", "T": "float32", "U": "float32"},
            ("n_channel", "n_unit", "ignore_label"),
        ),
        elementwise(mom, _from_source(mom, "momentum_sgd"), f32, ("lr", "momentum")),
        # Stage 2: MultiprocessParallelUpdater gathers the workers' gradients into one buffer for
        # NCCL.
        elementwise(
            mpu, _from_source(mpu, "_memcpy_gather"), {"T": "uint64", "X": "int8", "Y": "int32"}
        ),
        elementwise(
            mpu, _from_source(mpu, "_memcpy_scatter"), {"T": "uint64", "X": "int8", "Y": "int32"}
        ),
        # Stage 3, pure_nccl: the gradients packed into one buffer, reduced, divided, unpacked.
        raw(packing, _from_source(packing, "cupy_batched_pack_params")),
        raw(packing, _from_source(packing, "cupy_batched_unpack_params")),
        elementwise(
            nccl,
            _from_source(
                nccl,
                "div_by_size",
                dtype=types.SimpleNamespace(name="float32"),
                self=types.SimpleNamespace(size=2),
            ),
            {},
        ),
    ]


def _cupy_kernels() -> list[Kernel]:
    """CuPy's own elementwise and reduction kernels that every training step runs (ufuncs, sums)."""
    cupy = load_cupy()
    f32 = {"T": "float32"}
    return [
        elementwise(
            "cupy (elementwise)",
            cupy.ElementwiseKernel("T x, T y", "T z", "z = x + y", "course_add"),
            f32,
        ),
        reduction(
            "cupy (reduction)",
            cupy.ReductionKernel("T x", "T y", "x", "a + b", "y = a", "0", "course_sum"),
            f32,
        ),
        cub_block_reduction(),
    ]


def course_kernels() -> list[Kernel]:
    """Every kernel above, built from the installed CuPy, Chainer and ChainerMN."""
    load_cupy()
    return _cupy_kernels() + _chainer_kernels()


def probe_kernel() -> Kernel:
    """One small kernel for `course doctor`: CuPy's headers include the CUDA ones, so this needs
    them all."""
    cupy = load_cupy()
    return elementwise(
        "cupy (elementwise)",
        cupy.ElementwiseKernel("T x", "T y", "y = x * x", "course_doctor_square"),
        {"T": "float32"},
    )


def compile_all(archs: list[str]) -> dict:
    """{"nvrtc", "headers", "kernels": [{origin, name, compiled: {arch: seconds}, errors: {arch:
    log}}]}."""
    compiled_kernels: list[dict] = []
    report = {
        "nvrtc": ".".join(map(str, nvrtc_version())),
        "headers": list(header_folders()),
        "kernels": compiled_kernels,
    }
    for kernel in course_kernels():
        compiled: dict[str, float] = {}
        errors: dict[str, str] = {}
        entry = {
            "origin": kernel.origin,
            "name": kernel.name,
            "compiled": compiled,
            "errors": errors,
        }
        for arch in archs:
            started = time.perf_counter()
            try:
                compile_kernel(kernel, arch)
                compiled[arch] = round(time.perf_counter() - started, 2)
            except KernelError as e:
                errors[arch] = str(e)
        compiled_kernels.append(entry)
    return report


def main(argv: list[str] | None = None) -> int:
    """`python -m course kernels`: compile every kernel for each architecture; exit 1 if one does
    not."""
    parser = command_parser("course kernels", description())
    parser.add_argument(
        "--arch", default=",".join(ARCHITECTURES), help=_("compute capabilities, e.g. 70,80")
    )
    parser.add_argument("--json", action="store_true", help=_("print the report as JSON"))
    args = parser.parse_args(argv)
    # Compiling needs no NCCL; CuPy's warning that it cannot load it would only hide the report.
    warnings.filterwarnings("ignore", message=r"\s*nccl library could not be loaded")
    report = compile_all(args.arch.split(","))
    failed = [k for k in report["kernels"] if k["errors"]]
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        print(
            _("NVRTC {version}, CUDA headers from {folders}").format(
                version=report["nvrtc"], folders=i18n.listed(report["headers"]) or _("nowhere")
            )
        )
        for k in report["kernels"]:
            done = i18n.listed(f"sm_{a}" for a in k["compiled"]) or _("none")
            print(
                f"  {'ok' if not k['errors'] else '!!'} {k['name']:<32} {k['origin']}: "
                + _("compiled for {architectures}").format(architectures=done)
            )
            for error in k["errors"].values():
                print("     " + error.replace("\n", "\n     "))
    return 1 if failed else 0

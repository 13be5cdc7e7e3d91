"""The CUDA kernels the course runs, compiled with NVRTC for a GPU architecture: no GPU needed.

CuPy compiles a kernel when it first runs, on the GPU node, so a kernel that cannot compile there
(missing CUDA headers, a CuPy that dropped a type the kernel uses) fails in the middle of a job.
This module builds the same source and options CuPy would for each kernel on the course's path and
compiles it for the architectures a site may have, without a device: CuPy's own code generators
make the source (they need no GPU); only the last step, which asks the GPU for its architecture and
loads the result, is done here by NVRTC alone.

    python -m course kernels [--arch 60,70,80,90] [--json]

Chainer creates most of its kernels inside the functions that run them, so they are read from
Chainer's source by name (`_from_source`); a kernel that Chainer renames or drops is an error here.
"""

from __future__ import annotations

import argparse
import ast
import json
import time
import types
import warnings
from dataclasses import dataclass
from pathlib import Path

from course import gpu

# Compute capabilities of the GPUs a site may have, with an example of each.
ARCHITECTURES = {"60": "P100", "70": "V100", "80": "A100", "90": "H100"}

# _ArgInfo kinds of CuPy 13 (cupy/_core/_kernel.pxd, enum _ArgKind).
_NDARRAY, _INDEXER, _SCALAR = 1, 2, 3


@dataclass(frozen=True)
class Kernel:
    """One kernel as CuPy hands it to NVRTC."""

    origin: str  # where the course's code gets it
    name: str
    source: str
    options: tuple[str, ...]


class KernelError(Exception):
    """A kernel did not compile (the NVRTC log), or could not be found or built."""


def _cupy():
    """CuPy, after the gpu extra's libraries (NVRTC) are loaded: CuPy 13 does not find them itself."""
    gpu.preload_cuda_libraries()
    import cupy

    return cupy


def nvrtc_version() -> tuple[int, int]:
    _cupy()
    from cupy.cuda import nvrtc

    return nvrtc.getVersion()


def header_folders() -> tuple[str, ...]:
    """The CUDA header folders CuPy passes to NVRTC (-I options): from nvidia-cuda-runtime-cu12
    when its version matches NVRTC's, as CuPy 13 requires for NVRTC 12.2 and later."""
    _cupy()
    from cupy.cuda import compiler

    return tuple(option[2:] for option in compiler._get_extra_include_dir_opts())


def compile_kernel(kernel: Kernel, arch: str) -> bytes:
    """The cubin of `kernel` for sm_<arch>, compiled as CuPy does once it knows the device."""
    _cupy()
    from cupy.cuda import compiler, nvrtc

    major, _ = nvrtc.getVersion()
    # CuPy's _compile_with_cache_cuda and compile_using_nvrtc add these for a device of that arch.
    options = (
        kernel.options
        + ("-ftz=true",)
        + compiler._get_extra_include_dir_opts()
        + (f"-arch=sm_{arch}",)
    )
    if major >= 12:
        options += ("--device-as-default-execution-space",)
    program = nvrtc.createProgram(kernel.source, f"{kernel.name}.cu", (), ())
    try:
        nvrtc.compileProgram(program, options)
        return nvrtc.getCUBIN(program)
    except nvrtc.NVRTCError as e:
        raise KernelError(
            f"{kernel.origin}: {kernel.name} does not compile for sm_{arch} ({e}):\n"
            + nvrtc.getProgramLog(program).strip()
        ) from None
    finally:
        nvrtc.destroyProgram(program)


def _module_source(
    code: str, options: tuple[str, ...], cupy_headers: bool = True
) -> tuple[str, tuple[str, ...]]:
    """Source and options as cupy._core.core.compile_with_cache makes them."""
    _cupy()
    from cupy._core import core

    prefix = (
        "".join(f"#include <{header}>\n" for header in core._cupy_header_list)
        if cupy_headers
        else ""
    )
    try:
        return prefix + code, core.assemble_cupy_compiler_options(tuple(options))
    except (
        RuntimeError
    ) as e:  # no CUDA headers anywhere: "Failed to auto-detect CUDA root directory"
        raise KernelError(f"CuPy finds no CUDA headers: {e}") from None


def _arginfos(params, dtypes: dict[str, str], scalars: set[str]) -> tuple:
    """CuPy's description of each argument: a 1-d contiguous array, or a scalar where named."""
    from cupy._core import _carray, _kernel, _scalar

    cupy = _cupy()
    infos = []
    for p in params:
        if p.ctype is None:  # a CIndexer
            infos.append(_kernel._ArgInfo(_INDEXER, _carray.Indexer, None, 1, True, True))
        elif p.name in scalars:
            infos.append(
                _kernel._ArgInfo(_SCALAR, _scalar.CScalar, _dtype_of(p, dtypes), 0, True, True)
            )
        else:
            infos.append(
                _kernel._ArgInfo(_NDARRAY, cupy.ndarray, _dtype_of(p, dtypes), 1, True, True)
            )
    return tuple(infos)


def _dtype_of(p, dtypes: dict[str, str]):
    import numpy

    if p.dtype is not None:
        return numpy.dtype(p.dtype)
    if p.ctype not in dtypes:
        raise KernelError(f"no dtype given for the type {p.ctype} of parameter {p.name}")
    return numpy.dtype(dtypes[p.ctype])


def _type_map(kernel, dtypes: dict[str, str], scalars: set[str]):
    """The type placeholders (T, U, ...) resolved as a call with these dtypes resolves them."""
    from cupy._core import _kernel

    def array_types(params):
        return tuple(None if p.name in scalars else _dtype_of(p, dtypes).type for p in params)

    _, _, type_map = _kernel._decide_params_type(
        kernel.in_params,
        kernel.out_params,
        array_types(kernel.in_params),
        array_types(kernel.out_params),
    )
    return type_map


def elementwise(
    origin: str, kernel, dtypes: dict[str, str], scalars: tuple[str, ...] = ()
) -> Kernel:
    """A cupy.ElementwiseKernel with its arguments' dtypes, as its first call would build it."""
    from cupy._core import _kernel

    infos = _arginfos(kernel.params, dtypes, set(scalars))
    type_map = _type_map(kernel, dtypes, set(scalars))
    kwargs = dict(kernel.kwargs)
    options = tuple(kwargs.pop("options", ()))
    code = _kernel._get_elementwise_kernel_code(
        infos,
        type_map,
        kernel.params,
        kernel.operation,
        kernel.name,
        kernel.preamble,
        options=options,
        **kwargs,
    )
    return Kernel(origin, kernel.name, *_module_source(code, options))


def reduction(origin: str, kernel, dtypes: dict[str, str], scalars: tuple[str, ...] = ()) -> Kernel:
    """A cupy.ReductionKernel with its arguments' dtypes, as its first call would build it (without CUB)."""
    from cupy._core import _kernel, _reduction

    scalars_ = set(scalars) | {"_block_stride"}
    infos = _arginfos(kernel._params, dtypes, scalars_)
    # The index type CuPy adds for reductions of fewer than 2**31 elements into each output.
    type_map = _kernel._TypeMap(
        _type_map(kernel, dtypes, set(scalars))._pairs + (("IndexT", "int32"),)
    )
    options = tuple(kernel.options or ())
    code = _reduction._ReductionKernel_get_cached_function_code(
        kernel.nin,
        kernel.nout,
        kernel._params,
        infos,
        type_map,
        kernel.name,
        512,
        kernel.reduce_type,
        kernel.identity,
        kernel.map_expr,
        kernel.reduce_expr,
        kernel.post_map_expr,
        kernel.preamble,
        options,
    )
    return Kernel(origin, kernel.name, *_module_source(code, options))


def raw(origin: str, kernel) -> Kernel:
    """A cupy.RawKernel: its own source, with CuPy's include folders."""
    return Kernel(
        origin, kernel.name, *_module_source(kernel.code, tuple(kernel.options), cupy_headers=False)
    )


def cub_block_reduction() -> Kernel:
    """A float32 sum over CUB's BlockLoad and BlockReduce, with the headers and options CuPy's CUB
    reductions use (cupy/_core/_cub_reduction.pyx): cupy.sum and mean on contiguous arrays take this path."""
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
        *_module_source(code, ("--std=c++17", "-DCUB_DISABLE_BF16_SUPPORT")),
    )


def _from_source(module: str, name: str, **names) -> object:
    """The kernel called `name` that a Chainer module makes with cuda.elementwise, cuda.reduce or
    cuda.raw, built from the arguments written there. Those three only check that CUDA is usable
    and pass their arguments to cupy.ElementwiseKernel, ReductionKernel and RawKernel, which are
    called here directly: no module is imported, so Chainer need not see a usable CUDA.
    `names` gives the values of variables the arguments use (for '{} x'.format(dtype.name): dtype=...)."""
    import importlib.util

    cupy = _cupy()
    makers = {
        "elementwise": cupy.ElementwiseKernel,
        "reduce": cupy.ReductionKernel,
        "raw": cupy.RawKernel,
    }
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise KernelError(f"{module} is not installed: install the gpu extra (make gpu)")
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
    raise KernelError(f"{module} has no CUDA kernel {name!r} any more: update course/kernels.py")


def _chainer_kernels() -> list[Kernel]:
    from chainer.functions.pooling import max_pooling_nd_kernel

    cupy = _cupy()
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
        # Stage 2: MultiprocessParallelUpdater gathers the workers' gradients into one buffer for NCCL.
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
    cupy = _cupy()
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
    _cupy()
    return _cupy_kernels() + _chainer_kernels()


def probe_kernel() -> Kernel:
    """One small kernel for `course doctor`: CuPy's headers include the CUDA ones, so this needs them all."""
    cupy = _cupy()
    return elementwise(
        "cupy (elementwise)",
        cupy.ElementwiseKernel("T x", "T y", "y = x * x", "course_doctor_square"),
        {"T": "float32"},
    )


def compile_all(archs: list[str]) -> dict:
    """{"nvrtc", "headers", "kernels": [{origin, name, compiled: {arch: seconds}, errors: {arch: log}}]}."""
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
    """`python -m course kernels`: compile every kernel for each architecture; exit 1 if one does not."""
    parser = argparse.ArgumentParser(
        prog="course kernels",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--arch", default=",".join(ARCHITECTURES), help="compute capabilities, e.g. 70,80"
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    # Compiling needs no NCCL; CuPy's warning that it cannot load it would only hide the report.
    warnings.filterwarnings("ignore", message=r"\s*nccl library could not be loaded")
    report = compile_all(args.arch.split(","))
    failed = [k for k in report["kernels"] if k["errors"]]
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        print(
            f"NVRTC {report['nvrtc']}, CUDA headers from {', '.join(report['headers']) or 'nowhere'}"
        )
        for k in report["kernels"]:
            done = ", ".join(f"sm_{a}" for a in k["compiled"]) or "none"
            print(
                f"  {'ok' if not k['errors'] else '!!'} {k['name']:<32} {k['origin']}: compiled for {done}"
            )
            for error in k["errors"].values():
                print("     " + error.replace("\n", "\n     "))
    return 1 if failed else 0

"""Compiling a CUDA kernel with NVRTC as CuPy would on a device of a given architecture, no GPU
needed.

CuPy compiles a kernel when it first runs, on the GPU node. Its own code generators make the
source (they need no GPU); only the last step, which asks the GPU for its architecture and loads
the result, is done here by NVRTC alone. `course.diagnostics.kernels` lists the course's kernels.
"""

from __future__ import annotations

from dataclasses import dataclass

from course import gpu
from course.i18n import _

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


def load_cupy():
    """CuPy, after the gpu extra's libraries (NVRTC) are loaded: CuPy 13 does not find them
    itself."""
    gpu.preload_cuda_libraries()
    import cupy

    return cupy


def nvrtc_version() -> tuple[int, int]:
    load_cupy()
    from cupy.cuda import nvrtc

    return nvrtc.getVersion()


def header_folders() -> tuple[str, ...]:
    """The CUDA header folders CuPy passes to NVRTC (-I options): from nvidia-cuda-runtime-cu12
    when its version matches NVRTC's, as CuPy 13 requires for NVRTC 12.2 and later."""
    load_cupy()
    from cupy.cuda import compiler

    return tuple(option[2:] for option in compiler._get_extra_include_dir_opts())


def compile_kernel(kernel: Kernel, arch: str) -> bytes:
    """The cubin of `kernel` for sm_<arch>, compiled as CuPy does once it knows the device."""
    load_cupy()
    from cupy.cuda import compiler, nvrtc

    major, _minor = nvrtc.getVersion()
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
            # TRANSLATORS: {origin} is where the kernel comes from (a module); {error} is NVRTC's;
            # NVRTC's log follows on the next lines
            _("{origin}: {name} does not compile for sm_{arch} ({error}):").format(
                origin=kernel.origin, name=kernel.name, arch=arch, error=e
            )
            + "\n"
            + nvrtc.getProgramLog(program).strip()
        ) from None
    finally:
        nvrtc.destroyProgram(program)


def module_source(
    code: str, options: tuple[str, ...], cupy_headers: bool = True
) -> tuple[str, tuple[str, ...]]:
    """Source and options as cupy._core.core.compile_with_cache makes them."""
    load_cupy()
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

    cupy = load_cupy()
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
        raise KernelError(
            _("no dtype given for the type {type} of parameter {name}").format(
                type=p.ctype, name=p.name
            )
        )
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
    return Kernel(origin, kernel.name, *module_source(code, options))


def reduction(origin: str, kernel, dtypes: dict[str, str], scalars: tuple[str, ...] = ()) -> Kernel:
    """A cupy.ReductionKernel with its arguments' dtypes, as its first call would build it (without
    CUB)."""
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
    return Kernel(origin, kernel.name, *module_source(code, options))


def raw(origin: str, kernel) -> Kernel:
    """A cupy.RawKernel: its own source, with CuPy's include folders."""
    return Kernel(
        origin, kernel.name, *module_source(kernel.code, tuple(kernel.options), cupy_headers=False)
    )

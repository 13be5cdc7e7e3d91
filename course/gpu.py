"""What GPU support this machine has, and making the CUDA libraries of the `gpu` extra findable.

Nothing here initialises CUDA in the calling process: MultiprocessParallelUpdater refuses to
fork its workers from a process that did, so GPUs are counted with `nvidia-smi` or a child Python.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from course import paths
from course.i18n import _

# Sonames that CuPy 13 and cuDNN 8 link to, each after the libraries it needs, with the
# folder of the nvidia-*-cu12 wheel that holds it (site-packages/nvidia/<folder>/lib).
_WHEEL_LIBRARIES = (
    ("cuda_nvrtc", "libnvrtc.so.12"),
    ("nvjitlink", "libnvJitLink.so.12"),
    ("cublas", "libcublasLt.so.12"),
    ("cublas", "libcublas.so.12"),
    ("curand", "libcurand.so.10"),
    ("cufft", "libcufft.so.11"),
    ("cusparse", "libcusparse.so.12"),
    ("cudnn", "libcudnn_ops_infer.so.8"),
    ("cudnn", "libcudnn_ops_train.so.8"),
    ("cudnn", "libcudnn_cnn_infer.so.8"),
    ("cudnn", "libcudnn_cnn_train.so.8"),
    ("cudnn", "libcudnn_adv_infer.so.8"),
    ("cudnn", "libcudnn_adv_train.so.8"),
    ("cudnn", "libcudnn.so.8"),
    ("nccl", "libnccl.so.2"),
)

_preloaded: dict[str, str] = {}


def nvidia_library_dirs() -> list[Path]:
    """The lib folders of the installed nvidia-* wheels (none without the gpu extra)."""
    spec = importlib.util.find_spec("nvidia")
    if spec is None or not spec.submodule_search_locations:
        return []
    return sorted(
        lib for root in spec.submodule_search_locations for lib in Path(root).glob("*/lib")
    )


def preload_cuda_libraries() -> dict[str, str]:
    """Load the CUDA, cuDNN and NCCL libraries of the nvidia-* wheels into this process.

    CuPy 13 links to cuDNN as `libcudnn.so.8` but looks for it only in ~/.cupy and on the
    library path; once a library with that soname is loaded, the dynamic linker reuses it.
    So this must run before CuPy's cuDNN module is imported (``import chainer`` imports it).
    Jobs set LD_LIBRARY_PATH instead (`python -m course env`), which works whatever the import
    order. Returns {soname: path} of everything loaded so far.
    """
    dirs = {d.parent.name: d for d in nvidia_library_dirs()}
    for folder, soname in _WHEEL_LIBRARIES:
        path = dirs.get(folder, Path("/nonexistent")) / soname
        if soname in _preloaded or not path.exists():
            continue
        try:
            ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)
        except OSError:
            continue  # a library it needs is missing; `course doctor` says which
        _preloaded[soname] = str(path)
    return dict(_preloaded)


def library_path_export() -> str:
    """A shell line that puts the nvidia-* wheel libraries on LD_LIBRARY_PATH (empty without
    them)."""
    dirs = [str(d) for d in nvidia_library_dirs()]
    if not dirs:
        return ""
    return f'export LD_LIBRARY_PATH="{":".join(dirs)}${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}}"'


def cupy_installed() -> bool:
    return importlib.util.find_spec("cupy") is not None


@dataclass
class VisibleGpus:
    """GPUs this process may use (CUDA_VISIBLE_DEVICES applied)."""

    names: list[str] = field(default_factory=list)
    driver: str = ""

    @property
    def count(self) -> int:
        return len(self.names)


def _apply_visible_devices(gpus: list[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    """Keep the (index, uuid, name) rows that CUDA_VISIBLE_DEVICES allows."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return gpus
    kept = []
    for token in (t.strip() for t in visible.split(",")):
        match = [g for g in gpus if token and (g[0] == token or g[1].startswith(token))]
        if not match:
            break  # CUDA stops at the first entry it cannot use
        kept.append(match[0])
    return kept


def _output(argv: list[str], timeout: float) -> str | None:
    """What a probe command prints; None where it is missing, fails or hangs (the answer is then
    "cannot be told", never an error)."""
    try:
        return subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout, check=True
        ).stdout
    except (subprocess.SubprocessError, OSError):
        return None


def visible_gpus(timeout: float = 20.0) -> VisibleGpus:
    """Count the GPUs without initialising CUDA here: nvidia-smi, else CuPy in a child process."""
    smi = shutil.which("nvidia-smi")
    if smi:
        query = "--query-gpu=index,uuid,name,driver_version"
        out = _output([smi, query, "--format=csv,noheader"], timeout) or ""
        rows = [
            [c.strip() for c in line.split(",")]
            for line in out.splitlines()
            if line.count(",") >= 3
        ]
        # MIG instances (CUDA_VISIBLE_DEVICES=MIG-...) are not nvidia-smi's rows: CuPy counts them.
        if rows and not os.environ.get("CUDA_VISIBLE_DEVICES", "").strip().startswith("MIG-"):
            gpus = _apply_visible_devices([(r[0], r[1], r[2]) for r in rows])
            return VisibleGpus([g[2] for g in gpus], rows[0][3])
    if cupy_installed():
        probe = (
            "import cupy; r = cupy.cuda.runtime; n = r.getDeviceCount(); "
            "print('\\n'.join(r.getDeviceProperties(i)['name'].decode() for i in range(n)))"
        )
        names = _output([sys.executable, "-c", probe], timeout)
        if names is None:
            return VisibleGpus()
        return VisibleGpus([n for n in names.splitlines() if n.strip()])
    return VisibleGpus()


def _smi_query(field: str, timeout: float = 20.0) -> list[str]:
    """One nvidia-smi --query-gpu field for every GPU, CUDA_VISIBLE_DEVICES applied ([] without
    nvidia-smi)."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return []
    out = _output([smi, f"--query-gpu=index,uuid,{field}", "--format=csv,noheader"], timeout)
    if out is None:
        return []
    rows = [
        [c.strip() for c in line.split(",", 2)] for line in out.splitlines() if line.count(",") >= 2
    ]
    return [g[2] for g in _apply_visible_devices([(r[0], r[1], r[2]) for r in rows])]


def compute_capabilities() -> list[str]:
    """The visible GPUs' compute capabilities as NVRTC names them ('80' for 8.0), from
    nvidia-smi."""
    return [c.replace(".", "") for c in _smi_query("compute_cap") if c.replace(".", "").isdigit()]


def gpu_models(device_ids: list[int]) -> list[str]:
    """The model of each of these GPUs (CUDA ids, CUDA_VISIBLE_DEVICES applied), without touching
    CUDA: MultiprocessParallelUpdater forks its workers from this process, which must not hold a
    CUDA context."""
    names = visible_gpus().names
    return [names[i] for i in device_ids if 0 <= i < len(names)]


def assigned_devices(devices: dict | list) -> tuple[list[str], str | None]:
    """(device names, GPU model) of the GPUs given to MultiprocessParallelUpdater: ids (0, 1, ...),
    '@cupy:N' names, or its {'main': id, ...} dict. The model is None when no GPU with these ids is
    visible."""
    ids = []
    for device in devices.values() if isinstance(devices, dict) else devices:
        match = re.fullmatch(r"(?:@cupy:)?(\d+)", str(device))
        if not match:
            raise ValueError(
                _("not a GPU id or @cupy:N device: {device}").format(device=repr(device))
            )
        ids.append(int(match.group(1)))
    models = sorted(set(gpu_models(ids)))
    return [f"@cupy:{i}" for i in ids], ", ".join(models) or None


def mpi_cuda_aware(timeout: float = 20.0) -> bool | None:
    """Whether the MPI that jobs start can move GPU memory: Open MPI's ompi_info says so; None when
    that cannot be told (another MPI, or no ompi_info)."""
    ompi_info = paths.find_program("ompi_info", environment_first=True)
    if not ompi_info:
        return None
    out = _output([ompi_info, "--parsable", "--all"], timeout)
    if out is None:
        return None
    # Open MPI 4 names it mpi_built_with_cuda_support, Open MPI 5 opal_built_with_cuda_support.
    found = re.findall(r"_built_with_cuda_support:value:(true|false)", out)
    return None if not found else "true" in found


def resolve_device(spec: str) -> str:
    """Turn 'auto' into '@cupy:0' where CuPy and a GPU exist, else '@numpy'; pass others through."""
    if spec != "auto":
        return spec
    return "@cupy:0" if cupy_installed() and visible_gpus().count > 0 else "@numpy"


def main(argv: list[str]) -> int:
    """`python -m course env`: print the shell line that puts the gpu extra's libraries on
    LD_LIBRARY_PATH (the command's help says it in the student's language)."""
    from course.cli import CommandParser

    CommandParser(
        prog="course env",
        description=_(
            "`python -m course env`: print the shell line that puts the gpu extra's libraries on "
            "LD_LIBRARY_PATH."
        ),
    ).parse_args(argv)
    line = library_path_export()
    if line:
        print(line)
    return 0

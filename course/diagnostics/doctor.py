"""`python -m course doctor`: one screen that says what works on this machine and how to fix the
rest."""

from __future__ import annotations

import platform
import shlex
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from wcwidth import ljust, width

from course import gpu, i18n, paths
from course.cluster import mpi, siteenv
from course.i18n import _
from course.runtime import data

OK, NOT_HERE, PROBLEM = "ok", "--", "!!"


@dataclass
class Check:
    status: str  # OK, NOT_HERE (fine on this machine) or PROBLEM
    what: str
    detail: str
    fix: str = ""


def _python() -> Check:
    version = platform.python_version()
    if sys.version_info[:2] == (3, 11):
        return Check(OK, "Python", version)
    return Check(
        PROBLEM,
        "Python",
        version,
        _("the kit needs Python 3.11 (Chainer 7.8.1 does not import on 3.12)"),
    )


def _chainer() -> Check:
    import chainer
    import numpy

    return Check(
        OK,
        "Chainer",
        _("{chainer} (NumPy {numpy}, ChainerMN bundled)").format(
            chainer=chainer.__version__, numpy=numpy.__version__
        ),
    )


def _cupy() -> Check:
    if not gpu.cupy_installed():
        return Check(
            NOT_HERE,
            "CuPy",
            _("not installed: training runs on CPU"),
            _("on a GPU node:  {command}").format(command=paths.install_command(gpu=True)),
        )
    import cupy

    return Check(OK, "CuPy", cupy.__version__)


def _gpus() -> Check:
    found = gpu.visible_gpus()
    if found.count:
        names = i18n.listed(sorted(set(found.names)))
        if found.driver:
            names = _("{names}, driver {driver}").format(names=names, driver=found.driver)
        return Check(
            OK, "GPUs", _("{count} visible ({names})").format(count=found.count, names=names)
        )
    if gpu.cupy_installed():
        return Check(
            NOT_HERE,
            "GPUs",
            _("none visible here"),
            _("GPU jobs run on compute nodes; run doctor inside a job to check them"),
        )
    return Check(NOT_HERE, "GPUs", _("none (CPU only)"))


def _cupy_library(
    name: str, version: Callable[[], object | None], needs: str, uses: str, missing: str, fix: str
) -> Check:
    """A CUDA library that CuPy loads: NOT_HERE without CuPy (`needs`), OK with its `version()`
    and what `uses` it, PROBLEM (`missing`, `fix`) where version() is None: not loaded."""
    if not gpu.cupy_installed():
        return Check(NOT_HERE, name, needs)
    found = version()
    if found is not None:
        return Check(OK, name, _("{version} ({uses})").format(version=found, uses=uses))
    return Check(PROBLEM, name, missing, fix)


def _cudnn() -> Check:
    def version() -> object | None:
        import chainer

        cuda = chainer.backends.cuda
        return cuda.libcudnn.getVersion() if cuda.cudnn_enabled else None

    return _cupy_library(
        "cuDNN",
        version,
        _("needs CuPy"),
        _("Chainer uses it"),
        _("not found: Chainer falls back to slower convolutions"),
        _('pip install -e ".[gpu]"; in a shell:  eval "$(python -m course env)"'),
    )


def _nccl() -> Check:
    def version() -> object | None:
        from cupy.cuda import nccl

        return nccl.get_version() if nccl.available else None

    return _cupy_library(
        "NCCL",
        version,
        _("needs CuPy (stage 2 and pure_nccl need it)"),
        _("stage 2 and pure_nccl can run"),
        _("CuPy cannot load NCCL: stage 2 and pure_nccl cannot run"),
        _('pip install -e ".[gpu]"   (installs nvidia-nccl-cu12)'),
    )


def _kernels() -> Check:
    """Compile one CuPy kernel: loading the libraries is not enough, CuPy also needs CUDA's
    headers."""
    if not gpu.cupy_installed():
        return Check(NOT_HERE, _("CUDA kernels"), _("needs CuPy"))
    from course.diagnostics import kernels, nvrtc

    archs = sorted(set(gpu.compute_capabilities())) or list(kernels.ARCHITECTURES)
    try:
        version = ".".join(map(str, nvrtc.nvrtc_version()))
    except (
        Exception
    ) as e:  # CuPy raises RuntimeError or ImportError when libnvrtc.so.12 cannot be loaded
        return Check(
            PROBLEM,
            _("CUDA kernels"),
            _("NVRTC cannot be loaded: {error}").format(error=e),
            _('pip install -e ".[gpu]"  (installs nvidia-cuda-nvrtc-cu12)'),
        )
    try:
        probe = kernels.probe_kernel()
        for arch in archs:
            nvrtc.compile_kernel(probe, arch)
    except nvrtc.KernelError as e:
        log = str(e).splitlines()
        cause = next((line.strip() for line in log if "error" in line), log[-1])
        fix = _("reinstall the environment: {command}").format(
            command=paths.install_command(gpu=True, afresh=True)
        )
        if "cannot open source file" in cause or "no CUDA headers" in cause:
            fix = _(
                "{command}  (CuPy takes the CUDA headers from it, at NVRTC's version; the gpu "
                "extra pins it)"
            ).format(command=f'pip install "nvidia-cuda-runtime-cu12=={version}.*"')
        return Check(
            PROBLEM,
            _("CUDA kernels"),
            _("NVRTC {version} cannot compile CuPy's kernels: {cause}").format(
                version=version, cause=cause
            ),
            fix,
        )
    where = i18n.listed(nvrtc.header_folders()) or _("the CUDA toolkit")
    return Check(
        OK,
        _("CUDA kernels"),
        _("NVRTC {version} compiles for {archs} (headers: {where})").format(
            version=version, archs=i18n.listed(f"sm_{a}" for a in archs), where=where
        ),
    )


def _mpi() -> Check:
    """The launcher `course launch` would run (the site template's program) must be the mpiexec of
    the MPI library mpi4py loads: another MPI's starts each rank alone, or fails on its options."""
    import mpi4py

    library = mpi.library()
    uses = _("mpi4py {version} uses {library}").format(
        version=mpi4py.__version__, library=library.name
    )
    env_file = siteenv.locate()
    template = siteenv.SiteSettings.read(env_file).mpiexec if env_file else ""
    program = (shlex.split(template) or ["mpiexec"])[0]
    launcher = mpi.find_launcher(program)
    if not launcher:
        return Check(
            PROBLEM,
            "MPI",
            _("{uses} but no {program} on PATH").format(uses=uses, program=program),
            _('load the site\'s MPI module, or:  pip install -e ".[mpi]"'),
        )
    if not Path(program).name.startswith(("mpiexec", "mpirun")):  # srun: the scheduler's
        return Check(
            OK,
            "MPI",
            _("{program} {launcher} starts the ranks; {uses}").format(
                program=program, launcher=launcher, uses=uses
            ),
        )
    said = mpi.foreign(launcher, library)
    if said is None:
        return Check(OK, "MPI", f"{program} {launcher}; {uses}")
    right = mpi.matching_launcher(library)
    return Check(
        PROBLEM,
        "MPI",
        _(
            "{program} {launcher} is not the launcher of {library}, which mpi4py {version} uses "
            "(it says: {said}): jobs would fail, or train each rank alone"
        ).format(
            program=program,
            launcher=launcher,
            library=library.name,
            version=mpi4py.__version__,
            said=said[:100],
        ),
        _("put {folder} first on PATH, or set the site profile's mpiexec to {right}").format(
            folder=Path(right).parent, right=right
        )
        if right
        else _(
            "load the module of {library} (the MPI mpi4py was built with), so that its mpiexec "
            "comes first on PATH"
        ).format(library=library.name),
    )


def _scheduler() -> Check:
    qsub = paths.find_program("qsub")
    if qsub:
        return Check(OK, _("scheduler"), f"qsub {qsub}")
    return Check(
        NOT_HERE,
        _("scheduler"),
        _("no qsub: jobs run on this machine"),
        _("python -m course submit jobs/<script>  runs a job script as the scheduler would"),
    )


def _site() -> Check:
    env_file = siteenv.locate()
    if env_file is None:
        return Check(NOT_HERE, _("site profile"), _("not in a kit checkout or assignment folder"))
    profile = siteenv.SiteSettings.read(env_file).site
    name = profile or _("unknown")  # outside the f-string, where Babel's extractor finds it
    return Check(
        OK,
        _("site profile"),
        f"{name} ({env_file})",
        "" if profile else "python -m course site apply <profile>",
    )


def _dataset() -> Check:
    names = data.available()
    if not names:
        return Check(
            PROBLEM,
            _("data"),
            _("no data set in {folder}").format(folder=data.data_dir()),
            _(
                "python -m course data synthetic   (the notebooks' setup cell runs it for you; "
                "real CIFAR-10: python -m course data cifar10 --from cifar-10-python.tar.gz)"
            ),
        )
    described = []
    for name in names:
        try:
            info = data.info(name)
            described.append(f"{name} ({info.n_train}+{info.n_test}, {info.image_size} px)")
        except data.DatasetError as e:
            return Check(PROBLEM, _("data"), e.message, e.hint)
    return Check(
        OK,
        _("data"),
        _("{sets} in {folder}").format(sets=i18n.listed(described), folder=data.data_dir()),
    )


CHECKS: list[Callable[[], Check]] = [
    _python,
    _chainer,
    _cupy,
    _gpus,
    _cudnn,
    _nccl,
    _kernels,
    _mpi,
    _scheduler,
    _site,
    _dataset,
]


def run_checks() -> list[Check]:
    results = []
    for check in CHECKS:
        try:
            results.append(check())
        except Exception as e:  # a broken piece is itself the finding
            name = check.__name__.strip("_")
            results.append(
                Check(
                    PROBLEM,
                    name,
                    _("check failed: {error}").format(error=f"{type(e).__name__}: {e}"),
                    _("reinstall the environment: {command}").format(
                        command=paths.install_command(afresh=True)
                    ),
                )
            )
    return results


def render(checks: list[Check]) -> str:
    columns = max(width(c.what) for c in checks)  # terminal columns: Japanese takes two each
    lines = [_("course doctor: what works on this machine"), ""]
    for c in checks:
        lines.append(f"  [{c.status}] {ljust(c.what, columns)}  {c.detail}")
        if c.fix and c.status != OK:
            lines.append(f"       {'':<{columns}}  -> {c.fix}")
    lines += [
        "",
        _("[ok] works   [--] not available here (fine on this machine)   [!!] needs fixing"),
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="course doctor", description=__doc__)
    parser.add_argument(
        "--gpu-selftest",
        action="store_true",
        help=_(
            "on a GPU node: run a kernel, cuDNN, NCCL and a few training steps "
            "(course.diagnostics.selftest)"
        ),
    )
    if parser.parse_args(argv or []).gpu_selftest:
        from course.diagnostics import selftest

        return selftest.run()
    checks = run_checks()
    print(render(checks))
    return 1 if any(c.status == PROBLEM for c in checks) else 0

"""OpenPBS for the tests: a PBS already installed, or one built from the unmodified upstream source
in ../shared/vendor/ (no package registry carries it).

The build is cached per machine, as pip caches the wheel it builds of Chainer, in
${XDG_CACHE_HOME:-~/.cache}/course-kit/openpbs/<first 16 hex digits of the tarball's SHA-256>/: a
later test run, from this clone or a fresh one, reuses it, and a changed tarball builds anew (about
5 min on 2 idle cores). It needs root for apt-get (the Debian build dependencies and PostgreSQL,
PBS's datastore) and `make install` (pbs_iff and pbs_rcp are setuid). `python -m tests.pbs_build`
builds it ahead of the tests.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import tarfile
import time
from pathlib import Path

from tests import apt

ROOT = Path(__file__).resolve().parent.parent
VENDOR = ROOT.parent / "shared" / "vendor"  # beside the repository, as on the course machines
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "course-kit" / "openpbs"
BUILD_PACKAGES = (
    "autoconf automake libtool libssl-dev libxt-dev libpq-dev libexpat1-dev libedit-dev "
    "libncurses-dev libical-dev libhwloc-dev pkg-config tcl-dev tk-dev python3-dev swig "
    "libcjson-dev gcc g++ make"
).split()
RUN_PACKAGES = ("postgresql",)  # the server's datastore
BUILD_TIMEOUT = 3600  # seconds for all of make -j2: 3 min idle, 10 min under load were measured


class Unavailable(Exception):
    """OpenPBS cannot run here; the message says why."""


def _run(command: list[str], cwd: Path | None = None, timeout: float = 900) -> None:
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    try:
        run = subprocess.run(
            command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        raise Unavailable(f"{' '.join(command)} took more than {timeout:.0f} s") from None
    if run.returncode != 0:
        said = (run.stderr or run.stdout).strip()[-600:]
        raise Unavailable(f"{' '.join(command)} failed in {cwd or '.'}: {said}")


def installed() -> Path | None:
    """PBS_EXEC of an installed OpenPBS / PBS Pro, found by its qstat (not the qstat of
    slurm-wlm-torque, which wraps Slurm)."""
    qstat = shutil.which("qstat")
    candidates = [Path(qstat).resolve().parent.parent] if qstat else []
    candidates.append(Path("/opt/pbs"))
    for exec_ in candidates:
        if (exec_ / "sbin" / "pbs_server").exists() and (exec_ / "bin" / "qstat").exists():
            return exec_
    return None


def tarball() -> Path:
    found = sorted(VENDOR.glob("openpbs-*-src.tar.gz"))
    if not found:
        raise Unavailable(
            f"no OpenPBS here: install it, or put its source (openpbs-*-src.tar.gz) in {VENDOR}"
        )
    return found[-1]


def _digest(path: Path) -> str:
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()[:16]


def apt_install(packages: list[str] | tuple[str, ...]) -> None:
    missing = [
        p
        for p in packages
        if subprocess.run(
            ["dpkg-query", "-W", "-f", "${Status}", p], capture_output=True, text=True
        ).stdout
        != "install ok installed"
    ]
    if not missing:
        return
    if not apt.can_install():
        raise Unavailable(f"{' '.join(missing)} missing, and installing needs root and apt-get")
    failed = apt.install(*missing)
    if failed:
        raise Unavailable(failed)


def build(echo=print) -> Path:
    """PBS_EXEC of the cached build of the vendored source, built first if need be."""
    source = tarball()
    folder = CACHE / _digest(source)
    prefix, done = folder / "install", folder / "installed"
    if done.exists():
        return _tolerate_limits(prefix)
    if os.geteuid() != 0:
        raise Unavailable("building OpenPBS needs root (apt-get, setuid programs)")
    apt_install([*BUILD_PACKAGES, *RUN_PACKAGES])
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another test run may be building it right now
        if done.exists():
            return _tolerate_limits(prefix)
        start = time.monotonic()
        work = folder / "src"
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(prefix, ignore_errors=True)
        work.mkdir()
        with tarfile.open(source) as archive:
            archive.extractall(work, filter="tar")
        [tree] = work.iterdir()
        echo(f"building OpenPBS from {source.name} in {folder} (about 5 min)")
        _run(["./autogen.sh"], tree)
        _run(["./configure", f"--prefix={prefix}", "--with-python=/usr"], tree)
        _run(["make", "-j2"], tree, timeout=BUILD_TIMEOUT)
        _run(["make", "install"], tree)
        shutil.rmtree(work)
        done.write_text(f"{source.name} built in {time.monotonic() - start:.0f} s\n")
    return _tolerate_limits(prefix)


def _tolerate_limits(prefix: Path) -> Path:
    """PBS's init script sources limits.pbs_mom, whose `ulimit -l unlimited` some machines (these
    sandboxes) refuse, and a refused ulimit ends the script: each limit is tried, not required
    (the file says it is there for local edits)."""
    limits = prefix / "lib" / "init.d" / "limits.pbs_mom"
    if limits.exists():
        text = limits.read_text()
        tolerant = re.sub(r"^(ulimit [^|\n]*)$", r"\1 2>/dev/null || :", text, flags=re.M)
        if tolerant != text:
            limits.write_text(tolerant)
    return prefix


if __name__ == "__main__":
    print(build())

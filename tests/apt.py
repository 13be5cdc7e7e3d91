"""Debian packages the tests need (Slurm, Chromium, bubblewrap, ...), installed with apt-get where
root can. pytest-xdist's workers may ask at the same moment, and apt refuses a second apt-get while
one runs: the installs take turns under a lock of the test run."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from filelock import FileLock

_LOCK = Path(tempfile.gettempdir()) / "course-tests-apt.lock"


def can_install() -> bool:
    return os.geteuid() == 0 and shutil.which("apt-get") is not None


def install(*packages: str, timeout: float = 900) -> str:
    """apt-get update, then install `packages`; "" when that worked, else what apt-get said last."""
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    with FileLock(_LOCK, timeout=2 * timeout):
        for command in (
            ["apt-get", "update", "-qq"],
            ["apt-get", "install", "-y", "-qq", *packages],
        ):
            run = subprocess.run(command, capture_output=True, text=True, env=env, timeout=timeout)
            if run.returncode != 0:
                return f"{' '.join(command)} failed: {(run.stderr or run.stdout).strip()[-300:]}"
    return ""

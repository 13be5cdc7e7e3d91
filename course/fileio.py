"""Writing files so that readers never see half of one."""

from __future__ import annotations

import hashlib
import os
import secrets
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

# The temporary files of the atomic writes under way in this process, removed if SIGTERM kills it.
_partial_files: set[Path] = set()


def _remove_partial_files_and_die(signum: int, frame) -> None:
    for tmp in list(_partial_files):
        tmp.unlink(missing_ok=True)
    # Die by the signal, as without this handler, so that whoever sent it sees the same end.
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


@contextmanager
def _removed_if_terminated(tmp: Path) -> Iterator[None]:
    """Remove `tmp` if SIGTERM's default action kills the process, which runs no `except` or
    `finally`.

    Only from the main thread (Python's rule) and only where SIGTERM would kill outright: a handler
    the program set itself is kept, and the exception it raises reaches atomic_file's `except`.
    """
    guard = (
        threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    )
    _partial_files.add(tmp)
    if guard:
        signal.signal(signal.SIGTERM, _remove_partial_files_and_die)
    try:
        yield
    finally:
        if guard and signal.getsignal(signal.SIGTERM) is _remove_partial_files_and_die:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
        _partial_files.discard(tmp)


@contextmanager
def atomic_file(path: Path, mode: str = "wb") -> Iterator[IO]:
    """Yield a file in `path`'s folder that replaces `path` only when the block succeeds.

    The file gets the mode a plain open() would give: it is created with 0666 and the umask applies
    (mkstemp's 0600 would hide a shared data set from other users). On any error the partial file
    is removed, and also when SIGTERM (a cancelled job, a walltime) kills the process.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    while True:
        tmp = path.parent / f".{path.name}.{secrets.token_hex(6)}.partial"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            break
        except FileExistsError:
            continue
    try:
        with _removed_if_terminated(tmp):
            with os.fdopen(fd, mode) as f:
                yield f
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def sha256_file(path: Path) -> str:
    return file_digest(path, "sha256")


def file_digest(path: Path, algorithm: str) -> str:
    digest = hashlib.new(algorithm)
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def free_bytes(path: Path) -> int:
    """Bytes free for this user on the file system of `path` (or of its nearest existing parent)."""
    path = Path(path).absolute()
    while not path.exists():
        path = path.parent
    stats = os.statvfs(path)
    return stats.f_bavail * stats.f_frsize


def require_free_space(path: Path, needed: int, what: str) -> None:
    """CourseError naming `path` when its file system has less than `needed` bytes free for
    `what`."""
    from course.errors import CourseError
    from course.i18n import _

    free = free_bytes(path)
    if free < needed:
        raise CourseError(
            # TRANSLATORS: {what} is what needs the space, e.g. "its results and snapshots"
            _(
                "only {free} MiB free on the file system of {folder}; {what} need about {needed} "
                "MiB"
            ).format(
                free=free // 2**20, folder=Path(path).absolute(), what=what, needed=needed // 2**20
            ),
            _(
                "free space there (old runs/ folders, snapshots), or pass --out on another file "
                "system"
            ),
        )

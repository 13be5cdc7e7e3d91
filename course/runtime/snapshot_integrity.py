"""Snapshots checked before they are loaded.

Chainer and ChainerMN write a snapshot whole (a temporary file renamed into place), but nothing
checks it when it is read back: a file truncated or changed later (a full quota, a copy cut short,
a bad disk) fails inside `load_npz` on every resubmission, and the intact snapshot before it is
never tried. So each snapshot gets a digest beside it when it is written; before a job resumes, the
newest snapshot is checked against it (or, without one, each member's CRC is read), a damaged one
is removed with the reason in the job log, and the one before it is used.

The digest of `snapshot_iter_96` is `.snapshot_iter_96.sha256`: a name that neither Chainer's
snapshot extension (it takes any file that starts as its snapshots do for one of them) nor
ChainerMN's checkpointer (`snapshot.<rank>.<iteration>`, three dotted parts) takes for a snapshot.
"""

from __future__ import annotations

import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path

from course.fileio import atomic_file, sha256_file
from course.i18n import _

DIGEST = ".sha256"


def digest_path(snapshot: Path) -> Path:
    return snapshot.with_name(f".{snapshot.name}{DIGEST}")


def seal(snapshot: Path) -> None:
    """Write the digest of a snapshot just written, beside it."""
    with atomic_file(digest_path(snapshot), "w") as f:
        f.write(f"{sha256_file(snapshot)}  {snapshot.name}\n")


def tidy(folder: Path, snapshots: Sequence[Path]) -> None:
    """Remove the digests of snapshots that are gone (Chainer removes stale snapshots itself)."""
    kept = {digest_path(path).name for path in snapshots}
    for digest in Path(folder).glob(f".*{DIGEST}"):
        if digest.name not in kept:
            digest.unlink(missing_ok=True)


def problem(snapshot: Path) -> str | None:
    """Why `snapshot` cannot be loaded as written; None when it is intact."""
    try:
        recorded = digest_path(snapshot).read_text().split()[0]
    except (OSError, IndexError):
        recorded = None  # written before its digest was (or a job killed in between)
    try:
        if recorded is not None:
            if sha256_file(snapshot) != recorded:
                return _("its bytes differ from the digest written with it: damaged after writing")
            return None
        with zipfile.ZipFile(snapshot) as archive:
            bad = archive.testzip()  # reads every member and checks its CRC
        return _("its member {member} fails its CRC check").format(member=bad) if bad else None
    except zipfile.BadZipFile as e:
        return _("it is not a whole snapshot file (truncated?): {error}").format(error=e)
    except OSError as e:
        return _("it cannot be read: {error}").format(error=e)


def remove(snapshot: Path) -> None:
    """Remove a snapshot and its digest."""
    snapshot.unlink(missing_ok=True)
    digest_path(snapshot).unlink(missing_ok=True)


def damaged_line(snapshot: Path, why: str, rank: int | None = None) -> str:
    """The job log's line on a damaged snapshot, removed (read by students, not by the kit)."""
    if rank is None:
        said = _(
            "snapshot {snapshot} is damaged: {why}; removed, the snapshot before it is used"
        ).format(snapshot=snapshot, why=why)
    else:
        said = _(
            "snapshot {snapshot} (rank {rank}) is damaged: {why}; removed, the snapshot before it "
            "is used"
        ).format(snapshot=snapshot, rank=rank, why=why)
    return "course: " + said


def newest_intact(
    snapshots: Sequence[Path], iteration: Callable[[Path], int | None], say: Callable[[str], None]
) -> Path | None:
    """The newest intact snapshot of `snapshots`; the damaged ones newer than it are removed, each
    said."""
    for snapshot in sorted(snapshots, key=lambda path: iteration(path) or 0, reverse=True):
        why = problem(snapshot)
        if why is None:
            return snapshot
        remove(snapshot)
        say(damaged_line(snapshot, why))
    return None

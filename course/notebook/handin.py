"""Before handing in: the assignment folder as nbgrader's submit will see it.

nbgrader refuses a whole submission when the folder is over `max_dir_size`, counting the files it
ignores too (snapshots, data sets, core files), and leaves out any file over `max_file_size`. At
submit a student reads a byte count and no file name; `check()` says it first, names the largest
files, and which runs' snapshots can go (`remove_snapshots`).
"""

from __future__ import annotations

import fcntl
from dataclasses import dataclass
from pathlib import Path

from course.contracts import results
from course.errors import CourseError
from course.i18n import _
from course.runtime import checkpoint, snapshot_integrity

CONFIG = "nbgrader_config.py"


@dataclass(frozen=True)
class Limits:
    """What nbgrader's submit allows, in bytes (nbgrader's settings are in kB of 1000 bytes)."""

    max_dir_size: int
    max_file_size: int
    config: Path | None  # the nbgrader_config.py they came from (None: nbgrader's defaults)
    ignore: tuple[str, ...] = ()  # what submit leaves out (CourseDirectory.ignore)
    include: tuple[str, ...] = ("*",)  # and what it takes (CourseDirectory.include)

    def submitted(self, path: Path) -> bool:
        """Whether submit would copy `path` if it were small enough, by nbgrader's own rule."""
        from nbgrader.utils import ignore_patterns

        rule = ignore_patterns(exclude=list(self.ignore), include=list(self.include))
        return not rule(str(path.parent), [path.name])


def limits(folder: Path = Path(".")) -> Limits:
    """The limits of the nbgrader configuration that submits `folder`: the nearest
    nbgrader_config.py in it or above it (the students' one sits where JupyterLab starts), read by
    nbgrader itself."""
    from nbgrader.coursedir import CourseDirectory
    from traitlets.config.loader import PyFileConfigLoader

    found = next(
        (
            place / CONFIG
            for place in [Path(folder).resolve(), *Path(folder).resolve().parents]
            if (place / CONFIG).is_file()
        ),
        None,
    )
    config = PyFileConfigLoader(CONFIG, str(found.parent)).load_config() if found else None
    course = CourseDirectory(config=config) if config is not None else CourseDirectory()
    return Limits(
        course.max_dir_size * 1000,
        course.max_file_size * 1000,
        found,
        tuple(course.ignore),
        tuple(course.include),
    )


def folder_size(folder: Path) -> int:
    """Bytes in `folder` as nbgrader's submit counts them against max_dir_size: every file, ignored
    ones included, symbolic links not followed."""
    return sum(size for path, size in _files(folder))


def _files(folder: Path) -> list[tuple[Path, int]]:
    found = []
    for path in Path(folder).rglob("*"):
        if path.is_file() and not path.is_symlink():
            try:
                found.append((path, path.stat().st_size))
            except OSError:  # removed while we looked
                continue
    return found


@dataclass(frozen=True)
class RunSnapshots:
    """The snapshot files one run folder holds."""

    run: Path
    files: tuple[Path, ...]
    bytes: int
    finished: bool  # a finished run never resumes: its snapshots are left over
    training: bool  # a job holds the run's lock now


def _training(run: Path) -> bool:
    lock = run / checkpoint.LOCK_FILE
    if not lock.exists():
        return False
    with open(lock, "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
    return False


def _finished(run: Path) -> bool:
    try:
        return bool(results.load(run / results.FILENAME).get("complete"))
    except Exception:  # no results yet, or unreadable: not known to be finished
        return False


def snapshots(folder: Path = Path(".")) -> list[RunSnapshots]:
    """Each run folder in `folder`'s runs/ that holds snapshots, the largest first."""
    runs = Path(folder) / results.RUNS_DIR
    found = []
    for run in sorted(runs.iterdir()) if runs.is_dir() else []:
        files = tuple(checkpoint.snapshot_files(run))
        if files:
            size = sum(path.stat().st_size for path in files)
            found.append(RunSnapshots(run, files, size, _finished(run), _training(run)))
    return sorted(found, key=lambda entry: -entry.bytes)


def remove_snapshots(run: str | Path, folder: Path = Path(".")) -> int:
    """Remove the snapshots of one run folder (`runs/multi_node-7.local` or its name); the bytes
    freed. An unfinished run then starts over when its job is submitted again."""
    path = Path(run) if Path(run).is_dir() else Path(folder) / results.RUNS_DIR / str(run)
    if not path.is_dir():
        raise CourseError(
            _("there is no run folder {run}").format(run=run),
            _("give a folder of runs/, as check() lists them"),
        )
    if _training(path):
        raise CourseError(
            _("a job is training {path} now; its snapshots are in use").format(path=path),
            _("wait for the job to end (or cancel it), then remove them"),
        )
    files = checkpoint.snapshot_files(path)
    freed = sum(file.stat().st_size for file in files)
    for file in files:
        snapshot_integrity.remove(file)
    return freed


def _mb(size: int) -> str:
    return f"{size / 1e6:,.1f} MB"


def check(folder: Path = Path("."), largest: int = 5) -> bool:
    """Print whether nbgrader will take `folder` as it is, and what to do when it will not; True
    when it will."""
    folder = Path(folder)
    allowed = limits(folder)
    files = _files(folder)
    total = sum(size for path, size in files)
    where = allowed.config or _("nbgrader's defaults")
    fits = total <= allowed.max_dir_size
    print(
        _(
            "{folder}: {size} as nbgrader counts it (ignored files too), limit {limit} ({where})"
        ).format(
            folder=folder.resolve(),
            size=_mb(total),
            limit=_mb(allowed.max_dir_size),
            where=where,
        )
    )
    too_big = [
        (path, size)
        for path, size in files
        if size > allowed.max_file_size and allowed.submitted(path)
    ]
    for path, size in too_big:
        print(
            "  "
            + _(
                "left out of the submission: {path} ({size}, over the {limit} a file may have)"
            ).format(
                path=path.relative_to(folder), size=_mb(size), limit=_mb(allowed.max_file_size)
            )
        )
    if fits:
        print(*_snapshot_lines(folder), sep="\n")
        print(_("ready to hand in: nbgrader's submit takes this folder"))
        return True
    print(refusal(folder, total, allowed.max_dir_size, files, largest))
    return False


def _snapshot_lines(folder: Path) -> list[str]:
    """A line for each run that holds snapshots: how many, how large, whether they are needed."""
    lines = []
    for entry in snapshots(folder):
        state = (
            _("a job is training it now")
            if entry.training
            else _("finished: not needed any more")
            if entry.finished
            else _("unfinished: the next job of this training resumes from them")
        )
        lines.append(
            "  "
            + _("snapshots: {run}: {files} file(s), {size} ({state})").format(
                run=entry.run.relative_to(folder),
                files=len(entry.files),
                size=_mb(entry.bytes),
                state=state,
            )
        )
    return lines


def refusal(
    folder: Path,
    total: int,
    limit: int,
    files: list[tuple[Path, int]] | None = None,
    largest: int = 5,
) -> str:
    """What to tell a student whose folder nbgrader's submit refuses: by how much, its largest files
    and how to make room."""
    files = _files(folder) if files is None else files
    biggest = sorted(files, key=lambda pair: -pair[1])[:largest]
    return "\n".join(
        [
            _("nbgrader's submit refuses this folder: {excess} too much.").format(
                excess=_mb(total - limit)
            ),
            _("Its largest files:"),
            *(f"  {_mb(size):>12}  {path.relative_to(folder)}" for path, size in biggest),
            *_snapshot_lines(folder),
            _(
                "Remove what you do not need: a run's snapshots with "
                "course.notebook.handin.remove_snapshots('<run folder>') (an unfinished run then "
                "starts over), core files and data sets by hand (keep runs/ and the job logs: "
                "they are graded)."
            ),
        ]
    )


__all__ = [
    "Limits",
    "RunSnapshots",
    "check",
    "folder_size",
    "limits",
    "refusal",
    "remove_snapshots",
    "snapshots",
]

"""What in a submission no step of the grading may open: walked once, before anything reads it.

Every later step (the editions' timestamps, the verifier, nbgrader's autograde, the plagiarism
hashes, the notebook reader) opens files by path and follows links. A link that loops never
resolves, a link to /dev/zero or a FIFO never ends a read, and a link leaving the submission is a
window on a classmate's files: any of them would stop or starve the whole class's run, or grade
someone else's work. So the walk follows no link and opens no file (it only reads each entry's
type), and a submission holding any of these is NOT GRADED, with what and where said; the rest of
the class is graded as usual.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Collection
from pathlib import Path

from course.i18n import N_

# Why a submission holding such files is not graded, in the feedback the student reads.
NOT_GRADED = N_(
    "the submission holds files the grader does not open ({found}): hand in ordinary files and "
    "folders, no links, pipes or devices"
)

_SPECIAL = {
    stat.S_IFIFO: "a named pipe (FIFO)",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
}


def _link_problem(path: Path, folder: Path) -> str:
    """Why the link `path` may not be followed, or "" when it names an ordinary file or folder of
    the submission."""
    target = os.readlink(path)
    try:
        resolved = path.resolve(strict=True)
    except RuntimeError:  # Python 3.11 says a loop so; later versions raise OSError (ELOOP)
        return f"-> {target}: a loop of links"
    except OSError as e:
        return f"-> {target}: " + ("a loop of links" if e.errno == 40 else "leads nowhere")
    if not resolved.is_relative_to(folder):
        return f"-> {target}: outside the submission"
    mode = resolved.lstat().st_mode
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        return f"-> {target}: {_SPECIAL.get(stat.S_IFMT(mode), 'a special file')}"
    return ""


def refused(folder: Path) -> list[str]:
    """What of the submission in `folder` may not be opened, as "path: why" (path relative to the
    folder); [] when every entry is an ordinary file, a folder or a link to one inside it. The
    folder itself must be a real folder."""
    folder = Path(folder)
    if folder.is_symlink() or not folder.is_dir():
        return [f"{folder.name}: not a folder"]
    root = folder.resolve()
    found = []
    for directory, subdirectories, files in os.walk(root):
        for name in sorted([*subdirectories, *files]):
            path = Path(directory, name)
            relative = path.relative_to(root)
            mode = path.lstat().st_mode
            if stat.S_ISLNK(mode):
                problem = _link_problem(path, root)
                if problem:
                    found.append(f"{relative} {problem}")
            elif not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                found.append(f"{relative}: {_SPECIAL.get(stat.S_IFMT(mode), 'a special file')}")
    return found


def refused_students(
    submitted: Path, assignments: Collection[str]
) -> dict[str, tuple[str, list[str]]]:
    """{student: (the edition folder, what `refused` found)} for the students of `submitted` (an
    nbgrader submitted folder: <student>/<assignment>) one of whose `assignments` holds what no
    step may open, or whose own folder is a link."""
    found: dict[str, tuple[str, list[str]]] = {}
    for folder in sorted(Path(submitted).glob("*/*")):
        student = folder.parent.name
        if folder.name not in assignments or student in found:
            continue
        problems = refused(folder)
        if folder.parent.is_symlink():
            problems.insert(0, f"{student}: a link, not the student's folder")
        if problems:
            found[student] = (folder.name, problems)
    return found

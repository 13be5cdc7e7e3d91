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

import errno
import os
import stat
from collections.abc import Collection
from pathlib import Path

from course import i18n
from course.i18n import N_

# Why a submission holding such files is not graded, in the feedback the student reads.
NOT_GRADED = N_(
    "the submission holds files the grader does not open ({found}): hand in ordinary files and "
    "folders, no links, pipes or devices"
)

_SPECIAL = {
    stat.S_IFIFO: N_("a named pipe (FIFO)"),
    stat.S_IFCHR: N_("a character device"),
    stat.S_IFBLK: N_("a block device"),
    stat.S_IFSOCK: N_("a socket"),
}
SPECIAL = N_("a special file")
LOOP = N_("a loop of links")
NOWHERE = N_("a link that leads nowhere")
OUTSIDE = N_("outside the submission")
LINKED_FOLDER = N_("a link, not the student's folder")


def _link_problem(path: Path, folder: Path) -> str:
    """Why the link `path` may not be followed (untranslated), or "" when it names an ordinary
    file or folder of the submission."""
    try:
        resolved = path.resolve(strict=True)
    except RuntimeError:  # Python 3.11 says a loop so; later versions raise OSError (ELOOP)
        return LOOP
    except OSError as e:
        return LOOP if e.errno == errno.ELOOP else NOWHERE
    if not resolved.is_relative_to(folder):
        return OUTSIDE
    mode = resolved.lstat().st_mode
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        return _SPECIAL.get(stat.S_IFMT(mode), SPECIAL)
    return ""


def refused(folder: Path) -> list[tuple[str, str]]:
    """What of the submission in `folder` may not be opened: (where, why untranslated), where is
    its path in the folder (a link's with its target); [] when every entry is an ordinary file, a
    folder or a link to one inside it. The folder itself must be a real folder."""
    folder = Path(folder)
    if folder.is_symlink() or not folder.is_dir():
        return [(folder.name, LINKED_FOLDER)]
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
                    found.append((f"{relative} -> {os.readlink(path)}", problem))
            elif not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                found.append((str(relative), _SPECIAL.get(stat.S_IFMT(mode), SPECIAL)))
    return found


def described(found: list[tuple[str, str]], lang: str) -> str:
    """`found` as "where: why; ..." in the language `lang` (at most five of them)."""
    return i18n.listed(
        (f"{where}: {i18n.in_language(lang, why)}" for where, why in found[:5]), "; ", lang
    )


def refused_students(
    submitted: Path, assignments: Collection[str]
) -> dict[str, tuple[str, list[tuple[str, str]]]]:
    """{student: (the edition folder, what `refused` found)} for the students of `submitted` (an
    nbgrader submitted folder: <student>/<assignment>) one of whose `assignments` holds what no
    step may open, or whose own folder is a link."""
    found: dict[str, tuple[str, list[tuple[str, str]]]] = {}
    for folder in sorted(Path(submitted).glob("*/*")):
        student = folder.parent.name
        if folder.name not in assignments or student in found:
            continue
        problems = refused(folder)
        if folder.parent.is_symlink():
            problems.insert(0, (student, LINKED_FOLDER))
        if problems:
            found[student] = (folder.name, problems)
    return found

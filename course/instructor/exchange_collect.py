"""nbgrader's collect, which takes only what a student handed in whole, and themselves.

nbgrader's collect takes, for each student id, the newest folder of the inbound named
<student>+<assignment>+<time>: the name is all it goes by. It would take a copy that a failed
hand-in left half-made, or one a classmate put there under another's name and a later time (its
owner check only logs a warning). The course's nbgrader_config.py (and `course grade --exchange`)
puts this class in its place. Every folder it would take is checked first (`problem`):

- whole: nbgrader's submit writes submission_secret.txt last, so a copy without it stopped half-way
  (the kit's own submit, course.notebook.handin_submit, never leaves one: this is for plain
  nbgrader and older bundles);
- regular files and folders only: submit copies what a link points to, never a link, so a link or
  a special file was put there afterwards, and collecting it as root would read whatever it names;
- owned by the student it is named for, every file, where that id is the name of an account on
  this machine (a shared file system where each student logs in as themselves). Where it is not (a
  JupyterHub whose users have no accounts here), the owner says nothing about who handed it in, and
  this is said once per collection: such a hub needs an authenticated exchange
  (docs/instructors.md);
- not over the size nbgrader's submit allows.

A folder that fails is passed over, and the student's newest folder that passes is collected
instead (or none). Each is said in a log line that starts with NOTE, which `course grade` reads
(`notes`) and prints, and writes into grades-details.csv. Hidden folders a stopped hand-in left
(handin_submit.STAGING) are named the same way.
"""

from __future__ import annotations

import os
import pwd
import re
import stat
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from nbgrader.exchange import ExchangeError
from nbgrader.exchange.default.collect import ExchangeCollect
from traitlets import Bool

from course.notebook.handin_submit import STAGING

NOTE = "course-collect:"  # what starts a line for the instructor in collect's log
SECRET = "submission_secret.txt"  # nbgrader's submit writes it last
SECRET_LENGTH = 128  # secrets.token_hex(64)
_LINE = re.compile(re.escape(NOTE) + r" \[([^\]]*)\] (.*)")


@dataclass(frozen=True)
class Note:
    """A line for the instructor about a folder of the inbound (student "": about them all)."""

    student: str
    text: str


def notes(log: str) -> list[Note]:
    """The lines for the instructor in the log of a collect run with CheckedCollect."""
    return [Note(*found.groups()) for found in map(_LINE.search, log.splitlines()) if found]


def account(student: str) -> int | None:
    """The uid of the account named `student` on this machine, None where there is none."""
    try:
        return pwd.getpwnam(student).pw_uid
    except KeyError:
        return None


def _owner(uid: int) -> str:
    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}, no account"


def _whole(folder: Path) -> bool:
    secret = folder / SECRET
    try:
        if not stat.S_ISREG(secret.lstat().st_mode):
            return False
        with open(secret, "rb") as f:
            return len(f.read(SECRET_LENGTH + 2).strip()) == SECRET_LENGTH
    except OSError:
        return False


def _entry_problem(path: Path, where: Path, student: str, uid: int | None) -> str | None:
    """Why one entry of a submission (`where` in it) shows it was not handed in as it is."""
    mode = path.lstat()
    if stat.S_ISLNK(mode.st_mode):
        return (
            f"{where} is a symbolic link: nbgrader's submit copies what a link points to, never a "
            "link, so it was put there after the hand-in"
        )
    if not (stat.S_ISREG(mode.st_mode) or stat.S_ISDIR(mode.st_mode)):
        return f"{where} is not a file or folder (a device, pipe or socket)"
    if uid is not None and mode.st_uid != uid:
        return (
            f"{where} belongs to {_owner(mode.st_uid)}, not to the account {student} (uid {uid}): "
            f"it was handed in under {student}'s name by someone else"
        )
    return None


def problem(folder: Path, student: str, max_bytes: int) -> str | None:
    """Why the inbound's `folder`, named for `student`, must not be collected as their submission;
    None when it may."""
    uid = account(student)

    def unreadable(error: OSError) -> None:
        raise error

    try:
        said = _entry_problem(folder, Path("."), student, uid)
        if said or not folder.is_dir():
            return said or "it is not a folder (nbgrader's submit makes one)"
        if not _whole(folder):
            return (
                f"it is incomplete: it has no whole {SECRET}, which nbgrader's submit writes "
                "last, so the copy stopped half-way (a hand-in that failed)"
            )
        size = 0
        for place, folders, files in os.walk(folder, onerror=unreadable):
            for name in folders + files:
                path = Path(place, name)
                said = _entry_problem(path, path.relative_to(folder), student, uid)
                if said:
                    return said
                size += path.lstat().st_size if name in files else 0
    except OSError as error:
        return f"it cannot be read ({error.strerror}: {error.filename})"
    if size > max_bytes:
        return f"it holds {size:,} bytes, more than nbgrader's submit allows ({max_bytes:,})"
    return None


class CheckedCollect(ExchangeCollect):
    """nbgrader's collect, passing over the inbound's folders that `problem` refuses."""

    src_records: list[dict]  # nbgrader's: the folder it collects for each student (init_src)

    # nbgrader's own owner check only warns (in a log no one reads); `problem` refuses instead
    check_owner = Bool(False).tag(config=True)

    def init_src(self) -> None:
        self._refused: list[dict] = []
        self._unchecked: dict[str, str] = {}  # student -> the owner of their folder
        super().init_src()

    def _say(self, student: str, text: str) -> None:
        self.log.warning(f"{NOTE} [{student}] {text}")

    def _path_to_record(self, path: str) -> dict:
        try:
            record = super()._path_to_record(path)
        except (ExchangeError, ValueError, OverflowError) as error:  # one folder, not the whole run
            name = os.path.basename(path)
            record = {"username": name.split("+")[0], "filename": name}
            record["problem"] = (
                f"its name is not nbgrader's <student>+<assignment>+<time> ({error})"
            )
        else:
            limit = 1000 * self.coursedir.max_dir_size
            record["problem"] = problem(Path(path), record["username"], limit)
            if account(record["username"]) is None:
                self._unchecked[record["username"]] = _owner(os.lstat(path).st_uid)
        if record["problem"]:
            self._refused.append(record)
            # never the one nbgrader picks, whatever the due date: the newest passing one is
            record["timestamp"] = datetime.max
        return record

    def _sort_by_timestamp(self, records: list[dict]) -> list[dict]:
        return sorted(records, key=lambda r: (not r["problem"], r["timestamp"]), reverse=True)

    def copy_files(self) -> None:
        collected = {r["username"] for r in self.src_records if not r["problem"]}
        for record in self._refused:
            student = record["username"]
            self._say(
                student,
                f"NOT COLLECTED {record['filename']}: {record['problem']}; "
                + (
                    f"{student}'s newest submission that passes is the one collected"
                    if student in collected
                    else f"no other submission of {student}'s is in the inbound"
                ),
            )
        for leftover in sorted(Path(self.inbound_path).glob(STAGING + "*")):
            name = leftover.name[len(STAGING) :]
            if f"+{self.coursedir.assignment_id}+" in name:
                self._say(
                    name.split("+")[0],
                    f"NOT COLLECTED {leftover.name}: a hand-in that did not finish (being copied "
                    "now, or stopped half-way); remove it once no one is handing in",
                )
        if self._unchecked:
            self._say(
                "",
                f"ownership NOT CHECKED for {len(self._unchecked)} submission(s) "
                f"({', '.join(f'{s}: {o}' for s, o in sorted(self._unchecked.items()))}): no "
                "account on this machine has their student id as its name, so the owner of the "
                "files cannot say who handed them in (on JupyterHub, use an authenticated "
                "exchange: docs/instructors.md)",
            )
        self.src_records = [r for r in self.src_records if not r["problem"]]
        super().copy_files()

"""nbgrader's submit, which names what makes a folder too big and never leaves half a hand-in.

nbgrader 0.9.6 refuses a folder over `max_dir_size` with its byte count only ("Directory size is too
big. Size is 3756972829, ..."), counting the files it leaves out too. The students' configuration
(`c.ExchangeFactory.submit`) puts this class in its place, in JupyterLab's Assignment List and in
`nbgrader submit` alike: the same refusal, with the largest files and what to do
(course.notebook.handin).

nbgrader copies a submission straight under its final name in the inbound, so a copy that fails
half-way (the exchange's disk full) stays there as the student's newest submission, and collect
takes it. This one copies into a hidden folder of the inbound, which collect's pattern never
matches, and moves it under its name once it is whole (a rename: atomic on one file system); a
failure removes what it copied, here and in the student's nbgrader cache.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
from pathlib import Path

from nbgrader.exchange import ExchangeError
from nbgrader.exchange.default.submit import ExchangeSubmit

from course.i18n import _

# The hidden folder a hand-in is copied into before it gets its name; collection
# (course.instructor.exchange_collect) names any that a stopped hand-in left.
STAGING = ".incomplete-"


def _disk_full(error: BaseException) -> bool:
    """Whether `error` (an OSError, or shutil.copytree's list of them) says a disk or quota is
    full."""
    full = (errno.ENOSPC, errno.EDQUOT)
    if isinstance(error, shutil.Error):
        return any(os.strerror(code) in str(error) for code in full)
    return isinstance(error, OSError) and error.errno in full


class TooBig(RuntimeError):
    """nbgrader's refusal of a folder over max_dir_size, with what makes it so big."""


class NamingSubmit(ExchangeSubmit):
    """nbgrader's default submit; over the size limit, its error names the largest files, every
    refusal of nbgrader's says that nothing was handed in and where the exchange is, and a copy is
    whole in the inbound or not there at all."""

    inbound_path: str  # nbgrader's, set in init_dest

    def fail(self, msg) -> None:
        super().fail(
            f"{msg}\n"
            + _(
                "Nothing was handed in. The exchange is {root} (nbgrader_config.py sets it; "
                "COURSE_EXCHANGE=/path overrides it): ask your instructor which exchange folder "
                "the course uses and whether the assignment was released there, then submit again."
            ).format(root=self.root)
        )

    def copy_files(self) -> None:
        inbound, name = self.inbound_path, self.assignment_filename
        staging = os.path.join(inbound, STAGING + name)
        # nbgrader's copy in the student's cache (what fetch_feedback and the Assignment List read)
        cached = os.path.join(
            self.cache_path, name.rsplit("+", 1)[0] if self.add_random_string else name
        )
        try:
            os.mkdir(staging)
            # as nbgrader leaves a submission: the instructor can remove it
            os.chmod(staging, 0o777)
            self.inbound_path = staging  # nbgrader copies into staging/<name>
            super().copy_files()
            os.rename(os.path.join(staging, name), os.path.join(inbound, name))
        except Exception as error:
            shutil.rmtree(staging, ignore_errors=True)
            shutil.rmtree(cached, ignore_errors=True)
            if isinstance(error, (TooBig, ExchangeError)):  # nbgrader's refusals, said already
                raise
            first = str(error).splitlines()[0][:300] if str(error) else type(error).__name__
            said = (
                _(
                    "The exchange {root} is full (no space left on its disk), so nothing was "
                    "handed in, and nothing of this attempt was left there. Tell your instructor; "
                    "your work is still in your folder."
                )
                if _disk_full(error)
                else _(
                    "Handing in failed while copying into the exchange {root} ({error}), so "
                    "nothing was handed in, and nothing of this attempt was left there. Your work "
                    "is still in your folder: submit again, and tell your instructor if it fails "
                    "again."
                )
            ).format(root=self.root, error=first)
            self.log.error(said)
            raise ExchangeError(said) from error
        finally:
            self.inbound_path = inbound
        with contextlib.suppress(OSError):  # handed in all the same; collection names a leftover
            os.rmdir(staging)

    def do_copy(self, src, dest, log=None) -> None:
        limit = 1000 * self.coursedir.max_dir_size
        size = self.get_size(src)
        if size > limit:
            from course.notebook import handin  # the snapshot rules: only for a refused folder

            said = handin.refusal(Path(src), size, limit)
            self.log.error(_("Directory size is too big"))
            for line in said.splitlines():  # the command line shows logged errors only
                self.log.error(line)
            raise TooBig(
                _("Directory size is too big. Size is {size}, maximum size is {limit}.").format(
                    size=size, limit=limit
                )
                + f"\n{said}"
            )
        super().do_copy(src, dest, log)

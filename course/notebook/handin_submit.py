"""nbgrader's submit, which names what makes a folder too big.

nbgrader 0.9.6 refuses a folder over `max_dir_size` with its byte count only ("Directory size is too
big. Size is 3756972829, ..."), counting the files it leaves out too. The students' configuration
(`c.ExchangeFactory.submit`) puts this class in its place, in JupyterLab's Assignment List and in
`nbgrader submit` alike: the same refusal, with the largest files and what to do
(course.notebook.handin).
"""

from __future__ import annotations

from pathlib import Path

from nbgrader.exchange.default.submit import ExchangeSubmit

from course.i18n import _


class NamingSubmit(ExchangeSubmit):
    """nbgrader's default submit; over the size limit, its error names the largest files, and every
    refusal of nbgrader's says that nothing was handed in and where the exchange is."""

    def fail(self, msg) -> None:
        super().fail(
            f"{msg}\n"
            + _(
                "Nothing was handed in. The exchange is {root} (nbgrader_config.py sets it; "
                "COURSE_EXCHANGE=/path overrides it): ask your instructor which exchange folder "
                "the course uses and whether the assignment was released there, then submit again."
            ).format(root=self.root)
        )

    def do_copy(self, src, dest, log=None) -> None:
        limit = 1000 * self.coursedir.max_dir_size
        size = self.get_size(src)
        if size > limit:
            from course.notebook import handin  # the snapshot rules: only for a refused folder

            said = handin.refusal(Path(src), size, limit)
            self.log.error(_("Directory size is too big"))
            for line in said.splitlines():  # the command line shows logged errors only
                self.log.error(line)
            raise RuntimeError(
                _("Directory size is too big. Size is {size}, maximum size is {limit}.").format(
                    size=size, limit=limit
                )
                + f"\n{said}"
            )
        super().do_copy(src, dest, log)

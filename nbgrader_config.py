"""nbgrader's configuration for the course (the repository root is the course directory).

solutions/ is nbgrader's source (with solutions and hidden tests), notebooks/ the student release
made from it by `python -m course release` (which runs nbgrader generate_assignment). Students get
their own configuration, made from this one by `python -m course bundle` (docs/instructors.md).
"""

import os
from pathlib import Path

c = get_config()  # noqa: F821 (nbgrader provides it)

c.CourseDirectory.course_id = "chainer-distributed-training"
# The exchange release_assignment, fetch_assignment, submit, collect and the feedback apps share:
# COURSE_EXCHANGE (a folder every student and instructor can reach, on a cluster), else exchange/
# beside this file (a trial on one machine; nbgrader creates it, no root needed).
c.Exchange.root = os.environ.get("COURSE_EXCHANGE") or str(
    Path(__file__).resolve().parent / "exchange"
)
# <exchange>/<course id>/... and the student's <course id>/<assignment> folder: several courses can
# share one exchange and one JupyterHub (nbgrader's multi-course setup).
c.Exchange.path_includes_course = True
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "notebooks"
# Kept out of releases and submissions: data sets, trainer snapshots, Python caches. Job outputs
# (runs/ and the *.o<number> logs) must stay in submissions: the grader reads them.
c.CourseDirectory.ignore = [
    ".ipynb_checkpoints",
    "*.pyc",
    "__pycache__",
    "feedback",
    "*.npz",
    "*.tar.gz",
    "snapshot_iter_*",
    "snapshot.[0-9]*.[0-9]*",
    "core",
    "core.*",
    ".snapshot*.sha256",  # a snapshot's digest (course/runtime/snapshot_integrity.py)
]
# nbgrader submit refuses a folder over max_dir_size (kB) and counts the ignored files too: a
# finished run removes its snapshots, but one a walltime stopped keeps them (one file per rank at
# stage 3), so 100 MB (nbgrader's default) is too tight; notebook 03's last cell
# (course.notebook.handin.check) names what to remove. Files over max_file_size (kB, 100 MB) are
# left out with a warning only.
c.CourseDirectory.max_dir_size = 2_000_000
c.CourseDirectory.max_file_size = 100_000
# nbgrader's submit, whose refusal of a folder over max_dir_size names its largest files.
c.ExchangeFactory.submit = "course.notebook.handin_submit.NamingSubmit"
# nbgrader's collect, passing over a submission that is incomplete, holds links, or whose files
# belong to another account than the student it is named for; the student's newest one that passes
# is collected instead (course/instructor/exchange_collect.py).
c.ExchangeFactory.collect = "course.instructor.exchange_collect.CheckedCollect"

# The hub's authenticated exchange (COURSE_HUB_EXCHANGE=ngshare): ngshare files each hand-in under
# the hub user whose token sent it, so no one can hand in under a classmate's name.
if os.environ.get("COURSE_NGSHARE_URL"):
    import ngshare_exchange  # noqa: E402

    ngshare_exchange.configureExchange(c, os.environ["COURSE_NGSHARE_URL"])

# `### BEGIN ALWAYS HIDDEN TESTS` regions: out of the release like hidden tests, and out of the
# feedback too, where nbgrader shows hidden tests (course/instructor/always_hidden.py).
from course.instructor.always_hidden import (  # noqa: E402
    assignment_preprocessors,
    feedback_preprocessors,
)

c.GenerateAssignment.preprocessors = assignment_preprocessors()
# What a student wrote or printed is cleaned of script when autograde stores the graded notebook
# (course/instructor/submission_html.py); the feedback cleans it again, for notebooks graded before.
from course.instructor.submission_html import SanitizeSubmission  # noqa: E402

c.GenerateFeedback.preprocessors = [*feedback_preprocessors(), SanitizeSubmission]

# What a student finds in a cell to fill in.
c.ClearSolutions.code_stub = {"python": "# PUT YOUR CODE HERE\nraise NotImplementedError()"}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE"

# Autograde runs no kernel: the verifier runs each test cell on the student's functions in a sandbox
# (course/instructor/verify.py), and nbgrader scores the outputs it produced.
from course.instructor.nbgrader_hook import (  # noqa: E402
    autograde_preprocessors,
    sanitize_preprocessors,
)

c.Autograde.autograde_preprocessors = autograde_preprocessors()
# A test cell a student deleted is put back from the gradebook and graded there: the test is the
# instructor's, and the verifier runs the instructor's copy anyway. grades-details.csv flags it.
c.OverwriteCells.add_missing_cells = True
c.Autograde.sanitize_preprocessors = sanitize_preprocessors()
# VerifiedExecute.timeout: seconds a test cell may run (its default, nbgrader_hook.CELL_TIMEOUT).

# Autograde copies the submission's files, then overwrites the ones whose names the source folder
# also has with the instructor's copies. The stages' training scripts the student's notebook
# writes itself: keep theirs.
from course.contracts import stages  # noqa: E402
from course.instructor import editions  # noqa: E402

# Every edition (course/instructor/editions.py): the English one and each translation.
c.Autograde.exclude_overwriting = {
    assignment: [stage.script for stage in stages.STAGES.values()]
    for assignment in editions.ASSIGNMENTS
}

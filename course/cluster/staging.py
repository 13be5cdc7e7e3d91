"""`course launch --stage-data`: the run's data set copied to the node's local storage before the
ranks start, and the training pointed at the copy (Hanawa's report on Reedbush-H: a data set read
from the shared file system at every epoch competes with every job of the centre).

Only rank 0 of the course's training scripts reads the data set and scatters it to the others, and
`course launch` runs where rank 0 does (the job's first node), so one copy serves the whole job.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from course.contracts import joblog
from course.errors import JobError
from course.i18n import _


def dataset_name(command: list[str]) -> str:
    """The data set the training `command` reads: its --dataset, else the job's COURSE_DATASET,
    else "auto" (as course.runtime.flags resolves it)."""
    for word, following in zip(command, [*command[1:], ""]):
        flag, equals, value = word.partition("=")
        if flag == "--dataset":
            return value if equals else following
    return os.environ.get("COURSE_DATASET") or "auto"


def stage(command: list[str], folder: Path) -> tuple[Path, str]:
    """Copy the data set file of `command` into `folder` (new, node-local), in Chainer's layout;
    returns (the CHAINER_DATASET_ROOT that finds it there, the job log's line saying how long the
    copy took)."""
    from course.runtime import data

    name = data.resolve(dataset_name(command))
    source = data.path_for(name)
    if not source.is_file():
        raise JobError(
            _("STAGE_DATA: the data set {name} is not at {source}, so it cannot be staged").format(
                name=name, source=source
            ),
            data.prepare_hint(name),
        )
    target = folder / source.relative_to(data.data_dir().parent.parent.parent)
    target.parent.mkdir(parents=True)
    start = time.perf_counter()
    shutil.copyfile(source, target)  # a new folder: nothing reads the copy before it is whole
    seconds = time.perf_counter() - start
    return folder, joblog.staged_line(name, target, target.stat().st_size, seconds)

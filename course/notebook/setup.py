"""The first cell of every notebook: where it runs, and the data the jobs will read."""

from __future__ import annotations

import os
import warnings

from course import gpu
from course.cluster import siteenv
from course.cluster.siteenv import SiteSettings
from course.cluster.submit import nbgrader_running
from course.contracts import stages
from course.errors import CourseError
from course.runtime import data, data_prepare


def setup(stage_name: str) -> None:
    """Say where this notebook runs, and make sure the data the jobs read is there."""
    stage = stages.get(stage_name)
    # nbgrader gives no points to a test cell that writes to stderr: keep third-party warnings
    # quiet.
    warnings.filterwarnings("ignore", module=r"(chainer|chainermn|numpy|mpi4py)(\.|$)")
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    try:
        settings = siteenv.of_folder(os.getcwd())
    except CourseError:
        print(
            "Note: no jobs/site_env.sh here. Open the notebooks from the assignment folder (it has "
            "jobs/), "
            "so that the jobs find your scripts."
        )
        settings = SiteSettings()  # no site: its name shows as ?
    for name, value in settings.job_environment().items():  # as the jobs will see them
        os.environ.setdefault(name, value)
    found = gpu.visible_gpus()
    scheduler = settings.scheduler
    print(
        f"Stage {stage.number} ({stage.name}) | site profile: {settings.site or '?'} "
        f"(jobs go to {'this machine' if scheduler == 'local' else 'qsub'}) | "
        "GPUs here: "
        f"{found.count}{' (' + ', '.join(sorted(set(found.names))) + ')' if found.count else ''}"
    )
    name = os.environ.get("COURSE_DATASET", "auto")
    try:
        print(f"Data: {data.info(data.resolve(name)).describe()}")
    except CourseError as e:
        if name in (data.SYNTHETIC, "auto") and scheduler == "local" and not nbgrader_running():
            print(f"Data: {data_prepare.prepare_synthetic().describe()} (made now)")
        else:
            print(f"Data: {e}")

"""The first cell of every notebook: where it runs, and the data the jobs will read."""

from __future__ import annotations

import os
import warnings

from course import gpu, i18n
from course.cluster import siteenv
from course.cluster.siteenv import SiteSettings
from course.cluster.submit import nbgrader_running
from course.contracts import stages
from course.errors import CourseError
from course.i18n import _
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
            _(
                "Note: no jobs/site_env.sh here. Open the notebooks from the assignment folder (it "
                "has jobs/), so that the jobs find your scripts."
            )
        )
        settings = SiteSettings()  # no site: its name shows as ?
    for name, value in settings.job_environment().items():  # as the jobs will see them
        os.environ.setdefault(name, value)
    found = gpu.visible_gpus()
    scheduler = settings.scheduler
    gpus = (
        f"{found.count} ({i18n.listed(sorted(set(found.names)))})"
        if found.count
        else f"{found.count}"
    )
    print(
        (
            _(
                "Stage {number} ({stage}) | site profile: {site} (jobs go to this machine) | "
                "GPUs here: {gpus}"
            )
            if scheduler == "local"
            else _(
                "Stage {number} ({stage}) | site profile: {site} (jobs go to qsub) | GPUs here: "
                "{gpus}"
            )
        ).format(number=stage.number, stage=stage.name, site=settings.site or "?", gpus=gpus)
    )
    name = os.environ.get("COURSE_DATASET", "auto")
    try:
        print(_("Data: {data}").format(data=data.info(data.resolve(name)).describe()))
    except CourseError as e:
        if name in (data.SYNTHETIC, "auto") and scheduler == "local" and not nbgrader_running():
            print(
                _("Data: {data} (made now)").format(
                    data=data_prepare.prepare_synthetic().describe()
                )
            )
        else:
            print(_("Data: {data}").format(data=e))

"""The 2018 Reedbush-H hands-on's optional experiment: on one node with N GPUs, stage 2
(MultiprocessParallelUpdater) beside stage 3 with N ranks on that node (ChainerMN), in one table.
Only GPU runs compare: stage 2 needs GPUs."""

from __future__ import annotations

import html
from pathlib import Path

from course import evidence, gpu
from course.contracts import stages
from course.i18n import _
from course.notebook.report import html_table


def _on_one_node(run: evidence.Run) -> bool:
    return len(set(run.hosts)) == 1


def rows(folder: Path = Path(".")) -> list[dict]:
    """One row per traced GPU run on one node with 2 or more GPUs, of stage 2 and of stage 3, for
    every GPU count both stages have."""
    found = {
        name: [
            run
            for run in evidence.runs(name, folder)
            if run.traced
            and run.workers > 1
            and run.record.get("device_kind") == "gpu"
            and _on_one_node(run)
        ]
        for name in (stages.MULTI_GPU.name, stages.MULTI_NODE.name)
    }
    shared = {run.workers for run in found[stages.MULTI_GPU.name]} & {
        run.workers for run in found[stages.MULTI_NODE.name]
    }
    return [
        {
            "stage": name,
            "how": "MultiprocessParallelUpdater"
            if name == stages.MULTI_GPU.name
            else f"ChainerMN, {run.setting}",  # names, as they are in any language
            "GPUs": run.workers,
            "GPU model": run.record.get("gpu_model"),
            "img/s": round(run.images_per_sec, 1),
            "run": run.path.parent.name,
        }
        for name, runs in found.items()
        for run in runs
        if run.workers in shared
    ]


def why_empty(folder: Path = Path(".")) -> str:
    """What is missing for the comparison, as it is."""
    if not evidence.runs(stages.MULTI_GPU.name, folder):
        found = gpu.visible_gpus().count
        if found == 1:
            return _(
                "This machine has 1 GPU, and stage 2 has no run: MultiprocessParallelUpdater "
                "needs 2 or more GPUs in one node, so there is nothing to put beside ChainerMN "
                "here. On a node with 2 or more GPUs, run stage 2's job and stage 3 with -l "
                "select=1:mpiprocs=2 (one rank per GPU); this table then shows both."
            )
        if found < 2:
            return _(
                "This machine has no GPUs, and stage 2 has no run: MultiprocessParallelUpdater "
                "needs 2 or more GPUs in one node, so there is nothing to put beside ChainerMN "
                "here. On a node with 2 or more GPUs, run stage 2's job and stage 3 with -l "
                "select=1:mpiprocs=2 (one rank per GPU); this table then shows both."
            )
        return _("Stage 2 has no run yet: submit notebook 02's job on this node.")
    return _(
        "No traced stage-2 and stage-3 runs on one node with the same number of GPUs: run stage 3 "
        "with -l select=1:mpiprocs=N for the N GPUs of your stage-2 run."
    )


def show(folder: Path = Path(".")) -> list[dict]:
    """The table, or what is missing for it."""
    from IPython.display import HTML, display

    table = rows(folder)
    if not table:
        print(why_empty(folder))
        return table
    headings = {
        "stage": _("stage"),
        "how": _("how"),
        "GPUs": "GPUs",
        "GPU model": _("GPU model"),
        "img/s": "img/s",
        "run": _("run"),
    }
    display(
        HTML(html_table(table, list(table[0]), lambda value: html.escape(str(value)), headings))
    )
    return table

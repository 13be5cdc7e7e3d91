"""What the run part's checks (course.lessons.run_part.checks) observe of the student's
`resource_request` and `run_lines`: the #PBS lines it returns, and what its shell lines set, copy
and launch, run in bash with a recording mpiexec (course.notebook.checks.observe)."""

from __future__ import annotations

from typing import Any

from course.i18n import _
from course.notebook.checks.verdict import call


def request_lines(function: Any, cases: list[list]) -> list[dict]:
    """Per case [site's fields, ranks, threads per rank, epoch seconds, epochs]: {"lines": what
    resource_request returned} when it is a list of strings, else {"type": its type's name}."""
    from course.lessons.run_part import directives

    found: list[dict] = []
    for fields, ranks, threads, epoch_seconds, epochs in cases:
        site = directives.Site(**{**fields, "resources": tuple(fields["resources"])})
        lines = call(function, site, ranks, threads, epoch_seconds, epochs)
        if isinstance(lines, (list, tuple)) and all(isinstance(line, str) for line in lines):
            found.append({"lines": [str.__str__(line) for line in lines]})
        else:
            found.append({"type": type(lines).__name__})
    return found


# Stand-ins for mpiexec and mpirun in the run part's sandbox: each call records its words and the
# environment it would pass on, and starts nothing.
_RECORDER = """#!/bin/sh
record="$COURSE_LAUNCH_RECORDS/$(ls "$COURSE_LAUNCH_RECORDS" | wc -l)"
mkdir "$record"
printf '%s\\0' "$(basename "$0")" "$@" > "$record/argv"
env -0 > "$record/env"
"""
# What bash itself changes, and the sandbox for each run.
_SANDBOX_OWN = {"PWD", "OLDPWD", "_", "SHLVL", "COURSE_LAUNCH_RECORDS"}
RUN_SECONDS = 120  # the lines copy a file of a few KiB: a busy machine gets a wide margin


def run_part(function: Any, cases: list[list], folders: list[dict]) -> list[dict]:
    """Per case [site's fields, ranks per node, threads per rank, local_dir] and its folders
    {"shared": the data set's folder, "local": the node-local folder, "variable": the name
    local_dir expands, "work": where the job runs}: {"type": ...} when run_lines returns no list of
    strings, else {"lines", "status" (bash's exit status), "said" (its last words on stderr),
    "launches": per mpiexec/mpirun the lines started, {"argv", "root" (the CHAINER_DATASET_ROOT
    it got), "set" (the variables the lines set or changed, as it got them)}}."""
    from course.lessons.run_part import directives

    found: list[dict] = []
    for (fields, per_node, threads, local_dir), folder in zip(cases, folders):
        site = directives.Site(**{**fields, "resources": tuple(fields["resources"])})
        lines = call(function, site, per_node, threads, local_dir)
        if not (isinstance(lines, (list, tuple)) and all(isinstance(x, str) for x in lines)):
            found.append({"type": type(lines).__name__})
            continue
        lines = [str.__str__(line) for line in lines]
        base = _sandboxed("mpiexec true", folder, "baseline", per_node)
        done = _sandboxed("\n".join(lines), folder, "lines", per_node)
        before = base["launches"][0]["env"] if base["launches"] else {}
        launches = [
            {
                "argv": launch["argv"],
                "root": launch["env"].get("CHAINER_DATASET_ROOT"),
                "set": {
                    name: value
                    for name, value in launch["env"].items()
                    if before.get(name) != value and name not in _SANDBOX_OWN
                },
            }
            for launch in done["launches"]
        ]
        found.append({"lines": lines, **done, "launches": launches})
    return found


def _sandboxed(script: str, folder: dict, name: str, per_node: int) -> dict:
    """Run `script` with bash -eu in `folder`'s work folder, mpiexec and mpirun recording: a
    misspelt variable stops it rather than expanding to nothing (`cp -r "$MISSPELT/." ...` would
    copy the whole file system)."""
    import os
    import subprocess
    from pathlib import Path

    work = Path(folder["work"])
    bin_ = work / "bin"
    records = work / f"records-{name}"
    bin_.mkdir(parents=True, exist_ok=True)
    records.mkdir()
    for program in ("mpiexec", "mpirun"):
        (bin_ / program).write_text(_RECORDER)
        (bin_ / program).chmod(0o755)
    nodefile = work / "nodefile"
    nodefile.write_text("node1\n" * per_node + "node2\n" * per_node)  # as PBS lists mpiprocs
    env = {
        "PATH": f"{bin_}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        "HOME": str(work),
        "CHAINER_DATASET_ROOT": folder["shared"],
        folder["variable"]: folder["local"],
        "PBS_NODEFILE": str(nodefile),
        "PBS_JOBID": "1.course-check",
        "PBS_O_WORKDIR": str(work),
        "COURSE_LAUNCH_RECORDS": str(records),
        "COURSE_TRAIN_ARGS": "--epoch 1",  # the site's defaults, as jobs/site_env.sh sets them
    }
    try:
        done = subprocess.run(
            ["bash", "-eu", "-o", "pipefail", "-c", script],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=RUN_SECONDS,
        )
        status, said = done.returncode, done.stderr[-600:]
    except subprocess.TimeoutExpired:
        status, said = -1, _("the lines ran for more than {seconds} s").format(seconds=RUN_SECONDS)
    launches = []
    for record in sorted(records.iterdir(), key=lambda p: int(p.name)):
        argv = (record / "argv").read_bytes().decode(errors="replace").split("\0")[:-1]
        pairs = (record / "env").read_bytes().decode(errors="replace").split("\0")
        launch_env = dict(pair.split("=", 1) for pair in pairs if "=" in pair)
        launches.append({"argv": argv, "env": launch_env})
    return {"status": status, "said": said, "launches": launches}

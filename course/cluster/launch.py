"""`python -m course launch -- COMMAND`: start COMMAND as one MPI rank per slot of the job.

Reads the job's hosts and slots (PBS_NODEFILE, Slurm's variables, or this machine alone),
writes a host file, fills the site's launcher template ($COURSE_MPIEXEC, from the site profile)
and runs it, printing the command first so that the job log shows exactly what ran. The launcher
ends with this command: it is sent the signals this command gets, and SIGTERM if this command dies.
Template fields: {nprocs} {ranks_per_node} {nodes} {hostfile} {export} ({export} becomes
Open MPI's `-x NAME` for the variables the ranks need on other nodes).
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from course import gpu, i18n
from course.cli import command_parser
from course.cluster import hosts, mpi, procs, staging
from course.contracts import joblog
from course.errors import JobError
from course.i18n import _

DEFAULT_TEMPLATE = "mpiexec -n {nprocs} --hostfile {hostfile}"
# What `build` fills in; `course site apply` refuses a profile's template with any other field.
TEMPLATE_FIELDS = ("nprocs", "ranks_per_node", "nodes", "hostfile", "export")
# Open MPI's names for the allreduce algorithms of its `tuned` component. The stage-3 notebook maps
# them onto the Fujitsu study's (Yamazaki et al. 2016): nonoverlapping ~ BRB, recursive doubling
# ~ BRD, Rabenseifner ~ VHD.
ALLREDUCE = {
    "basic_linear": 1,
    "nonoverlapping": 2,
    "recursive_doubling": 3,
    "ring": 4,
    "segmented_ring": 5,
    "rabenseifner": 6,
}
FORWARDED = (
    "PATH",
    "LD_LIBRARY_PATH",
    "PYTHONPATH",
    "VIRTUAL_ENV",
    "CONDA_PREFIX",
    "CHAINER_DATASET_ROOT",
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "CHAINERMN_FORCE_ABORT_ON_EXCEPTION",
    "SLURM_RESTART_COUNT",  # which attempt a rerun job is, for the run's record
)


def build(
    job: hosts.JobEnvironment,
    command: list[str],
    template: str,
    hostfile: Path,
    allreduce: str = "",
) -> tuple[list[str], dict[str, str]]:
    """The launcher's argv and the extra environment of the ranks."""
    if not command:
        raise JobError(_("nothing to launch"), "python -m course launch -- python train.py ...")
    extra = {"COURSE_RUN_TAG": job.run_tag or "", **mpi.rank_environment()}
    if allreduce:
        if allreduce not in ALLREDUCE:
            raise JobError(
                _("unknown allreduce algorithm {algorithm}").format(algorithm=repr(allreduce)),
                _("one of {names}").format(names=i18n.listed(ALLREDUCE)),
            )
        # Open MPI 5's hierarchical `han` component outranks `tuned` on communicators that span
        # nodes and would choose its own algorithm: left out, so that the one asked for runs there
        # too.
        extra.update(
            COURSE_ALLREDUCE=allreduce,
            OMPI_MCA_coll_tuned_use_dynamic_rules="1",
            OMPI_MCA_coll_tuned_allreduce_algorithm=str(ALLREDUCE[allreduce]),
            OMPI_MCA_coll="^han",
        )
    oversubscribed = job.per_node > (
        os.cpu_count() or 1
    )  # the local scheduler allows it, with a warning
    if (
        oversubscribed
    ):  # ranks that busy-wait on a shared core wait for its time slice: let them yield it
        extra.update(mpi.YIELD_WHEN_IDLE)
    program = (shlex.split(template) or [""])[0]
    launcher = mpi.find_launcher(program)
    if launcher is None:
        raise JobError(
            _("{program} is not found").format(program=program),
            _(
                "load the site's MPI module in the site profile's setup, or install the kit's mpi "
                'extra (pip install -e ".[mpi]")'
            ),
        )
    # Each rank checks that it is one of these (mpi.check_world), so another MPI's launcher, which
    # starts each copy alone, stops at once.
    extra.update(mpi.launch_environment(job.nprocs, launcher))
    names = sorted({*FORWARDED, *extra, *(k for k in os.environ if k.startswith("COURSE_"))})
    export = " ".join(f"-x {name}" for name in names if name in os.environ or name in extra)
    try:
        filled = template.format(
            nprocs=job.nprocs,
            ranks_per_node=job.per_node,
            nodes=job.nodes,
            hostfile=shlex.quote(str(hostfile)),
            export=export,
        )
    except (KeyError, IndexError) as e:
        raise JobError(
            # TRANSLATORS: {field} is the field's name as Python names it ('gpus'); {template} the
            # template, quoted
            _("the site's launcher template has an unknown field {field}: {template}").format(
                field=e, template=repr(template)
            ),
            _("fields: {fields}").format(
                fields=" ".join("{" + field + "}" for field in TEMPLATE_FIELDS)
            ),
        ) from None
    argv = shlex.split(filled)
    if oversubscribed:  # else Open MPI refuses to bind more ranks than cores
        argv = [
            f"{word}:overload-allowed" if before == "--bind-to" and ":" not in word else word
            for before, word in zip(["", *argv], argv)
        ]
    return [launcher, *argv[1:], *command], extra


def write_hostfile(job: hosts.JobEnvironment, folder: Path) -> Path:
    """Open MPI's host file (`host slots=N`), one line per node."""
    path = Path(folder) / "hostfile"
    path.write_text("".join(f"{host} slots={slots}\n" for host, slots in job.hosts))
    return path


def main(argv: list[str] | None = None) -> int:
    parser = command_parser("course launch", __doc__)
    parser.add_argument(
        "--allreduce",
        default="",
        help=_("Open MPI allreduce algorithm: {names}").format(names=i18n.listed(ALLREDUCE)),
    )
    parser.add_argument(
        "--stage-data",
        action="store_true",
        help=_(
            "copy the data set to this node's $TMPDIR (else /tmp) first, and train from the copy"
        ),
    )
    parser.add_argument(
        "command", nargs=argparse.REMAINDER, help=_("-- then the command of one rank")
    )
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    job = hosts.detect()
    template = os.environ.get("COURSE_MPIEXEC") or DEFAULT_TEMPLATE
    with tempfile.TemporaryDirectory(prefix="course-launch-") as tmp:  # in $TMPDIR, else /tmp
        if args.stage_data:  # the copy goes when the launch ends, with the host file
            root, said = staging.stage(command, Path(tmp) / "data")
            print(said, flush=True)
            os.environ["CHAINER_DATASET_ROOT"] = str(root)  # for the ranks, on every node
        argv_, extra = build(job, command, template, write_hostfile(job, Path(tmp)), args.allreduce)
        print(joblog.launch_line(job.job_id, job.scheduler, job.hosts), flush=True)
        found = gpu.visible_gpus()
        if found.count and job.per_node > found.count:
            # the log's launch lines (joblog.launches) allow warnings, in any words, after this
            # prefix
            warning = _(
                "{ranks} ranks per node but this node has {gpus} GPU(s); ranks past the last GPU "
                "cannot bind one"
            ).format(ranks=job.per_node, gpus=found.count)
            print(f"{joblog.LAUNCH_PREFIX}warning: {warning}", flush=True)
        print(joblog.launch_command_line(argv_), flush=True)
        return run(argv_, {**os.environ, **extra})


def run(argv: list[str], env: dict[str, str]) -> int:
    """Run the launcher as a part of this process: it gets the stop signals this process gets, and
    SIGTERM when this process dies, even by SIGKILL (it then stops its ranks), so that no rank
    trains on after the job. Returns its exit status as a shell shows it (128 + N for signal N)."""
    process = subprocess.Popen(argv, env=env, preexec_fn=procs.die_with_parent())

    def forward(signum: int, frame) -> None:
        process.send_signal(signum)

    previous = {sig: signal.signal(sig, forward) for sig in procs.STOP_SIGNALS}
    try:
        return procs.exit_code(process.wait())
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


if __name__ == "__main__":
    sys.exit(main())

"""Submitting the course's job scripts: to the site's `qsub`, or to the embedded local scheduler.

    job = course.submit("jobs/run_single_gpu_training.sh")   # qsub -j oe jobs/...
    job.wait()

Which one comes from jobs/site_env.sh (the applied site profile): the `local` profile runs jobs
on this machine (course.cluster.localsched); the others hand them to `qsub -j oe`. While nbgrader runs a
notebook (autograde or validate) nothing is submitted: the grader reads the job outputs that
came with the submission.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from course import gpu, joblog, paths, stages
from course.cluster import localsched, pbs, siteenv
from course.errors import CourseError, JobError
from course.stubs import stubbed_functions


def nbgrader_running() -> bool:
    """True while nbgrader executes the notebook (it sets NBGRADER_EXECUTION): then nothing is submitted."""
    return bool(os.environ.get("NBGRADER_EXECUTION"))


def site_settings(workdir: Path) -> dict[str, str]:
    return siteenv.read(siteenv.in_folder(workdir))


def site_resources(settings: dict[str, str]) -> list[str]:
    """The site's own `-l` resource names (its profile's `resources`), allowed besides PBS's."""
    return settings.get("COURSE_RESOURCES", "").split()


def check_training_scripts(script: Path, workdir: Path) -> None:
    """Refuse a job whose training script is missing (JobError) or still has stubs (NotImplementedError)."""
    for name in sorted(set(re.findall(r"\b(train_\w+\.py)\b", script.read_text()))):
        target = Path(workdir) / name
        if not target.is_file():
            raise JobError(
                f"the job runs {name}, which does not exist yet",
                "run the notebook cell that writes it (course.notebook.write_script) first",
            )
        stubs = stubbed_functions(target.read_text())
        if stubs:
            raise NotImplementedError(
                f"{name} still has PUT YOUR CODE HERE stubs in {', '.join(stubs)}: "
                "fill them in, run their self-checks, then write the script again"
            )


@dataclass
class Job:
    """A submitted job: its id, the folder it was submitted from, and how to follow it."""

    id: str
    workdir: Path
    scheduler: str  # local or qsub
    log: Path | None = None
    _local: localsched.LocalJob | None = field(default=None, repr=False)

    @property
    def number(self) -> str:
        return joblog.job_number(self.id)

    def find_log(self) -> Path | None:
        """The joined stdout/stderr file, <name>.o<number> in the submit folder."""
        if self.log is not None and self.log.exists():
            return self.log
        self.log = joblog.find(self.workdir, self.id)
        return self.log

    def exit_status(self) -> int | None:
        """How the job ended, as an exit status (never 0 for a killed job; see course.joblog.end): the
        local scheduler's record, else the log's end line or its scheduler's kill notice; None while it runs."""
        if self._local is not None:
            return self._local.exit_status()
        log = self.find_log()
        if log is None:
            return None
        return joblog.exit_status(log.read_text(errors="replace"))

    def ending(self) -> joblog.End | None:
        """How the log says the job ended, e.g. it 'was killed at its walltime'; None while it runs."""
        log = self.find_log()
        return joblog.end(log.read_text(errors="replace")) if log else None

    def wait(
        self,
        timeout: float | None = None,
        echo: Callable[[str], None] | None = print,
        poll: float = 5.0,
    ) -> int | None:
        """Wait for the job to end; print its log as it grows; return its exit status.

        Interrupted (Ctrl-C, or the notebook's stop button), it says how to follow or cancel the job,
        which goes on running, and raises KeyboardInterrupt."""
        if echo is not None:
            show_line = echo

            def echo(line: str) -> None:
                show_line(joblog.clean(line))

        try:
            if self._local is not None:
                status = self._local.wait(timeout, echo, poll=min(poll, 0.5))
            else:
                status = self._wait_qsub(timeout, echo, poll)
        except KeyboardInterrupt:
            self._interrupted(echo or print)
            raise
        if echo and status is not None:
            end = self.ending()
            says = (
                f"{end.says} (exit status {status})"
                if end and end.kind != "exit"
                else f"ended with exit status {status}"
            )
            echo(f"[job {self.id} {says}; log: {self.find_log()}]")
            if status != 0:
                echo(f"[what went wrong: {self.diagnosis()}]")
        return status

    def cancel_command(self) -> str:
        if self.scheduler == "local":
            return f"python -m course cancel {self.id}"
        return f"qdel {self.id} (on Slurm: scancel {self.number})"

    def _interrupted(self, echo: Callable[[str], None]) -> None:
        """Say that the job goes on, and how to stop it; in a terminal, offer to cancel it."""
        echo(
            f"[stopped following job {self.id}; it goes on running. Its log: {self.find_log()}; "
            f"to cancel it: {self.cancel_command()}]"
        )
        if self.scheduler != "local" or not sys.stdin.isatty():  # nobody to answer: ask nothing
            return
        try:
            answer = input(f"cancel job {self.id} now? [y/N] ")
        except (EOFError, KeyboardInterrupt):
            return
        if answer.strip().lower() in ("y", "yes"):
            localsched.cancel(self.id)
            echo(f"[job {self.id} was cancelled; log: {self.find_log()}]")

    def diagnosis(self) -> str:
        """The likeliest cause of a failed job, read from its log, and what to do about it."""
        log = self.find_log()
        if log is None:
            return f"the job left no log *.o{self.number} in {self.workdir}" + (
                "" if self.scheduler == "local" else f": ask the scheduler (qstat -x -f {self.id})"
            )
        return explain(
            log.read_text(errors="replace"), self.id, self.scheduler == "local", log.name
        )

    def _wait_qsub(self, timeout: float | None, echo, poll: float) -> int | None:
        deadline = None if timeout is None else time.monotonic() + timeout
        shown = 0
        while True:
            state = qstat_state(self.id)
            log = self.find_log()
            text = log.read_text(errors="replace") if log is not None else ""
            # A killed job writes no end line; without qstat its scheduler's kill notice is the only sign.
            ended = (
                self.exit_status() is not None
                or (state == "finished" and log is not None)
                or joblog.killed_by_scheduler(text)
            )
            if echo and text:
                lines = text.splitlines()
                upto = (
                    len(lines) if ended else max(shown, len(lines) - 1)
                )  # the last line may be incomplete
                for line in lines[shown:upto]:
                    echo(line)
                shown = upto
            if ended:
                status = self.exit_status()
                return status if status is not None else -1
            if deadline is not None and time.monotonic() > deadline:
                return None
            time.sleep(poll)


def _rank_killed(m: re.Match) -> str:
    number = int(m["signal"])
    why = {
        9: "most often the node ran out of memory: a smaller batch or model, or fewer ranks per node",
        11: "a crash in compiled code (CuPy, MPI, NumPy): the lines above it may say where",
    }
    return f"MPI rank {m['rank']} on {m['node']} was killed by signal {number} ({m['name']})" + (
        f": {why[number]}" if number in why else ""
    )


def _scheduler_kill(end: joblog.End, local: bool) -> str | None:
    """What a scheduler's kill notice means for the student; None when no scheduler killed the job."""
    if end.kind == "walltime":
        return (
            "the walltime ran out: train fewer epochs, or ask for more time (-l walltime=HH:MM:SS)"
        )
    if end.kind == "cancelled":
        who = (
            "python -m course cancel, or its scheduler was stopped"
            if local
            else "qdel or scancel, or an admin"
        )
        return f"the job was cancelled ({who}): submit it again"
    if end.kind == "lost":
        return (
            "the local scheduler's process was killed (or the machine ran out of memory), which stops its job: "
            "submit it again"
        )
    if end.kind == "killed":
        return f"the job {end.says}: ask for more of it in the job's #PBS -l lines"
    return None


# What else a failed job's log can show, most telling first: (pattern, what it means). Bash's, Open MPI's
# and Python's own words, and the kit's error lines (course.joblog).
_CAUSES: list[tuple[re.Pattern, Callable[[re.Match], str]]] = [
    (
        re.compile(r"^(?P<file>\S+): line (?P<line>\d+): syntax error(?P<what>.*)$", re.M),
        lambda m: (
            f"bash cannot read the job script: syntax error{m['what']} at line {m['line']} of "
            f"{Path(m['file']).name}: fix that line (bash -n SCRIPT checks a script without running it)"
        ),
    ),
    (joblog.KIT_ERROR, lambda m: f"course {m['command']}: {m['message']}: {m['fix']}"),
    (
        re.compile(
            r"^(?P<file>\S+): line (?P<line>\d+): (?P<command>.+): command not found$", re.M
        ),
        lambda m: (
            f"line {m['line']} of {Path(m['file']).name} runs `{m['command']}`, which is not found: "
            "fix the name, or load its module in the site profile's setup"
        ),
    ),
    (
        re.compile(
            r"(?P<launcher>\w+) was unable to find the specified executable file[\s\S]*?Executable: (?P<exe>\S+)"
        ),
        lambda m: (
            f"{m['launcher']} could not find the program {m['exe']} to start as a rank: check its name "
            "and that it is installed on every node"
        ),
    ),
    (
        re.compile(
            r"(?P<launcher>\w+) noticed that process rank (?P<rank>\d+) with PID \d+ on node (?P<node>\S+) "
            r"exited on\s+signal (?P<signal>\d+) \((?P<name>[^)]*)\)"
        ),
        _rank_killed,
    ),
    (
        re.compile(r"^\s*(?P<error>[\w.]*(?:Error|Exception|Interrupt)\b:?.*)$", re.M),
        lambda m: f"{m['error'].strip()[:200]} (the traceback above it in the log shows where)",
    ),
]
_MISSING = re.compile(r"^.*No such file or directory.*$", re.M)


def explain(text: str, job_id: str, local: bool, log: str = "the log") -> str:
    """What a failed job's log shows went wrong (Job.diagnosis)."""
    end = joblog.end(text)
    killed = _scheduler_kill(end, local) if end else None
    if killed:
        return killed
    for pattern, meaning in _CAUSES:
        found = list(pattern.finditer(text))
        if found:
            return meaning(found[-1])  # the last: a traceback ends with the exception raised
    if end and end.kind == "signal":
        outside = (
            "kill, or the machine shutting down"
            if local
            else "qdel or scancel, an administrator, or a node failing"
        )
        return f"the job {end.says}, sent from outside it ({outside}): submit it again"
    missing = _MISSING.findall(text)
    if missing:
        return f"{missing[-1].strip()[:200]} (check that path; a job starts in your home folder)"
    if local:
        return (
            f"{log} names no cause: read it from the top; the command before its last line failed"
        )
    return (
        f"{log} names no cause; ask the scheduler why the job ended: "
        f"qstat -x -f {job_id} (PBS) or sacct -j {joblog.job_number(job_id)} (Slurm)"
    )


def qstat_state(job_id: str) -> str:
    """'queued', 'finished' (or no longer known), or 'unknown' when qstat cannot tell (no qstat, no server)."""
    qstat = paths.find_program("qstat")
    if qstat is None:
        return "unknown"
    run = subprocess.run([qstat, job_id], capture_output=True, text=True)
    if run.returncode != 0:
        said = run.stdout + run.stderr
        gone = ("Unknown Job Id", "Invalid job id", "has finished", "Job has been deleted")
        return "finished" if any(word in said for word in gone) else "unknown"
    # PBS Pro and Slurm's wrapper list a finished job a while longer, in state F or C.
    states = re.findall(
        rf"^{re.escape(job_id.split('.')[0])}\S*\s+\S+\s+\S+\s+\S+\s+([A-Z])\b", run.stdout, re.M
    )
    return "finished" if states and states[-1] in ("F", "C") else "queued"


def qsub_options(
    settings: dict[str, str], nodes: int | None, per_node: int | None, env: dict[str, str] | None
) -> list[str]:
    options = []
    if nodes is not None or per_node is not None:
        template = settings.get("COURSE_SELECT", "{nodes}:mpiprocs={ranks_per_node}")
        options += [
            "-l",
            "select=" + template.format(nodes=nodes or 1, ranks_per_node=per_node or 1),
        ]
    if env:
        for key, value in env.items():
            if "," in str(value):
                raise JobError(
                    f"-v {key}={value}: qsub cannot pass a comma in a value",
                    "use another separator",
                )
        options += ["-v", ",".join(f"{k}={v}" for k, v in env.items())]
    return options


def submit(
    script: str | Path,
    *,
    nodes: int | None = None,
    per_node: int | None = None,
    env: dict[str, str] | None = None,
    options: list[str] = (),
    scheduler: str = "auto",
    workdir: str | Path | None = None,
    echo: Callable[[str], None] | None = print,
    skip_without_gpus: bool = False,
) -> Job | None:
    """Submit a job script as `qsub -j oe` would; None while nbgrader runs the notebook.

    nodes, per_node: override the script's `select` (N nodes, M MPI ranks on each).
    env: variables for the job (qsub -v), e.g. {"COMMUNICATOR": "naive"}.
    options: further qsub options, e.g. ["-l", "walltime=00:05:00"].
    scheduler: auto (from the site profile), local or qsub.
    skip_without_gpus: when the job would run on this machine (local scheduler) and asks for more GPUs than
        it has, say so and return None instead of raising JobError, so that a notebook's Run All goes on.
    """
    __tracebackhide__ = True
    try:
        return _submit(
            script, nodes, per_node, env, options, scheduler, workdir, echo, skip_without_gpus
        )
    except NotImplementedError as e:  # the training script still has stubs
        raise NotImplementedError(
            str(e)
        ) from None  # shown from here: the student's cell, then the message
    except CourseError as e:
        raise type(e)(e.message, e.hint) from None


def _submit(
    script, nodes, per_node, env, options, scheduler, workdir, echo, skip_without_gpus
) -> Job | None:
    if nbgrader_running():
        if echo:
            echo(
                f"nbgrader is running this notebook: {script} is not submitted; the grader reads the job "
                "outputs that came with your submission."
            )
        return None
    workdir = Path(workdir or os.getcwd()).resolve()
    script = Path(script)
    if not (workdir / script).is_file():
        raise JobError(
            f"no job script {workdir / script}",
            "work in the assignment folder (the one with the notebooks and jobs/)",
        )
    settings = site_settings(workdir)
    check_training_scripts(workdir / script, workdir)
    if scheduler == "auto":
        scheduler = "local" if settings.get("COURSE_SCHEDULER") == "local" else "qsub"
    # Slurm's qsub wrapper turns -v into `sbatch --export=VARS`, which exports only those variables;
    # sbatch exports the whole environment by default, so there the variables travel in it.
    by_environment = scheduler == "qsub" and settings.get("COURSE_SCHEDULER") == "slurm"
    if by_environment:
        options, variables = _split_variables(list(options))
        env = {**(env or {}), **pbs.apply_options(variables).variables}
    options = qsub_options(settings, nodes, per_node, None if by_environment else env) + list(
        options
    )
    if scheduler == "local":
        lacking = missing_gpus(script, workdir, options, settings) if skip_without_gpus else None
        if lacking:
            if echo:
                echo(lacking)
            return None
        local = localsched.start(
            workdir / script, options, workdir, resources=site_resources(settings)
        )
        job = Job(local.id, workdir, "local", local.log, local)
    elif scheduler == "qsub":
        job = _qsub(script, options, workdir, settings, env if by_environment else None)
    else:
        raise JobError(f"unknown scheduler {scheduler!r}", "auto, local or qsub")
    if echo:
        echo(f"submitted {script} as job {job.id} ({job.scheduler})")
    return job


def missing_gpus(
    script: Path, workdir: Path, options: list[str], settings: dict[str, str]
) -> str | None:
    """Why this machine cannot run the job for want of GPUs, with what to do instead; None when it has enough."""
    request = pbs.read_request((workdir / script).read_text(), options, site_resources(settings))
    found = gpu.visible_gpus()
    if found.count >= request.ngpus:
        return None
    have = f"has {found.count} GPU(s) ({', '.join(found.names)})" if found.count else "has no GPU"
    return (
        f"NOT SUBMITTED: this machine {have} and {script} asks for {request.ngpus} GPU(s) per node, so "
        f"its job cannot run here. Submit it on a GPU node of a cluster: qsub -j oe {script}. "
        "The rest of this notebook runs here: read on."
    )


def check_site_request(script: Path, options: list[str], settings: dict[str, str]) -> None:
    """Refuse, before queueing, what the applied site profile says its nodes cannot give."""
    request = pbs.read_request(script.read_text(), options, site_resources(settings))
    queues = settings.get("COURSE_QUEUES", "").split()
    if request.queue and queues and request.queue not in queues:
        raise JobError(
            f"queue {request.queue!r} is not one of this site's ({', '.join(queues)})",
            "use -q with one of those, or ask your instructor",
        )
    gpus = int(settings.get("COURSE_GPUS_PER_NODE") or 0)
    asked = max(request.ngpus, request.mpiprocs)
    if gpus and asked > gpus:  # every course job runs one rank per GPU at most
        raise JobError(
            f"the job asks for {asked} GPUs or ranks per node, and this site's nodes have {gpus} GPUs",
            f"one rank per GPU: at most -l select=N:mpiprocs={gpus}",
        )


def _split_variables(options: list[str]) -> tuple[list[str], list[str]]:
    """(the options without -v, the -v options) of a qsub option list; `-v X=1` and `-vX=1` alike."""
    rest, variables = [], []
    while options:
        option = options.pop(0)
        if option == "-v" and options:
            variables += [option, options.pop(0)]
        elif option.startswith("-v") and len(option) > 2:
            variables.append(option)
        else:
            rest.append(option)
    return rest, variables


def _qsub(
    script: Path,
    options: list[str],
    workdir: Path,
    settings: dict[str, str],
    env: dict[str, str] | None = None,
) -> Job:
    check_site_request(workdir / script, options, settings)
    qsub = paths.find_program("qsub")
    if qsub is None:
        raise JobError(
            f"no qsub here, and the jobs are set up for the `{settings.get('COURSE_SITE')}` site "
            f"({settings.get('COURSE_SCHEDULER')})",
            "submit on the cluster's login node, or run here: python -m course submit --local ...",
        )
    run = subprocess.run(
        [qsub, "-j", "oe", *options, str(script)],
        cwd=workdir,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
    )
    if run.returncode != 0:
        raise JobError(
            f"qsub refused {script}: {(run.stderr or run.stdout).strip()}",
            "check the queue, group and resources in the site profile (python -m course site show)",
        )
    match = re.search(r"(\d+[\w.\-]*)\s*$", run.stdout.strip())
    if not match:
        raise JobError(
            f"qsub said {run.stdout.strip()!r}, not a job id", "check the job with qstat"
        )
    return Job(match.group(1), workdir, "qsub")


@dataclass(frozen=True)
class PlannedRun:
    """One run of the stage-3 comparison."""

    nodes: int
    per_node: int
    communicator: str
    allreduce: str = ""
    lr_rule: str = stages.TAUGHT_LR_RULE
    batch_per_worker: int | None = None  # strong scaling: the site's batch split over the ranks
    profile: bool = False  # time each step's phases per rank (course/runtime/profile.py)

    @property
    def env(self) -> dict[str, str]:
        return {
            "COMMUNICATOR": self.communicator,
            **({"ALLREDUCE": self.allreduce} if self.allreduce else {}),
            "LR_RULE": self.lr_rule,
            **({"BATCHSIZE": str(self.batch_per_worker)} if self.batch_per_worker else {}),
            **({"PROFILE": "1"} if self.profile else {}),
        }

    def describe(self, select: str = "{nodes}:mpiprocs={ranks_per_node}") -> str:
        variables = ",".join(f"{k}={v}" for k, v in self.env.items())
        request = select.format(nodes=self.nodes, ranks_per_node=self.per_node)
        strong = (
            f", strong scaling ({self.batch_per_worker} per rank)" if self.batch_per_worker else ""
        )
        return (
            f"{self.nodes} node(s) x {self.per_node} rank(s), {self.communicator}"
            f"{' with ' + self.allreduce + ' allreduce' if self.allreduce else ''}, lr rule {self.lr_rule}{strong}"
            f"{', step profile' if self.profile else ''}:  "
            f"qsub -j oe -l select={request} -v {variables} {stages.MULTI_NODE.job_path}"
        )


# On GPUs NCCL moves the gradients: pure_nccl everywhere, non_cuda_aware (NCCL in a node, MPI between nodes).
_GPU_COMMUNICATION = ("pure_nccl", "non_cuda_aware")
# These hand GPU memory to MPI, which only a CUDA-aware MPI can take.
_THROUGH_MPI = ("naive", "flat")


def _local_gpu_comparison(
    settings: dict[str, str], shapes: list[tuple[int, int]], communication: list[tuple[str, str]]
) -> tuple[list[tuple[int, int]], list[tuple[str, str]]]:
    """The comparison the `local` profile can run on this machine's GPUs: one rank per GPU, NCCL communicators.

    A local profile that leaves gpus_per_node at 0 plans for CPU cores (naive); on GPUs its settings give way
    to pure_nccl and non_cuda_aware. One that declares GPUs means its settings for them, and naive or flat
    there is refused unless this machine's MPI is CUDA-aware (the PyPI Open MPI is not).
    """
    found = gpu.visible_gpus().count
    if found < 2:
        raise CourseError(
            "this machine has 1 GPU: stage 3 runs one rank per GPU and NCCL refuses two ranks on one GPU, so "
            "there is no multi-rank run to compare here",
            "compare on a node with 2 or more GPUs, or on CPU cores: hide the GPU from every stage (stage 1 "
            "included, so that the runs compare) with  export CUDA_VISIBLE_DEVICES=  before starting Jupyter",
        )
    shapes = list(
        dict.fromkeys(
            (nodes, min(per_node, found // nodes)) for nodes, per_node in shapes if found // nodes
        )
    )
    if settings.get("COURSE_GPUS_PER_NODE", "0") == "0":
        return shapes, [(name, "") for name in _GPU_COMMUNICATION]
    through_mpi = sorted({name for name, _ in communication if name in _THROUGH_MPI})
    if through_mpi and not gpu.mpi_cuda_aware():
        raise CourseError(
            f"the site profile compares {', '.join(through_mpi)} on this machine's GPUs, which hands GPU memory "
            "to MPI, and this MPI is not CUDA-aware (ompi_info does not say it was built with CUDA)",
            f"use {' and '.join(_GPU_COMMUNICATION)} in the profile's [scaling] communication, or an MPI built "
            "with CUDA support",
        )
    return shapes, communication


def _site_plan(
    workdir: str | Path,
) -> tuple[dict[str, str], list[tuple[int, int]], list[tuple[str, str]]]:
    """(site settings, the shapes NODESxRANKS, the communication settings) this machine can run."""
    settings = site_settings(Path(workdir))
    shapes = [
        tuple(int(x) for x in run.split("x"))
        for run in settings.get("COURSE_SCALING_RUNS", "1x2").split()
    ]
    communication = [
        c.partition("/")[::2] for c in settings.get("COURSE_COMMUNICATION", "naive").split()
    ]
    if settings.get("COURSE_SCHEDULER") == "local" and gpu.resolve_device("auto") != "@numpy":
        shapes, communication = _local_gpu_comparison(settings, shapes, communication)
    return settings, shapes, communication


def site_batch(settings: dict[str, str]) -> int:
    """The batch per worker the jobs train with: --batchsize in COURSE_TRAIN_ARGS, which a job takes from the
    environment it is submitted from where set there (as jobs/site_env.sh does), else from the site's."""
    train_args = os.environ.get("COURSE_TRAIN_ARGS") or settings.get("COURSE_TRAIN_ARGS", "")
    found = re.search(r"(?:--batchsize|-b)[= ](\d+)", train_args)
    return int(found.group(1)) if found else 64  # the harness's default


def comparison_plan(workdir: str | Path = ".") -> list[PlannedRun]:
    """The site profile's stage-3 comparison: each rank count with the first communication setting;
    on the most ranks, every other communication setting, every other learning-rate rule, and a strong-scaling
    run (the site's batch split over the ranks, so the total batch and with it the rate stay those of one
    worker: lr rule constant). With the `local` scheduler on a machine with GPUs, the runs fit its GPUs
    (_local_gpu_comparison)."""
    settings, shapes, communication = _site_plan(workdir)
    plan = [PlannedRun(nodes, per_node, *communication[0]) for nodes, per_node in shapes]
    nodes, per_node = max(shapes, key=lambda shape: shape[0] * shape[1])
    plan += [PlannedRun(nodes, per_node, *setting) for setting in communication[1:]]
    others = [rule for rule in stages.LR_RULES if rule != stages.TAUGHT_LR_RULE]
    plan += [PlannedRun(nodes, per_node, *communication[0], lr_rule=rule) for rule in others]
    split = site_batch(settings) // (nodes * per_node)
    if split >= 1:
        plan.append(
            PlannedRun(
                nodes, per_node, *communication[0], lr_rule="constant", batch_per_worker=split
            )
        )
    return plan


def profile_plan(workdir: str | Path = ".") -> list[PlannedRun]:
    """Two profiled runs: one rank (no exchange to wait for) and the most ranks of the site's comparison,
    with its first setting that names an allreduce algorithm (so that the cost model knows which), else
    its first."""
    _, shapes, communication = _site_plan(workdir)
    nodes, per_node = max(shapes, key=lambda shape: shape[0] * shape[1])
    setting = next((c for c in communication if c[1]), communication[0])
    return [
        PlannedRun(1, 1, *setting, profile=True),
        PlannedRun(nodes, per_node, *setting, profile=True),
    ]


def main(argv: list[str]) -> int:
    """`python -m course submit [-l RESOURCE] [-v VARS] SCRIPT`: submit a job script and follow its log."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="course submit",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--local",
        dest="scheduler",
        action="store_const",
        const="local",
        help="run it on this machine, whatever the site profile says",
    )
    where.add_argument(
        "--qsub", dest="scheduler", action="store_const", const="qsub", help="hand it to qsub"
    )
    parser.set_defaults(scheduler="auto")
    parser.add_argument(
        "-l",
        dest="resources",
        action="append",
        default=[],
        metavar="RESOURCE",
        help="as qsub -l, e.g. -l select=1:mpiprocs=2",
    )
    parser.add_argument(
        "-v", dest="variables", default="", metavar="VAR=VALUE,...", help="as qsub -v"
    )
    parser.add_argument(
        "--no-wait", dest="wait", action="store_false", help="return after submitting"
    )
    parser.add_argument("script", type=Path)
    args = parser.parse_args(argv)
    options = [x for r in args.resources for x in ("-l", r)] + (
        ["-v", args.variables] if args.variables else []
    )
    job = submit(args.script, scheduler=args.scheduler, options=options)
    if not args.wait:
        print(f"follow it with: tail -f {job.find_log() or f'<script>.o{job.number}'}")
        return 0
    status = job.wait()
    return 1 if status is None else min(status, 255)

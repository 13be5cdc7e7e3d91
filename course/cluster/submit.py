"""Submitting the course's job scripts: to the site's `qsub`, or to the embedded local scheduler.

    job = course.submit("jobs/run_single_gpu_training.sh")   # qsub -j oe jobs/...
    job.wait()

Which one comes from jobs/site_env.sh (the applied site profile): the `local` profile runs jobs
on this machine (course.cluster.localsched); the others hand them to `qsub -j oe`. Where the
profile sets a per-student budget, a job that would exceed it is refused (course.cluster.usage).
While nbgrader runs a notebook (autograde or validate) nothing is submitted: the grader reads the
job outputs that came with the submission.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

from course import gpu, i18n, paths
from course.cluster import localsched, pbs, plan, siteenv, usage
from course.cluster.job import Job
from course.cluster.siteenv import SiteSettings
from course.contracts import prediction as predictions
from course.contracts import stages
from course.contracts.stubs import stubbed_functions
from course.errors import CourseError, JobError
from course.i18n import _

# Below this, a walltime written without hours is refused: too short for a stage's training on a
# cluster (starting the job, Python, Chainer and the data take part of it), so `1:00`, a minute for
# PBS, surely meant an hour. Written HH:MM:SS, any walltime is taken as it is.
SHORTEST_UNCLEAR_WALLTIME = 300  # seconds


def nbgrader_running() -> bool:
    """True while nbgrader executes the notebook (it sets NBGRADER_EXECUTION): then nothing is
    submitted."""
    return bool(os.environ.get("NBGRADER_EXECUTION"))


def check_training_scripts(script: Path, workdir: Path) -> None:
    """Refuse a job whose training script is missing (JobError) or still has stubs
    (NotImplementedError)."""
    for name in sorted(set(re.findall(r"\b(train_\w+\.py)\b", script.read_text(encoding="utf-8")))):
        target = Path(workdir) / name
        if not target.is_file():
            raise JobError(
                _("the job runs {name}, which does not exist yet").format(name=name),
                _("run the notebook cell that writes it (course.notebook.write_script) first"),
            )
        stubs = stubbed_functions(target.read_text())
        if stubs:
            raise NotImplementedError(
                _(
                    "{name} still has PUT YOUR CODE HERE stubs in {functions}: fill them in, run "
                    "their self-checks, then write the script again"
                ).format(name=name, functions=i18n.listed(stubs))
            )


def qsub_options(
    settings: SiteSettings, nodes: int | None, per_node: int | None, env: dict[str, str] | None
) -> list[str]:
    """The qsub options asking for `nodes` x `per_node` ranks (the site's select), passing `env`."""
    options = []
    if nodes is not None or per_node is not None:
        select = settings.select.format(nodes=nodes or 1, ranks_per_node=per_node or 1)
        options += ["-l", "select=" + select]
    if env:
        for key, value in env.items():
            if "," in str(value):
                raise JobError(
                    _("{option}: qsub cannot pass a comma in a value").format(
                        option=f"-v {key}={value}"
                    ),
                    _("use another separator"),
                )
        options += ["-v", ",".join(f"{k}={v}" for k, v in env.items())]
    return options


def submit(
    script: str | Path,
    *,
    nodes: int | None = None,
    per_node: int | None = None,
    env: dict[str, str] | None = None,
    options: Sequence[str] = (),
    scheduler: str = "auto",
    workdir: str | Path | None = None,
    echo: Callable[[str], None] | None = print,
    skip_without_gpus: bool = False,
    predict: Callable[..., dict] | None = None,
) -> Job | None:
    """Submit a job script as `qsub -j oe` would; None while nbgrader runs the notebook.

    nodes, per_node: override the script's `select` (N nodes, M MPI ranks on each).
    env: variables for the job (qsub -v), e.g. {"COMMUNICATOR": "naive"}.
    options: further qsub options, e.g. ["-l", "walltime=00:05:00"].
    scheduler: auto (from the site profile), local or qsub.
    skip_without_gpus: when the job would run on this machine (local scheduler) and asks for more
        GPUs than it has, say so and return None instead of raising JobError, so that a notebook's
        Run All goes on.
    predict: the stage's prediction function (predict_run, predict_comparison): asked about this
        site's job (course.cluster.plan.prediction_args), its answers are checked, stamped with
        the time and recorded by the job in its log and results file, where the grader reads them
        (course.contracts.prediction); they cannot be changed once the job is submitted.
    """
    __tracebackhide__ = True
    try:
        recorded = None
        if predict is not None and not nbgrader_running():
            recorded = _recorded(script, predict, workdir)
            env = {**(env or {}), predictions.ENV: recorded[0]}
        job = _submit(
            script, nodes, per_node, env, options, scheduler, workdir, echo, skip_without_gpus
        )
        if job is not None and recorded is not None and echo:
            echo(recorded[1])
        return job
    except NotImplementedError as e:  # the training script still has stubs
        raise NotImplementedError(
            str(e)
        ) from None  # shown from here: the student's cell, then the message
    except CourseError as e:
        raise type(e)(e.message, e.hint) from None


def _recorded(
    script: str | Path, predict: Callable[..., dict], workdir: str | Path | None
) -> tuple[str, str]:
    """(ENV's value: what `predict` answers for the job of `script`'s stage, checked and stamped;
    what to tell the student once the job is submitted)."""
    stage = next((s.name for s in stages.STAGES.values() if Path(s.job_path) == Path(script)), "")
    if stage not in predictions.KEYS:
        predictions.check(str(script), {})  # says that this job takes no prediction
    args = plan.prediction_args(stage, workdir or os.getcwd())
    try:
        answers = predict(*args)
    except NotImplementedError:
        name = getattr(predict, "__name__", None) or _("the prediction function")
        raise NotImplementedError(
            _(
                "{name} is not written yet: the job records your prediction when it is submitted, "
                "so write it first (the exercise above), then run this cell again"
            ).format(name=name)
        ) from None
    checked = predictions.check(stage, answers)
    # TRANSLATORS: {args} is what the prediction function was asked about, a Python tuple;
    # {prediction} its answers
    said = _(
        "your prediction for {args}, recorded with the job (it cannot be changed afterwards): "
        "{prediction}"
    ).format(args=tuple(args), prediction=checked)
    return predictions.encode(predictions.stamped(checked)), said


def _submit(
    script: str | Path,
    nodes: int | None,
    per_node: int | None,
    env: dict[str, str] | None,
    options: Sequence[str],
    scheduler: str,
    workdir: str | Path | None,
    echo: Callable[[str], None] | None,
    skip_without_gpus: bool,
) -> Job | None:
    if nbgrader_running():
        if echo:
            echo(
                _(
                    "nbgrader is running this notebook: {script} is not submitted; the grader "
                    "reads the job outputs that came with your submission."
                ).format(script=script)
            )
        return None
    folder = Path(workdir or os.getcwd()).resolve()
    script = Path(script)
    if not (folder / script).is_file():
        raise JobError(
            _("no job script {script}").format(script=folder / script),
            _("work in the assignment folder (the one with the notebooks and jobs/)"),
        )
    settings = siteenv.of_folder(folder)
    check_training_scripts(folder / script, folder)
    if scheduler == "auto":
        scheduler = "local" if settings.scheduler == "local" else "qsub"
    # Slurm's qsub wrapper turns -v into `sbatch --export=VARS`, which exports only those variables;
    # sbatch exports the whole environment by default, so there the variables travel in it.
    by_environment = scheduler == "qsub" and settings.scheduler == "slurm"
    given = list(options)
    if by_environment:
        given, variables = _split_variables(given)
        env = {**(env or {}), **pbs.apply_options(variables).variables}
    options = qsub_options(settings, nodes, per_node, None if by_environment else env) + given
    note = check_walltime(folder / script, options, settings)
    if note and echo:
        echo(note)
    local_run = scheduler == "local"
    lacking = (
        missing_gpus(script, folder, options, settings) if local_run and skip_without_gpus else None
    )
    if lacking:
        if echo:
            echo(lacking)
        return None
    # The site's per-student budget: refused here, before anything is queued.
    budget = (
        usage.check(folder, folder / script, options, settings) if usage.limits(settings) else None
    )
    if local_run:
        local = localsched.start(
            folder / script, options, folder, resources=list(settings.resources)
        )
        job = Job(local.id, folder, "local", local.log, local)
    elif scheduler == "qsub":
        job = _qsub(script, options, folder, settings, env if by_environment else None)
    else:
        raise JobError(
            _("unknown scheduler {scheduler}").format(scheduler=repr(scheduler)),
            _("auto, local or qsub"),
        )
    if budget:
        usage.record(job.id, job.scheduler, folder, budget[0])
    if echo:
        echo(
            _("submitted {script} as job {job} ({scheduler})").format(
                script=script, job=job.id, scheduler=job.scheduler
            )
        )
        if budget:
            echo(budget[1])
    return job


def missing_gpus(
    script: Path, workdir: Path, options: list[str], settings: SiteSettings
) -> str | None:
    """Why this machine cannot run the job for want of GPUs, with what to do instead; None when it
    has enough."""
    request = pbs.read_request(
        (workdir / script).read_text(encoding="utf-8"), options, settings.resources
    )
    found = gpu.visible_gpus()
    if found.count >= request.ngpus:
        return None
    fields = dict(
        count=found.count, names=i18n.listed(found.names), script=script, asked=request.ngpus
    )
    if found.count:
        return _(
            "NOT SUBMITTED: this machine has {count} GPU(s) ({names}) and {script} asks for "
            "{asked} GPU(s) per node, so its job cannot run here. The checks that grade this job's "
            "run (its speedup and efficiency) earn their points only once a run of it is in runs/: "
            "submit it from this folder on a GPU node of a cluster (qsub -j oe {script}) before "
            "you hand in. The exercises and the rest of this notebook run here: read on."
        ).format(**fields)
    return _(
        "NOT SUBMITTED: this machine has no GPU and {script} asks for {asked} GPU(s) per node, so "
        "its job cannot run here. The checks that grade this job's run (its speedup and "
        "efficiency) earn their points only once a run of it is in runs/: submit it from this "
        "folder on a GPU node of a cluster (qsub -j oe {script}) before you hand in. The "
        "exercises and the rest of this notebook run here: read on."
    ).format(**fields)


def check_site_request(script: Path, options: list[str], settings: SiteSettings) -> None:
    """Refuse, before queueing, what the applied site profile says its nodes cannot give."""
    request = pbs.read_request(script.read_text(encoding="utf-8"), options, settings.resources)
    queues = settings.queues
    if request.queue and queues and request.queue not in queues:
        raise JobError(
            _("queue {queue} is not one of this site's ({queues})").format(
                queue=repr(request.queue), queues=i18n.listed(queues)
            ),
            _("use -q with one of those, or ask your instructor"),
        )
    gpus = settings.gpus_per_node
    asked = max(request.ngpus, request.mpiprocs)
    if gpus and asked > gpus:  # every course job runs one rank per GPU at most
        raise JobError(
            _(
                "the job asks for {asked} GPUs or ranks per node, and this site's nodes have "
                "{gpus} GPUs"
            ).format(asked=asked, gpus=gpus),
            _("one rank per GPU: at most {option}").format(option=f"-l select=N:mpiprocs={gpus}"),
        )


def check_walltime(script: Path, options: list[str], settings: SiteSettings) -> str | None:
    """Refuse, before queueing, a walltime beyond the site's max_walltime (which a scheduler would
    queue for ever) and a short one written without hours; for a longer one without hours, a
    warning that says what PBS makes of it. None when the walltime is clear."""
    request = pbs.read_request(script.read_text(encoding="utf-8"), options, settings.resources)
    if request.walltime is None or request.walltime_text is None:
        return None
    limit = settings.walltime_limit(request.queue)
    if limit and request.walltime > pbs.parse_walltime(limit[1]):
        queue, longest = limit
        fields = dict(asked=request.walltime_text, queue=queue, longest=longest)
        raise JobError(
            _(
                "the job asks for walltime {asked}, more than queue {queue} allows ({longest})"
            ).format(**fields)
            if queue
            else _(
                "the job asks for walltime {asked}, more than this site allows ({longest})"
            ).format(**fields),
            _(
                "ask for at most -l walltime={longest}; a run killed at its walltime resumes from "
                "its snapshot when you submit the job again"
            ).format(**fields),
        )
    unclear = pbs.without_hours(request.walltime_text)
    if unclear is None:
        return None
    meaning, fix = unclear
    if request.walltime < SHORTEST_UNCLEAR_WALLTIME:
        # TRANSLATORS: {meaning} is what PBS makes of the walltime, e.g. "walltime=1:00 is 1
        # minute (PBS reads [[hours:]minutes:]seconds)"
        raise JobError(
            _("{meaning}: too short for a training job, so it was not submitted").format(
                meaning=meaning
            ),
            fix,
        )
    # TRANSLATORS: {meaning} is what PBS makes of the walltime; {fix} how to write what was meant
    return _("warning: {meaning}; {fix}").format(meaning=meaning, fix=fix)


def _split_variables(options: list[str]) -> tuple[list[str], list[str]]:
    """(the options without -v, the -v options) of a qsub option list; `-v X=1` and `-vX=1`
    alike."""
    rest: list[str] = []
    variables: list[str] = []
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
    settings: SiteSettings,
    env: dict[str, str] | None = None,
) -> Job:
    check_site_request(workdir / script, options, settings)
    qsub = paths.find_program("qsub")
    if qsub is None:
        raise JobError(
            _("no qsub here, and the jobs are set up for the `{site}` site ({scheduler})").format(
                site=settings.site, scheduler=settings.scheduler
            ),
            _(
                "submit on the cluster's login node, or run here: python -m course submit --local "
                "..."
            ),
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
            # TRANSLATORS: {said} is qsub's own words
            _("qsub refused {script}: {said}").format(
                script=script, said=(run.stderr or run.stdout).strip()
            ),
            _(
                "check the queue, group and resources in the site profile (python -m course site "
                "show)"
            ),
        )
    match = re.search(r"(\d+[\w.\-]*)\s*$", run.stdout.strip())
    if not match:
        raise JobError(
            _("qsub said {said}, not a job id").format(said=repr(run.stdout.strip())),
            _("check the job with qstat"),
        )
    return Job(match.group(1), workdir, "qsub")

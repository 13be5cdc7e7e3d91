"""The stage-3 comparison a site plans: which runs (nodes x ranks, communication setting,
learning-rate rule, batch) the notebook submits, from the applied site profile and, on the `local`
profile, this machine's GPUs."""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from course import gpu, i18n
from course.cluster import siteenv
from course.cluster.siteenv import SiteSettings
from course.contracts import stages
from course.errors import CourseError
from course.i18n import _
from course.runtime import flags


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

    def describe(self, select: str = siteenv.DEFAULT_SELECT) -> str:
        """What the run is, in the student's language, then the qsub command that submits it
        (course.instructor.allocation cuts the command off at ":  qsub")."""
        variables = ",".join(f"{k}={v}" for k, v in self.env.items())
        request = select.format(nodes=self.nodes, ranks_per_node=self.per_node)
        communication = (
            _("{communicator} with {allreduce} allreduce").format(
                communicator=self.communicator, allreduce=self.allreduce
            )
            if self.allreduce
            else self.communicator
        )
        # TRANSLATORS: {communication} is a communicator ("naive"), or one with its allreduce
        said = _("{nodes} node(s) x {per_node} rank(s), {communication}, lr rule {rule}").format(
            nodes=self.nodes, per_node=self.per_node, communication=communication, rule=self.lr_rule
        )
        if self.batch_per_worker:
            said += _(", strong scaling ({batch} per rank)").format(batch=self.batch_per_worker)
        if self.profile:
            said += _(", step profile")
        return (
            f"{said}:  qsub -j oe -l select={request} -v {variables} {stages.MULTI_NODE.job_path}"
        )


Shapes = tuple[tuple[int, int], ...]  # runs as (nodes, ranks per node)
Settings = tuple[tuple[str, str], ...]  # communication settings as (communicator, allreduce)

# On GPUs NCCL moves the gradients: pure_nccl everywhere, non_cuda_aware (NCCL in a node, MPI
# between nodes).
_GPU_COMMUNICATION = ("pure_nccl", "non_cuda_aware")
# These hand GPU memory to MPI, which only a CUDA-aware MPI can take.
_THROUGH_MPI = ("naive", "flat")


def _local_gpu_comparison(
    settings: SiteSettings, shapes: Shapes, communication: Settings
) -> tuple[Shapes, Settings]:
    """The comparison the `local` profile can run on this machine's GPUs: one rank per GPU, NCCL
    communicators.

    A local profile that leaves gpus_per_node at 0 plans for CPU cores (naive); on GPUs its settings
    give way to pure_nccl and non_cuda_aware. One that declares GPUs means its settings for them,
    and naive or flat there is refused unless this machine's MPI is CUDA-aware (the PyPI Open MPI is
    not).
    """
    found = gpu.visible_gpus().count
    if found < 2:
        raise CourseError(
            _(
                "this machine has 1 GPU: stage 3 runs one rank per GPU and NCCL refuses two ranks "
                "on one GPU, so there is no multi-rank run to compare here"
            ),
            _(
                "compare on a node with 2 or more GPUs, or on CPU cores: hide the GPU from every "
                "stage (stage 1 included, so that the runs compare) with  export "
                "CUDA_VISIBLE_DEVICES=  before starting Jupyter"
            ),
        )
    shapes = tuple(
        dict.fromkeys(
            (nodes, min(per_node, found // nodes)) for nodes, per_node in shapes if found // nodes
        )
    )
    if settings.gpus_per_node == 0:
        return shapes, tuple((name, "") for name in _GPU_COMMUNICATION)
    through_mpi = sorted({name for name, _allreduce in communication if name in _THROUGH_MPI})
    if through_mpi and not gpu.mpi_cuda_aware():
        nccl, non_cuda_aware = _GPU_COMMUNICATION
        raise CourseError(
            _(
                "the site profile compares {communicators} on this machine's GPUs, which hands GPU "
                "memory to MPI, and this MPI is not CUDA-aware (ompi_info does not say it was "
                "built with CUDA)"
            ).format(communicators=i18n.listed(through_mpi)),
            _(
                "use {nccl} and {non_cuda_aware} in the profile's [scaling] communication, or an "
                "MPI built with CUDA support"
            ).format(nccl=nccl, non_cuda_aware=non_cuda_aware),
        )
    return shapes, communication


def _site_plan(workdir: str | Path) -> tuple[SiteSettings, Shapes, Settings]:
    """(site settings, the shapes NODESxRANKS, the communication settings) this machine can run."""
    settings = siteenv.of_folder(workdir)
    shapes, communication = settings.scaling_runs, settings.communication
    if settings.scheduler == "local" and gpu.resolve_device("auto") != "@numpy":
        shapes, communication = _local_gpu_comparison(settings, shapes, communication)
    return settings, shapes, communication


def site_batch(settings: SiteSettings) -> int:
    """The batch per worker the jobs train with: --batchsize in COURSE_TRAIN_ARGS, which a job takes
    from the environment it is submitted from where set there (as jobs/site_env.sh does), else from
    the site's."""
    train_args = os.environ.get("COURSE_TRAIN_ARGS") or settings.train_args
    found = re.search(r"(?:--batchsize|-b)[= ](\d+)", train_args)
    return int(found.group(1)) if found else 64  # the harness's default


def site_epochs(settings: SiteSettings) -> int:
    """The epochs a run trains: --epoch in COURSE_TRAIN_ARGS, taken as site_batch takes the batch
    (a step-profile run trains one whatever this says)."""
    return epochs_of(os.environ.get("COURSE_TRAIN_ARGS") or settings.train_args)


def epochs_of(train_args: str) -> int:
    """--epoch of training settings, else the harness's default."""
    known, _ = flags.parser(stages.SINGLE_GPU.name).parse_known_args(shlex.split(train_args))
    return int(known.epoch)


def comparison_plan(workdir: str | Path = ".") -> list[PlannedRun]:
    """The site profile's stage-3 comparison: each rank count with the first communication setting;
    on the most ranks, every other communication setting, every other learning-rate rule, and a
    strong-scaling run (the site's batch split over the ranks, so the total batch and with it the
    rate stay those of one worker: lr rule constant). With the `local` scheduler on a machine with
    GPUs, the runs fit its GPUs (_local_gpu_comparison)."""
    settings, shapes, communication = _site_plan(workdir)
    plan = [PlannedRun(nodes, per_node, *communication[0]) for nodes, per_node in shapes]
    nodes, per_node = siteenv.largest_run(shapes)
    plan += [PlannedRun(nodes, per_node, *setting) for setting in communication[1:]]
    others = [rule for rule in stages.COMPARED_LR_RULES if rule != stages.TAUGHT_LR_RULE]
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
    """Two profiled runs: one rank (no exchange to wait for) and the most ranks of the site's
    comparison, with its first setting that names an allreduce algorithm (so that the cost model
    knows which), else its first."""
    _, shapes, communication = _site_plan(workdir)
    nodes, per_node = siteenv.largest_run(shapes)
    setting = next((c for c in communication if c[1]), communication[0])
    return [
        PlannedRun(1, 1, *setting, profile=True),
        PlannedRun(nodes, per_node, *setting, profile=True),
    ]


# The allreduce benchmark's jobs (notebook 04): 2 and 4 ranks.
BENCHMARK_RANKS = (2, 4)


def benchmark_plan(workdir: str | Path = ".") -> list[tuple[int, int]]:
    """(nodes, ranks per node) of each allreduce benchmark job: on one node where the site's nodes
    take that many ranks (a site without GPUs declared: one rank per core, shared where too few),
    else one rank per GPU on as many nodes as it takes (course submit refuses more)."""
    gpus = siteenv.of_folder(workdir).gpus_per_node
    shapes = []
    for ranks in BENCHMARK_RANKS:
        per_node = min(ranks, gpus) if gpus else ranks
        shapes.append((-(-ranks // per_node), per_node))
    return shapes


def prediction_args(stage: str, workdir: str | Path = ".") -> list[int]:
    """The arguments of `stage`'s prediction function for the job this site runs: the training
    images, the batch per worker, the workers (stage 2: the node's GPUs; stage 3: the most ranks of
    the comparison) and the epochs, as the job's flags and data set will make them."""
    from course.runtime import data  # reads NumPy files: only when a prediction is made

    settings = siteenv.of_folder(workdir)
    name = os.environ.get("COURSE_DATASET") or settings.dataset or "auto"
    train, batch = data.info(data.resolve(name)).n_train, site_batch(settings)
    epochs = site_epochs(settings)
    if stage == stages.SINGLE_GPU.name:
        return [train, batch, epochs]
    if stage == stages.MULTI_GPU.name:
        workers = settings.gpus_per_node or gpu.visible_gpus().count
    else:
        workers = max(run.nodes * run.per_node for run in comparison_plan(workdir))
    return [train, batch, max(workers, 1), epochs]

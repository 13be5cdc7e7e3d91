"""The course's three stages: the one place that names their notebooks, scripts, jobs and functions.

Everything else derives from these records: the script writer (which functions go into which
script, and which main() follows them), the job scripts' names, the results' `stage` field and
run folders, the report's order and the demo's notebooks. The main() of each stage is real code
in course.runtime.mains, copied into the script after the student's functions.
"""

from __future__ import annotations

from dataclasses import dataclass

from course import i18n
from course.i18n import _


@dataclass(frozen=True)
class Stage:
    name: str  # the results file's `stage`, and the prefix of its run folder runs/<name>-<job id>
    number: int
    notebook: str
    script: str  # the training script the notebook writes from the student's functions
    job_script: str  # in jobs/: what `qsub -j oe` is given
    functions: tuple[str, ...]  # what the student writes, in the order the script holds them
    extra_imports: tuple[str, ...] = ()  # beyond the imports every stage's script has
    job_functions: tuple[
        str, ...
    ] = ()  # what the student writes for the job script, not the training script
    model_functions: tuple[
        str, ...
    ] = ()  # what the student writes to model the measurements (in no script)
    prediction_functions: tuple[
        str, ...
    ] = ()  # what the student predicts of the jobs, graded against their runs (in no script)
    derivation_functions: tuple[
        str, ...
    ] = ()  # what the student derives from the sources' figures and the profile (in no script)

    @property
    def job_path(self) -> str:
        return f"jobs/{self.job_script}"

    @property
    def title(self) -> str:
        """What the stage trains on, in the student's language (its script's docstring says it)."""
        return _titles()[self.name]


def _titles() -> dict[str, str]:
    """Each stage's title, by its name (translated when asked for, never at import)."""
    return {
        SINGLE_GPU.name: _("one GPU"),
        MULTI_GPU.name: _("every GPU of one node (MultiprocessParallelUpdater)"),
        MULTI_NODE.name: _("many nodes (ChainerMN)"),
    }


SINGLE_GPU = Stage(
    "single_gpu",
    1,
    "01_single_gpu.ipynb",
    "train_cifar_single.py",
    "run_single_gpu_training.sh",
    ("make_iterators", "make_model_and_optimizer", "build_trainer", "add_snapshots"),
    prediction_functions=("predict_run",),
)
MULTI_GPU = Stage(
    "multi_gpu",
    2,
    "02_multi_gpu.ipynb",
    "train_cifar_multi_gpu.py",
    "run_multi_gpu_training.sh",
    ("make_train_iterators", "make_devices", "scaled_learning_rate", "build_trainer"),
    prediction_functions=("predict_run",),
)
MULTI_NODE = Stage(
    "multi_node",
    3,
    "03_multi_node.ipynb",
    "train_cifar_multi_node.py",
    "run_multi_node_training.sh",
    (
        "make_communicator",
        "device_for_rank",
        "shard_datasets",
        "make_optimizer",
        "learning_rate_schedule",
        "build_trainer",
    ),
    extra_imports=("chainermn",),
    job_functions=("resource_request", "run_lines"),
    model_functions=("allreduce_time", "fit_alpha_beta"),
    prediction_functions=("predict_comparison", "compute_to_exchange"),
    derivation_functions=("implied_exchange", "step_shares", "run_plan"),
)

STAGES: dict[str, Stage] = {stage.name: stage for stage in (SINGLE_GPU, MULTI_GPU, MULTI_NODE)}
NAMES = tuple(STAGES)
# The notebooks beyond the stages': deep-dive lessons that model, measure or train without a stage
# of their own, each with the functions the student writes in it (the verifier reads a notebook's
# functions from the notebook itself; tests/test_notebooks.py holds every notebook to this list).
# Most of stage 3's model, derivation and job functions are written in them, not in notebook 03.
# The course's notebooks are both, in file-name order (the order students take them).
LESSON_FUNCTIONS: dict[str, tuple[str, ...]] = {
    # where the step's time goes: the step profile and the allreduce's α–β model
    "04_step_time.ipynb": (
        "implied_exchange",
        "step_shares",
        "compute_to_exchange",
        "allreduce_time",
        "fit_alpha_beta",
    ),
    # the gradient exchange: parameter server, overlap, float16
    "05_the_exchange.ipynb": (
        "exchange_traffic",
        "parameter_server_time",
        "ring_crossover_bytes",
        "overlapped_backward",
        "half_precision_saving",
        "weak_scaling_speedup",
        "first_slower",
        "exchange_share",
    ),
    # accuracy at scale: the learning-rate rules, time to accuracy, large batches and LARS
    "06_accuracy_at_scale.ipynb": ("run_plan", "large_batch_rates", "lars_local_rate"),
    # the job's run part: the resource request, rank placement, threads and staging
    "07_run_part.ipynb": ("resource_request", "run_lines"),
    # model parallelism against data parallelism (its own job)
    "08_beyond_data_parallel.ipynb": ("activation_bytes", "gradient_bytes", "idle_fraction"),
}
LESSON_NOTEBOOKS: tuple[str, ...] = tuple(LESSON_FUNCTIONS)
NOTEBOOKS = tuple(sorted({stage.notebook for stage in STAGES.values()} | set(LESSON_NOTEBOOKS)))
CORE_NOTEBOOKS = tuple(stage.notebook for stage in STAGES.values())  # the core hands-on


def notebook_functions(notebook: str) -> tuple[str, ...]:
    """The functions the student writes in `notebook`, in the order it asks for them."""
    for stage in STAGES.values():
        if stage.notebook == notebook:
            held = set(_all_lesson_functions())
            return tuple(
                dict.fromkeys(
                    name
                    for name in (
                        *stage.functions,
                        *stage.job_functions,
                        *stage.model_functions,
                        *stage.prediction_functions,
                        *stage.derivation_functions,
                    )
                    if name not in held
                )
            )
    return LESSON_FUNCTIONS[notebook]


def _all_lesson_functions() -> tuple[str, ...]:
    return tuple(name for names in LESSON_FUNCTIONS.values() for name in names)


BASELINE = SINGLE_GPU  # speedup and efficiency are measured against the student's own stage-1 run

# How the learning rate follows the total batch of N workers (Goyal et al. 2017, "Accurate, large
# minibatch SGD"): constant keeps the single-worker rate, linear multiplies it by N from the first
# update, warmup ramps it from the single-worker rate to N times it over the first updates. Stage 3
# runs the three (`--lr-rule`), notebook 06 compares their accuracy; the course teaches warmup.
COMPARED_LR_RULES = ("constant", "linear", "warmup")
TAUGHT_LR_RULE = "warmup"
# Beyond linear scaling (notebook 06's "Large batches", tools/accuracy_study.py; in no job plan):
# sqrt ramps the same way to sqrt(N) times the rate (Krizhevsky 2014, Hoffer et al. 2017); lars
# is warmup with Chainer's GradientLARS hook (You et al. 2017), each layer's step scaled to its
# weights, the optimizer's rate times LARS_TRUST (Chainer's lr is the paper's rate times its
# trust coefficient).
LARGE_BATCH_LR_RULES = ("sqrt", "lars")
LR_RULES = COMPARED_LR_RULES + LARGE_BATCH_LR_RULES
LARS_TRUST = 0.05


def get(name: str) -> Stage:
    """The stage called `name`; ValueError naming the stages otherwise."""
    try:
        return STAGES[name]
    except KeyError:
        raise ValueError(
            _("unknown stage {name}; one of {names}").format(
                name=repr(name), names=i18n.listed(NAMES)
            )
        ) from None

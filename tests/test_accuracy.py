"""Accuracy at scale, fast: the learning-rate rules of stage 3 and what the kit makes of the
accuracy they reach.

Covers harness.apply_lr_rule and the stage flags --lr-rule/--lr-warmup-epochs on a real trainer (the
rate of every update read by an optimizer hook), the check of the student's learning_rate_schedule,
a run's results file and job-log table as harness.run writes them, time to accuracy and the named
baseline (course.evidence), the accuracy points (scoring.grade_accuracy_at_scale), the report's
accuracy columns, notes and self-check, and the comparison plan's learning-rate runs. Traced runs
are made as a job leaves them, with the kit's writers: a sealed results file
(course.contracts.results.write) and a job log of course.contracts.joblog's lines, as in
tests/test_scoring.py.
"""

from __future__ import annotations

import contextlib
import io
import os
import types
from datetime import UTC, datetime

import chainer
import chainer.links as L
import pytest
from chainer import training
from chainer.training import extensions

from course import comparison, evidence
from course.cluster import mpi
from course.cluster.plan import comparison_plan
from course.contracts import grading_rules, jobend, joblog, results, stages
from course.errors import ResultsError
from course.instructor import reference, scoring
from course.lessons.core import multi_node
from course.notebook import report
from course.notebook.checks import CheckFailed, labelled_dataset
from course.runtime import harness
from course.runtime.throughput import Throughput
from tests.helpers import local_site, plan_runs
from tests.solutions import solution_functions

TARGET = 0.8
TRUST = stages.LARS_TRUST
GRADING = f"""
[accuracy]
target = {{ synthetic = {TARGET}, cifar10_256px_5p = 0.5 }}

[accuracy.speedup]
tiers = [[1.5, 1.0], [1.0, 0.5]]
"""


pytestmark = pytest.mark.usefixtures("grading_config")  # this module's GRADING (tests/conftest.py)


# --- the learning-rate rules on a real trainer ---------------------------------------------------


def tiny_trainer(args, *more: training.Extension) -> training.Trainer:
    """A linear classifier on 32 labelled 4x4 images, args.batchsize per update, at args.lr."""
    model = L.Classifier(L.Linear(None, 10))
    optimizer = chainer.optimizers.MomentumSGD(args.lr)
    optimizer.setup(model)
    train_iter = chainer.iterators.SerialIterator(labelled_dataset(32, size=4), args.batchsize)
    trainer = training.Trainer(
        training.updaters.StandardUpdater(train_iter, optimizer),
        (args.epoch, "epoch"),
        out=args.out,
    )
    for extension in more:
        trainer.extend(extension)
    return trainer


def stage_3_args(out, *flags: str):
    """The stage-3 script's flags as its parser reads them: 2 epochs of 4 images per update at lr
    0.1, into `out`."""
    args = harness.parser("multi_node").parse_args(
        [
            "--lr",
            "0.1",
            "--batchsize",
            "4",
            "--epoch",
            "2",
            "--warmup",
            "1",
            "--dataset",
            "synthetic",
            "--width",
            "4",
            "--out",
            str(out),
            *flags,
        ]
    )
    args.stage = "multi_node"
    return args


def rates_used(trainer) -> list[float]:
    """The learning rate of each update `trainer` will make, filled in as it runs."""
    used = []
    trainer.updater.get_optimizer("main").add_hook(
        lambda opt: used.append(float(opt.lr)), name="record_lr"
    )
    return used


def test_the_stage_scripts_take_an_lr_rule_with_the_taught_warm_up_by_default():
    flags = harness.parser("multi_node")
    defaults = flags.parse_args([])
    assert (
        defaults.lr_rule == stages.TAUGHT_LR_RULE == "warmup" and defaults.lr_warmup_epochs == 1.0
    )
    chosen = flags.parse_args(["--lr-rule", "linear", "--lr-warmup-epochs", "0.5"])
    assert (chosen.lr_rule, chosen.lr_warmup_epochs) == ("linear", 0.5)
    with contextlib.redirect_stderr(io.StringIO()), pytest.raises(SystemExit):
        flags.parse_args(["--lr-rule", "cosine"])


def lr_plan(rule: str, start: float, target: float, warmup: int = 0, drop: int | None = 8) -> dict:
    """The lr plan apply_lr_rule returns: rule, rates, warm-up updates, the update of the drop."""
    return {
        "rule": rule,
        "start": start,
        "target": target,
        "warmup_iterations": warmup,
        "drop_from_iteration": drop,
    }


# 8 updates per epoch (32 images, 4 per update), 2 epochs; args.lr 0.1 on 4 workers; the last epoch
# at a tenth
@pytest.mark.parametrize(
    "rule,more,plan,rates",
    [
        ("constant", [], lr_plan("constant", 0.1, 0.1), [0.1] * 8 + [0.01] * 8),
        ("linear", [], lr_plan("linear", 0.4, 0.4), [0.4] * 8 + [0.04] * 8),
        (
            "warmup",
            [],
            lr_plan("warmup", 0.1, 0.4, warmup=6),  # round(5.6)
            [0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.4] + [0.04] * 8,
        ),
        (
            "warmup",
            ["--lr-warmup-epochs", "0"],
            lr_plan("warmup", 0.4, 0.4),
            [0.4] * 8 + [0.04] * 8,
        ),
        (
            "warmup",
            ["--lr-drop-epochs", "0"],
            lr_plan("warmup", 0.1, 0.4, warmup=6, drop=None),
            [0.1, 0.15, 0.2, 0.25, 0.3, 0.35] + [0.4] * 10,
        ),
        (  # to sqrt(4) = 2 times the rate, over the same ramp
            "sqrt",
            [],
            lr_plan("sqrt", 0.1, 0.2, warmup=6),
            [0.1 + 0.1 * k / 6 for k in range(7)] + [0.2] + [0.02] * 8,
        ),
        (  # the warmup rule's ramp at LARS_TRUST times the rate (Chainer's lr: rate x trust)
            "lars",
            [],
            lr_plan("lars", 0.1 * TRUST, 0.4 * TRUST, warmup=6),
            [TRUST * r for r in [0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.4] + [0.04] * 8],
        ),
    ],
    ids=[
        "constant",
        "linear",
        "warmup",
        "warmup of 0 epochs",
        "warmup without the final drop",
        "sqrt",
        "lars",
    ],
)
def test_apply_lr_rule_sets_the_rate_of_every_update(tmp_path, rule, more, plan, rates):
    args = stage_3_args(tmp_path, "--lr-rule", rule, "--lr-warmup-epochs", "0.7", *more)
    trainer = tiny_trainer(args)
    used = rates_used(trainer)
    assert harness.apply_lr_rule(trainer, args, 4, reference.warmup_schedule) == plan
    assert args.lr_plan == plan
    hooks = trainer.updater.get_optimizer("main")._hookable._pre_update_hooks  # Chainer 7
    assert ("GradientLARS" in hooks) == (rule == "lars")
    trainer.run()
    assert used == pytest.approx(rates)


def test_the_large_batch_rules_are_in_no_job_plan():
    """sqrt and lars are notebook 05's reference runs (tools/accuracy_study.py): stage 3's
    comparison plan and the class report keep the three rules it compares."""
    assert stages.LR_RULES == (*stages.COMPARED_LR_RULES, "sqrt", "lars")
    assert stages.TAUGHT_LR_RULE in stages.COMPARED_LR_RULES


def test_the_study_shares_the_cores_only_when_it_asks_for_more_ranks_than_there_are(monkeypatch):
    """4 ranks on 2 cores (the large-batch study): unbound and oversubscribed; else one a core."""
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    assert mpi.on_cores(4, "x")[2:] == ["4", "--oversubscribe", "--bind-to", "none", "x"]
    assert mpi.on_cores(2, "x")[2:] == ["2", "--bind-to", "core", "x"]


def test_a_run_records_its_lr_plan_and_its_job_log_table_has_no_terminal_codes(tmp_path, capsys):
    args = stage_3_args(tmp_path / "run")
    table = io.StringIO()
    test_iter = chainer.iterators.SerialIterator(
        labelled_dataset(8, size=4, seed=1), 4, repeat=False, shuffle=False
    )
    trainer = tiny_trainer(args, Throughput(4, warmup=1), extensions.LogReport())
    trainer.extend(extensions.Evaluator(test_iter, trainer.updater.get_optimizer("main").target))
    trainer.extend(
        extensions.PrintReport(["epoch", "main/loss", "validation/main/accuracy"], out=table)
    )
    plan = harness.apply_lr_rule(trainer, args, 4, reference.warmup_schedule)
    harness.run(trainer, args)

    printed = table.getvalue()
    assert "\x1b[" not in printed
    assert printed.splitlines()[0].split() == ["epoch", "main/loss", "validation/main/accuracy"]
    assert [line.split()[0] for line in printed.splitlines()[1:]] == ["1", "2"]
    # one worker ran it: no rule changes a single worker's rate, so the header names none
    assert "| lr 0.4 |" in capsys.readouterr().out
    path = tmp_path / "run" / results.FILENAME
    run = evidence.Run(path, results.load(path))
    assert run.record["lr_schedule"] == plan and run.record["learning_rate"] == pytest.approx(0.4)
    assert run.lr_rule == "warmup"
    assert [(point["epoch"], point["iteration"]) for point in run.accuracy_curve] == [
        (1, 8),
        (2, 16),
    ]
    assert 0 < run.accuracy_curve[0]["seconds"] < run.accuracy_curve[1]["seconds"]


# --- the check of the student's learning_rate_schedule --------------------------------------------


@pytest.fixture(scope="module")
def solution_schedule():
    """The learning_rate_schedule of solutions/distributed_training/03_multi_node.ipynb."""
    namespace = {"extensions": extensions}
    exec(solution_functions("multi_node")["learning_rate_schedule"], namespace)
    return namespace["learning_rate_schedule"]


def test_the_solution_s_linear_ramp_passes_the_visible_and_hidden_checks(solution_schedule, capsys):
    multi_node.learning_rate_schedule(solution_schedule)
    multi_node.learning_rate_schedule(
        solution_schedule, base_lr=0.05, n_workers=3, warmup_iterations=5
    )
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        "OK: learning_rate_schedule: the rate ramps linearly from 0.1 to 0.4 over 8 updates, then "
        "stays "
        "(0.1, 0.138, 0.175, 0.213, 0.25, 0.288, 0.325, 0.363, 0.4, 0.4, 0.4, 0.4)",
        "OK: learning_rate_schedule: the rate ramps linearly from 0.05 to 0.15 over 5 updates, "
        "then stays "
        "(0.05, 0.07, 0.09, 0.11, 0.13, 0.15, 0.15, 0.15, 0.15)",
    ]


def at_the_scaled_rate_from_the_start(base_lr, n_workers, warmup_iterations):
    return extensions.LinearShift(
        "lr", (base_lr * n_workers, base_lr * n_workers), (0, warmup_iterations)
    )


def at_the_single_worker_rate(base_lr, n_workers, warmup_iterations):
    return extensions.LinearShift("lr", (base_lr, base_lr), (0, warmup_iterations))


def step_at_half_the_warm_up(base_lr, n_workers, warmup_iterations):
    @training.make_extension(trigger=(1, "iteration"))
    def step(trainer):
        late = trainer.updater.iteration >= warmup_iterations // 2
        trainer.updater.get_optimizer("main").lr = base_lr * n_workers if late else base_lr

    return step


@pytest.mark.parametrize(
    "schedule,words",
    [
        (
            at_the_scaled_rate_from_the_start,
            r"the first update used the rate 0.4, not the single-worker rate 0.1 "
            r"\(rates used: 0.4, 0.4, .*\): no warm-up",
        ),
        (
            at_the_single_worker_rate,
            r"with 4 workers the rate stays at the single-worker rate 0.1 .*: no scaling",
        ),
        (
            step_at_half_the_warm_up,
            r"the rates used were 0.1, 0.1, 0.1, 0.1, 0.4, .*; a linear ramp over 8 updates "
            r"gives 0.1, 0.138, ",
        ),
    ],
    ids=["no warm-up", "no scaling", "a step"],
)
def test_a_learning_rate_schedule_mistake_fails_the_check_saying_which(schedule, words):
    with pytest.raises(CheckFailed, match=words):
        multi_node.learning_rate_schedule(schedule)


# --- traced runs with accuracy curves -----------------------------------------------------------


def traced_run(
    folder,
    stage: str,
    number: int,
    curve: list[tuple[float, float]],
    *,
    workers: int = 1,
    lr_rule: str | None = None,
    warmup_iterations: int | None = None,
    images_per_sec: float = 100.0,
    log: bool = True,
    rates: list[float] | None = None,
):
    """A finished run of `stage` as job <number>.local (later numbers are newer) with, at the end of
    each epoch of 64 images / workers updates, the (seconds, validation accuracy) of `curve` and the
    mean learning rate of `rates` (observed as harness.run's observe_lr logs it); traced by its job
    log."""
    job = stages.get(stage)
    job_id = f"{number}.local"
    path = folder / results.RUNS_DIR / f"{stage}-{job_id}" / results.FILENAME
    per_epoch = 64 // workers
    plan = None
    if lr_rule:
        warmup = (
            (per_epoch if lr_rule == "warmup" else 0)
            if warmup_iterations is None
            else warmup_iterations
        )
        target = 0.05 if lr_rule == "constant" else 0.05 * workers
        plan = {
            "rule": lr_rule,
            "start": 0.05 if warmup else target,
            "target": target,
            "warmup_iterations": warmup,
        }
    record = {
        "stage": stage,
        "workers": workers,
        "hosts": ["n1"],
        "devices": ["@numpy"] * workers,
        "job": {"id": job_id, "name": job.job_script, "scheduler": "local"},
        "script": {"name": job.script, "sha256": None},
        "device_kind": "cpu",
        "gpu_model": None,
        "communicator": "naive" if stage == stages.MULTI_NODE.name else None,
        "allreduce": None,
        "model": {"name": "vgg", "width": 16},
        "batch_size": {"per_worker": 32, "total": 32 * workers},
        "dataset": {"name": "synthetic"},
        "lr_schedule": plan,
        "complete": True,
        "error": None,
        "throughput": {"images_per_sec": images_per_sec, "std": 1.0, "counted_iterations": 40},
        "log": [
            {
                "epoch": epoch,
                "iteration": epoch * per_epoch,
                "elapsed_time": seconds,
                "main/loss": 1.0,
                "validation/main/accuracy": accuracy,
                **({"lr": rates[epoch - 1]} if rates else {}),
            }
            for epoch, (seconds, accuracy) in enumerate(curve, start=1)
        ],
    }
    digest = results.write(path, record)
    os.utime(path, (1_000_000 + number,) * 2)  # results.find orders the runs by time
    if log:
        header = joblog.RunHeader(
            stage=stage,
            job_id=job_id,
            scheduler="local",
            workers=workers,
            hosts=["n1"],
            devices=record["devices"],
            batch_per_worker=32,
            learning_rate=0.05,
            seed=0,
            lr_rule=lr_rule,
            communicator=record["communicator"],
        )
        launched = (
            [
                joblog.launch_line(job_id, "local", [("n1", workers)]),
                joblog.launch_command_line(["mpiexec", "-n", str(workers), "python", job.script]),
            ]
            if stage == stages.MULTI_NODE.name
            else []
        )
        lines = [
            *launched,
            header.format(),
            joblog.throughput_line(images_per_sec, 40, 5, 3),
            joblog.results_line(path.relative_to(folder), digest),
            jobend.end_line(job_id, 0, datetime.now(UTC)),
        ]
        (folder / joblog.log_name(job.job_script, number)).write_text("\n".join(lines) + "\n")
    return path


REACHES_AT_100 = [(50.0, 0.5), (100.0, 0.8), (150.0, 0.85)]  # stage 1: the target at epoch 2, 100 s
NEVER = [(50.0, 0.5), (100.0, 0.7)]
COLLAPSED = [(25.0, 0.1), (50.0, 0.15)]


def failure(grade, *args) -> str:
    with pytest.raises(CheckFailed) as raised:
        grade(*args)
    return str(raised.value)


# --- course.evidence ----------------------------------------------------------------------------


def test_time_to_accuracy_is_the_first_evaluation_at_or_above_the_target(folder):
    run = evidence.trace(traced_run(folder, "single_gpu", 1, REACHES_AT_100), folder)
    assert run.traced
    assert run.time_to_accuracy(0.8) == {
        "epoch": 2,
        "iteration": 128,
        "seconds": 100.0,
        "accuracy": 0.8,
        "lr": None,
    }
    assert run.time_to_accuracy(0.5)["epoch"] == 1
    assert run.time_to_accuracy(0.9) is None
    assert run.final_accuracy == 0.85


def test_a_run_without_an_lr_schedule_counts_as_the_taught_rule(folder):
    run = evidence.trace(traced_run(folder, "multi_node", 1, NEVER, workers=2), folder)
    assert run.record["lr_schedule"] is None and run.lr_rule == stages.TAUGHT_LR_RULE


def test_the_baseline_is_the_named_traced_run_else_the_latest(folder):
    traced_run(folder, "single_gpu", 1, REACHES_AT_100, images_per_sec=100.0)
    traced_run(folder, "single_gpu", 2, NEVER, images_per_sec=50.0)
    traced_run(folder, "single_gpu", 3, NEVER, log=False)
    assert comparison.baseline(folder).path.parent.name == "single_gpu-2.local"
    assert (
        comparison.baseline(folder, "single_gpu-1.local").path.parent.name == "single_gpu-1.local"
    )
    for name in (
        "single_gpu-9.local",
        "single_gpu-3.local",
    ):  # unknown, and not traced (no job log)
        with pytest.raises(ResultsError) as raised:
            comparison.baseline(folder, name)
        assert raised.value.message == f"no traced stage-1 run {name!r} in {folder / 'runs'}/"
        assert raised.value.hint == "one of: single_gpu-1.local, single_gpu-2.local"


# --- the accuracy points ------------------------------------------------------------------------


def test_the_accuracy_target_of_a_variant_falls_back_to_its_base_data_set():
    rules = grading_rules.load()
    assert rules.accuracy_target("synthetic") == TARGET
    assert rules.accuracy_target("synthetic_64px_50p") == TARGET
    assert rules.accuracy_target("cifar10_256px_5p") == 0.5
    assert rules.accuracy_target("cifar10") is None


@pytest.mark.parametrize(
    "seconds,points,share",
    [(50.0, 2, "100%"), (80.0, 1.5, "50%"), (100.0, 1.5, "50%"), (125.0, 1, "0%")],
    ids=["top tier", "middle tier", "middle tier's minimum", "slower than stage 1"],
)
def test_a_warm_up_run_reaching_the_target_earns_half_and_its_speedup_tier_the_rest(
    folder, capsys, seconds, points, share
):
    traced_run(folder, "single_gpu", 1, REACHES_AT_100)
    traced_run(
        folder, "multi_node", 2, [(seconds / 2, 0.6), (seconds, 0.82)], workers=4, lr_rule="warmup"
    )
    assert scoring.grade_accuracy_at_scale(2, folder) == points
    # after the notes on what the scheduler's records could not check
    assert capsys.readouterr().out.endswith(
        f"\nmulti_node-2.local (job 2.local) reached {TARGET} at epoch 2 (iteration 32, "
        f"{seconds:.0f} s); stage 1 "
        f"took 100 s: time-to-accuracy speedup {100 / seconds:.2f} on 4 ranks -> {share} of the "
        "speedup points\n"
    )


def test_when_stage_1_never_reached_the_target_only_the_reaching_half_is_earned(folder, capsys):
    traced_run(folder, "single_gpu", 1, NEVER)
    traced_run(folder, "multi_node", 2, [(25.0, 0.6), (50.0, 0.82)], workers=4, lr_rule="warmup")
    assert scoring.grade_accuracy_at_scale(2, folder) == 1
    assert (
        "; stage 1 (single_gpu-1.local (job 1.local)) never reached it, so there is no speedup to "
        "compare" in capsys.readouterr().out
    )


def test_the_warm_up_run_earning_the_most_is_graded_and_extra_runs_never_lower_it(folder, capsys):
    traced_run(folder, "single_gpu", 1, REACHES_AT_100)
    traced_run(folder, "multi_node", 2, [(40.0, 0.6), (80.0, 0.82)], workers=4, lr_rule="warmup")
    assert scoring.grade_accuracy_at_scale(2, folder) == 1.5
    traced_run(folder, "multi_node", 3, [(5.0, 0.6), (10.0, 0.82)], workers=2, lr_rule="warmup")
    assert scoring.grade_accuracy_at_scale(2, folder) == 2
    assert "multi_node-3.local (job 3.local) reached" in capsys.readouterr().out
    traced_run(folder, "multi_node", 4, NEVER, workers=8, lr_rule="warmup")
    assert scoring.grade_accuracy_at_scale(2, folder) == 2


def test_the_run_on_the_most_ranks_is_named_when_none_reached_the_target(folder):
    traced_run(folder, "single_gpu", 1, REACHES_AT_100)
    traced_run(folder, "multi_node", 2, NEVER, workers=2, lr_rule="warmup")
    traced_run(folder, "multi_node", 3, NEVER, workers=8, lr_rule="warmup")
    assert (
        "multi_node-3.local (job 3.local) on 8 ranks ended at validation accuracy 0.700"
        in failure(scoring.grade_accuracy_at_scale, 2, folder)
    )


def test_constant_and_linear_runs_never_earn_the_accuracy_points(folder):
    traced_run(folder, "single_gpu", 1, REACHES_AT_100)
    traced_run(folder, "multi_node", 2, [(20.0, 0.82)], workers=4, lr_rule="linear")
    traced_run(folder, "multi_node", 3, [(30.0, 0.82)], workers=4, lr_rule="constant")
    assert (
        "no traced stage-3 run on 2 or more workers with the warmup rule compares with stage 1"
        in failure(scoring.grade_accuracy_at_scale, 2, folder)
    )
    traced_run(folder, "multi_node", 4, NEVER, workers=4, lr_rule="warmup")
    assert (
        "multi_node-4.local (job 4.local) on 4 ranks ended at validation accuracy 0.700, below the "
        "target 0.8" in failure(scoring.grade_accuracy_at_scale, 2, folder)
    )


@pytest.mark.parametrize(
    "rates,hint",
    [
        (
            [0.1, 0.2],
            "most likely: 32 updates against 192 in stage 1: N ranks make N times fewer updates "
            "per epoch",
        ),
        (
            [0.2, 0.2],
            "most likely: the learning rate was already 0.2 (N x the single-worker rate) in the "
            "first epoch: "
            "no warm-up",
        ),
        (
            [0.05, 0.05],
            "most likely: the learning rate stayed at 0.05, the single-worker rate, with an N "
            "times larger "
            "batch: no scaling",
        ),
    ],
    ids=["a warm-up that ramped", "a schedule without warm-up", "a schedule without scaling"],
)
def test_a_warm_up_run_below_the_target_fails_naming_the_likely_cause(folder, rates, hint):
    traced_run(folder, "single_gpu", 1, REACHES_AT_100)
    traced_run(folder, "multi_node", 2, NEVER, workers=4, lr_rule="warmup", rates=rates)
    message = failure(scoring.grade_accuracy_at_scale, 2, folder)
    assert (
        "multi_node-2.local (job 2.local) on 4 ranks ended at validation accuracy "
        f"{NEVER[-1][1]:.3f}, below "
        f"the target {TARGET}" in message
    )
    assert hint in message


# --- the report ---------------------------------------------------------------------------------


@pytest.fixture
def compared(folder):
    """Two stage-1 runs (the older one reached the target at 100 s) and a warm-up and a linear run
    on 4 ranks."""
    traced_run(folder, "single_gpu", 1, REACHES_AT_100, images_per_sec=100.0)
    traced_run(folder, "single_gpu", 2, NEVER, images_per_sec=50.0)
    traced_run(
        folder,
        "multi_node",
        3,
        [(25.0, 0.6), (50.0, 0.8)],
        workers=4,
        lr_rule="warmup",
        images_per_sec=380.0,
    )
    traced_run(
        folder, "multi_node", 4, COLLAPSED, workers=4, lr_rule="linear", images_per_sec=390.0
    )
    return folder


def test_report_rows_compare_throughput_and_time_to_accuracy_with_the_chosen_baseline(compared):
    table = report.rows(compared, "single_gpu-1.local")
    by_run = {row["run"]: row for row in table}
    base, other, warmup, linear = (
        by_run[name]
        for name in (
            "single_gpu-1.local",
            "single_gpu-2.local",
            "multi_node-3.local",
            "multi_node-4.local",
        )
    )
    assert (base["time to target"], base["TTA speedup"]) == ("100 s", 1.0)
    assert (other["time to target"], other["speedup"]) == ("never", 0.5)
    assert warmup["setting"] == "naive, lr warmup" and linear["setting"] == "naive, lr linear"
    assert (warmup["speedup"], warmup["efficiency"]) == (pytest.approx(3.8), pytest.approx(0.95))
    assert (warmup["time to target"], warmup["TTA speedup"], warmup["val. accuracy"]) == (
        "50 s",
        2.0,
        0.8,
    )
    assert (linear["time to target"], linear["TTA speedup"], linear["val. accuracy"]) == (
        "never",
        None,
        0.15,
    )
    assert [point["iteration"] for point in warmup["_curve"]] == [16, 32]
    header, *lines = report.table_text(table).splitlines()
    assert "time to target  TTA speedup" in header and len(lines) == 4


def test_report_rows_mark_the_baseline_run_and_the_notes_name_it(compared):
    table = report.rows(compared, "single_gpu-1.local")
    assert [row["run"] for row in table if row["baseline"]] == ["single_gpu-1.local"]
    said = report.notes(table, TARGET)
    assert said[0].startswith(
        "Baseline: single_gpu-1.local (the latest traced stage-1 run unless you name one"
    )
    assert said[1].startswith(
        f"Time to target: wall time until validation accuracy first reached {TARGET} "
    )


def test_report_notes_explain_an_efficiency_above_1_by_the_measured_step_times(compared):
    table = report.rows(compared)  # the latest stage-1 run: 50 img/s, never reached the target
    assert {row["run"]: row["efficiency"] for row in table if row["stage"] == "multi_node"} == {
        "multi_node-3.local": pytest.approx(1.9),
        "multi_node-4.local": pytest.approx(1.95),
    }
    assert all(row["TTA speedup"] is None for row in table)
    for row in (
        table
    ):  # the mark rows() should set (test_report_rows_mark_the_baseline_run_and_the_notes_name_it)
        row["baseline"] = row["run"] == "single_gpu-2.local"
    said = report.notes(table, TARGET)
    assert said[0].startswith("Baseline: single_gpu-2.local ")
    # 1000 ms x workers / img/s: 20 ms per image for the baseline, 4 x 1000 / 380 for multi_node-3
    assert said[-1] == (
        "Efficiency above 1: a worker of these runs took less time per image in its steady steps "
        "than the baseline's one worker (single_gpu-2.local: 20.0 ms): single_gpu-1.local 10.0 "
        "ms, multi_node-3.local 10.5 ms, multi_node-4.local 10.3 ms."
    )
    assert not any("noise" in line for line in said)


def test_report_notes_compare_the_baseline_with_a_one_rank_run_of_stage_3(compared):
    traced_run(compared, "multi_node", 5, NEVER, workers=1, images_per_sec=98.0)
    table = report.rows(compared, "single_gpu-2.local")
    said = report.notes(table, TARGET)
    assert said[-1].startswith(
        "One rank of stage 3 (multi_node-5.local) took 10.2 ms per image: the baseline ran slower "
        "than the same training did later on one rank"
    )
    for row in table:  # step profiles' shares (a profiled run's record holds them per rank)
        row["_cpu_share"] = {"multi_node-5.local": 0.97, "multi_node-3.local": 0.5}.get(row["run"])
        row["_profiled"] = row["_cpu_share"] is not None
    said = report.notes(table, TARGET)
    assert not any(line.startswith("One rank of stage 3") for line in said)  # profiled: not a speed
    assert said[-1] == (
        "Share of a core each rank got over its steady steps (step profiles; below 1: other work "
        "took the rest): multi_node-3.local on 4 rank(s) 0.50, multi_node-5.local on 1 rank(s) "
        "0.97."
    )


def test_report_notes_say_when_one_rank_stepped_as_slowly_as_the_baseline(folder):
    traced_run(folder, "single_gpu", 1, NEVER, images_per_sec=100.0)
    traced_run(folder, "multi_node", 2, NEVER, workers=1, images_per_sec=95.0)
    traced_run(folder, "multi_node", 3, NEVER, workers=2, lr_rule="linear", images_per_sec=230.0)
    said = report.notes(report.rows(folder), TARGET)
    assert said[-2].startswith("Efficiency above 1: ") and "multi_node-3.local 8.7 ms" in said[-2]
    assert said[-1].startswith(
        "One rank of stage 3 (multi_node-2.local) took 10.5 ms per image, as long as the baseline: "
        "on several ranks each rank really stepped faster"
    )


def test_cpu_share_is_the_mean_of_the_profiled_ranks():
    run = types.SimpleNamespace(
        record={"profile": {"ranks": [{"cpu_share": 0.9}, {"cpu_share": 0.5}, {"host": "a"}]}}
    )
    assert report._cpu_share(run) == pytest.approx(0.7)
    assert report._cpu_share(types.SimpleNamespace(record={})) is None


def test_check_accuracy_says_ok_when_a_warm_up_run_on_several_ranks_reached_the_target(
    compared, capsys
):
    found = report.check_accuracy(compared, "single_gpu-1.local")
    assert [run.path.parent.name for run in found] == ["multi_node-3.local", "multi_node-4.local"]
    assert capsys.readouterr().out.splitlines() == [
        "single_gpu-1.local (job 1.local): 1 worker(s) (stage 1): final accuracy 0.850; reached "
        "0.8 at epoch 2 "
        "(100 s)",
        "multi_node-3.local (job 3.local): 4 worker(s), lr rule warmup: final accuracy 0.800; "
        "reached 0.8 at epoch 2 "
        "(50 s)",
        "multi_node-4.local (job 4.local): 4 worker(s), lr rule linear: final accuracy 0.150; "
        "never reached 0.8",
        "OK: a run on 4 ranks with the warmup rule reached the target.",
    ]


def test_check_accuracy_says_not_yet_when_only_another_rule_reached_the_target(folder, capsys):
    traced_run(folder, "single_gpu", 1, REACHES_AT_100)
    traced_run(folder, "multi_node", 2, NEVER, workers=4, lr_rule="warmup")
    traced_run(folder, "multi_node", 3, [(40.0, 0.85)], workers=4, lr_rule="constant")
    report.check_accuracy(folder)
    out = capsys.readouterr().out
    assert out.endswith(
        "NOT YET: no run on 4 ranks with the warmup rule reached 0.8: check "
        "learning_rate_schedule above, then run the comparison again.\n"
    )
    assert "OK" not in out


def test_check_accuracy_without_stage_3_runs_says_not_yet(folder, capsys):
    traced_run(folder, "single_gpu", 1, REACHES_AT_100)
    assert report.check_accuracy(folder) == []
    assert capsys.readouterr().out.startswith(
        "NOT YET: the accuracy comparison needs a traced stage-1 run and traced stage-3 runs."
    )


def test_check_accuracy_agrees_with_the_grader_that_any_warm_up_run_counts(folder, capsys):
    traced_run(folder, "single_gpu", 1, REACHES_AT_100)
    traced_run(folder, "multi_node", 2, [(10.0, 0.82)], workers=2, lr_rule="warmup")
    traced_run(folder, "multi_node", 3, NEVER, workers=4, lr_rule="warmup")
    assert scoring.grade_accuracy_at_scale(2, folder) == 2
    report.check_accuracy(folder)
    assert capsys.readouterr().out.endswith(
        "OK: a run on 2 ranks with the warmup rule reached the target.\n"
    )


def test_check_accuracy_reports_a_stage_3_run_without_evaluations(folder, capsys):
    traced_run(folder, "single_gpu", 1, REACHES_AT_100)
    traced_run(folder, "multi_node", 2, [], workers=4, lr_rule="warmup")
    report.check_accuracy(folder)
    out = capsys.readouterr().out
    assert (
        "multi_node-2.local (job 2.local): 4 worker(s), lr rule warmup: " in out
        and "NOT YET" in out
    )


def test_the_grader_fails_a_stage_3_run_without_evaluations_saying_so(folder):
    traced_run(folder, "single_gpu", 1, REACHES_AT_100)
    traced_run(folder, "multi_node", 2, [], workers=4, lr_rule="warmup")
    assert "multi_node-2.local (job 2.local) on 4 ranks" in failure(
        scoring.grade_accuracy_at_scale, 2, folder
    )


def test_the_plot_draws_accuracy_per_epoch_per_update_and_over_time(compared):
    import matplotlib.pyplot as plt

    figure = report.plot(report.rows(compared, "single_gpu-1.local"))
    try:
        _, by_epoch, by_update, by_time = figure.axes
        [line] = [
            line
            for line in by_update.get_lines()
            if line.get_label().startswith("multi_node-3.local")
        ]
        assert line.get_label() == "multi_node-3.local (naive, lr warmup)"
        assert list(line.get_xdata()) == [16, 32] and list(line.get_ydata()) == [0.6, 0.8]
        assert len(by_epoch.get_lines()) == len(by_time.get_lines()) == 4
    finally:
        plt.close(figure)


# --- the comparison plan ------------------------------------------------------------------------


def test_the_comparison_plan_adds_the_other_lr_rules_on_the_most_ranks(tmp_path, monkeypatch):
    monkeypatch.setenv(
        "CUDA_VISIBLE_DEVICES", ""
    )  # the CPU plan, on a GPU node too (local GPUs: tests/test_gpu.py)
    plan = comparison_plan(local_site(tmp_path))
    assert plan_runs(plan) == [
        (1, 1, "naive", "", "warmup"),
        (1, 2, "naive", "", "warmup"),
        (1, 2, "naive", "ring", "warmup"),
        (1, 2, "naive", "", "constant"),
        (1, 2, "naive", "", "linear"),
        (1, 2, "naive", "", "constant"),
    ]  # the last: strong scaling (tests/test_jobs.py)
    assert plan[2].env == {"COMMUNICATOR": "naive", "ALLREDUCE": "ring", "LR_RULE": "warmup"}
    assert plan[4].env == {"COMMUNICATOR": "naive", "LR_RULE": "linear"}
    assert (
        plan[4]
        .describe()
        .endswith(
            ", lr rule linear:  qsub -j oe -l select=1:mpiprocs=2 "
            "-v COMMUNICATOR=naive,LR_RULE=linear jobs/run_multi_node_training.sh"
        )
    )


def test_a_one_rank_stage_3_run_names_no_learning_rate_rule(compared, capsys):
    """On one worker every rule gives stage 1's rate: the table and the accuracy lines say so
    instead of naming a rule that changed nothing (issue 24)."""
    traced_run(compared, "multi_node", 5, REACHES_AT_100, workers=1, lr_rule="warmup")
    [one] = [row for row in report.rows(compared) if row["run"] == "multi_node-5.local"]
    assert one["setting"] == "naive, lr of one worker"
    report.check_accuracy(compared, "single_gpu-1.local")
    [line] = [x for x in capsys.readouterr().out.splitlines() if x.startswith("multi_node-5")]
    assert "1 worker(s), lr of one worker: final accuracy" in line and "warmup" not in line

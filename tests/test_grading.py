"""Grading with the real nbgrader, end to end: a batch of submissions with planted mistakes."""

from __future__ import annotations

import csv
import html
import json
import re
import shutil
import subprocess
from pathlib import Path

import nbformat
import pytest

from course import comparison, evidence, i18n, paths
from course.contracts import stages
from course.instructor import demo, grade_report, i18n_release, nbgrader_cells, process_limit
from tests.helpers import PYTHON, ROOT, SOLVED_ON_CPU, bubblewrap, core_cases
from tests.solutions import solution_functions

A = paths.ASSIGNMENT


def set_cell(folder, notebook, grade_id, source):
    path = folder / notebook
    nb = nbformat.read(path, as_version=4)
    [cell] = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id]
    cell.source = source
    nbformat.write(nb, path)


def speed_up_ring_run(folder):
    """Edit images/sec in the results of the comparison's ring-allreduce run, as a student faking a
    figure would (the step profiles, which also use ring, do not count for the comparison)."""
    for path in (folder / "runs").glob("multi_node-*/results.json"):
        record = json.loads(path.read_text())
        if record.get("allreduce") == "ring" and not record.get("profile"):
            record["throughput"]["images_per_sec"] *= 1.3
            path.write_text(json.dumps(record))
            return
    raise AssertionError("the solved run has no ring-allreduce run")


# The tests' "small" data set trains 2 short epochs of a width-8 VGG (tests/conftest.py: quick_env)
# and barely learns: seeded, its 2-rank warm-up runs end near chance, at a figure that depends on
# the CPU's BLAS kernels (0.125 on one machine, 0.086 on another). The test is about the grading
# path, not the lesson, so the target is the best accuracy the solved runs reached (solved_target).
SOLVED = SOLVED_ON_CPU


def set_schedule(first: str, last: str):
    """A planted learning_rate_schedule whose ramp runs from `first` to `last` (Python
    expressions)."""
    return lambda f: set_cell(
        f,
        "03_multi_node.ipynb",
        "learning_rate_schedule",
        "def learning_rate_schedule(base_lr, n_workers, warmup_iterations):\n"
        f"    return extensions.LinearShift('lr', ({first}, {last}), (0, warmup_iterations))",
    )


# (submission, how to make it from the solved run, the notebooks it hands in (those its plant edits
# or its messages name), the points its plant costs, {test: words of its message}). Its expected
# total is the solved student's points on the notebooks it hands in less that cost (expected_total).
PLANTED = {
    "carol": (
        lambda f: set_cell(
            f,
            "02_multi_gpu.ipynb",
            "make_train_iterators",
            "def make_train_iterators(train, batchsize, n_devices):\n"
            "    return [chainer.iterators.SerialIterator(train, batchsize)\n"
            "            for _ in range(n_devices)]",
        ),
        ("02_multi_gpu",),
        2,
        {("02_multi_gpu", "check_train_iterators"): "more than one GPU's part"},
    ),
    "dave": (
        lambda f: set_cell(
            f,
            "03_multi_node.ipynb",
            "shard_datasets",
            "def shard_datasets(train, test, comm, seed):\n    return train, test",
        ),
        ("03_multi_node",),
        2,
        {("03_multi_node", "check_scatter"): "rank 1 has no train set"},
    ),
    "erin": (
        lambda f: set_cell(
            f,
            "03_multi_node.ipynb",
            "make_optimizer",
            "def make_optimizer(args, comm, model):\n"
            "    optimizer = chainer.optimizers.MomentumSGD(args.lr * comm.size)\n"
            "    optimizer.setup(model)\n    return optimizer",
        ),
        ("03_multi_node",),
        2,
        {("03_multi_node", "check_optimizer"): "does not exchange gradients"},
    ),
    "frank": (
        lambda f: set_cell(
            f,
            "03_multi_node.ipynb",
            "make_communicator",
            "def make_communicator(name):\n    return chainermn.create_communicator(name)\n\n\n"
            "def device_for_rank(comm, use_gpu):\n    return '@cupy:0' if use_gpu else '@numpy'",
        ),
        ("03_multi_node",),
        1,
        {("03_multi_node", "check_device_binding"): "'@cupy:0', '@cupy:0'"},
    ),
    # The comparison then has one setting on 2 ranks: the predicted faster one cannot be graded.
    "grace": (
        speed_up_ring_run,
        ("03_multi_node",),
        2,
        {
            ("03_multi_node", "check_comparisons"): "edited after the job wrote it",
            ("03_multi_node", "check_predict_comparison"): "",
        },
    ),
    # The prediction lines taken out of the stage-3 logs: the recorded choices no longer count (a
    # partial score has no message; the feedback says "shows no prediction line, but").
    "hugo": (
        lambda f: [
            log.write_text(
                "".join(
                    line
                    for line in log.read_text().splitlines(keepends=True)
                    if not line.startswith("course: prediction submitted with the job: ")
                )
            )
            for log in f.glob("run_multi_node_training.sh.o*")
        ],
        ("03_multi_node",),
        2,
        {("03_multi_node", "check_predict_comparison"): ""},
    ),
    "heidi": (
        lambda f: [log.unlink() for log in f.glob("run_single_gpu_training.sh.o*")],
        ("01_single_gpu", "03_multi_node", "06_accuracy_at_scale"),
        5,
        {
            ("01_single_gpu", "check_results"): "no job log",
            ("01_single_gpu", "check_predict_run"): "there is no traced single_gpu run",
            ("03_multi_node", "check_efficiency"): "no traced stage-1 run",
            ("06_accuracy_at_scale", "check_accuracy"): "no traced stage-1 run",
        },
    ),
    "ivan": (
        lambda f: set_cell(
            f,
            "01_single_gpu.ipynb",
            "make_iterators",
            "train_iter = SerialIterator(train, 64)  # a stray line that raises\n\n"
            "def make_iterators(train, test, batchsize):\n    return None",
        ),
        ("01_single_gpu",),
        2,
        {("01_single_gpu", "check_iterators"): "returned NoneType, not the pair"},
    ),
    "kate": (
        set_schedule("base_lr * n_workers", "base_lr * n_workers"),
        ("03_multi_node",),
        2,
        {("03_multi_node", "check_learning_rate_schedule"): "no warm-up"},
    ),
    "leo": (
        set_schedule("base_lr", "base_lr"),
        ("03_multi_node",),
        2,
        {("03_multi_node", "check_learning_rate_schedule"): "no scaling"},
    ),
    # A second, forged Throughput line in the stage-1 log.
    "sybil": (
        lambda f: [
            log.write_text(
                log.read_text().replace(
                    "course: results",
                    "Throughput: 999.00 [images/sec.] over 9 steady iterations (warm-up 5, 0 left "
                    "out after "
                    "epoch ends)\ncourse: results",
                )
            )
            for log in f.glob("run_single_gpu_training.sh.o*")
        ],
        ("01_single_gpu", "03_multi_node", "06_accuracy_at_scale"),
        5,
        {
            ("01_single_gpu", "check_results"): "a job prints one: the log was edited",
            ("01_single_gpu", "check_predict_run"): "there is no traced single_gpu run",
            ("03_multi_node", "check_efficiency"): "no traced stage-1 run",
            ("06_accuracy_at_scale", "check_accuracy"): "no traced stage-1 run",
        },
    ),
    # Logs edited to show 1 rank launched where the results say 2 (a stage-1 run passed off as stage
    # 3's, reversed).
    "trent": (
        lambda f: [
            log.write_text(
                log.read_text().replace(
                    "2 slot(s) on 1 node(s): localhost x2", "1 slot(s) on 1 node(s): localhost x1"
                )
            )
            for log in f.glob("run_multi_node_training.sh.o*")
        ],
        ("03_multi_node", "04_step_time", "06_accuracy_at_scale"),
        9,
        {
            ("03_multi_node", "check_efficiency"): "course launch started 1 rank(s)",
            ("03_multi_node", "check_comparisons"): "",
            ("06_accuracy_at_scale", "check_accuracy"): "",
            ("04_step_time", "check_prediction"): "no profiled stage-3 run on 2 or more ranks",
            ("03_multi_node", "check_predict_comparison"): "no traced stage-3 run on 2 or more",
            ("04_step_time", "check_exchange_ratio"): "no traced stage-3 run with a step profile",
        },
    ),
    # Wrong code that passed the checks of two ranks on one node: hidden and visible checks now
    # catch it.
    "uma": (
        lambda f: set_cell(
            f,
            "03_multi_node.ipynb",
            "make_communicator",
            solution_functions("multi_node")["make_communicator"]
            + "\n\n"
            + solution_functions("multi_node")["device_for_rank"].replace(
                "comm.intra_rank", "comm.rank"
            ),
        ),
        ("03_multi_node",),
        1,
        {("03_multi_node", "check_device_binding"): "'@cupy:0', '@cupy:1', '@cupy:2', '@cupy:3'"},
    ),
    "wendy": (
        lambda f: set_cell(
            f,
            "03_multi_node.ipynb",
            "build_trainer",
            solution_functions("multi_node")["build_trainer"].replace("comm=comm,", "workers=2,"),
        ),
        ("03_multi_node",),
        2,
        {("03_multi_node", "check_trainer"): "Throughput counts 16 images per step"},
    ),
    "xavier": (
        lambda f: set_cell(
            f,
            "02_multi_gpu.ipynb",
            "build_trainer",
            solution_functions("multi_gpu")["build_trainer"]
            .replace(
                "    updater = training.updaters.MultiprocessParallelUpdater(",
                "    if False:\n        updater = training.updaters.MultiprocessParallelUpdater(",
            )
            .replace(
                "optimizer, devices=devices)\n",
                "optimizer, devices=devices)\n    else:\n        updater = "
                "training.updaters.StandardUpdater(train_iters[0], optimizer)\n",
                1,
            ),
        ),
        ("02_multi_gpu",),
        2,
        {("02_multi_gpu", "check_trainer"): "not a MultiprocessParallelUpdater"},
    ),
    # A classmate's notebook and runs, handed in as one's own: full points, and the plagiarism table
    # says so.
    "victor": (lambda f: None, ("01_single_gpu",), 0, {}),
}


def with_lines(stage: str, name: str, lines: str) -> str:
    """The solution function `name` of `stage` with `lines` (indented, Python) run first in its
    body."""
    source = solution_functions(stage)[name]
    head, body = source.split(":\n", 1)
    return f"{head}:\n" + "".join(f"    {line}\n" for line in lines.splitlines()) + body


def unsolved(folder: Path) -> None:
    """The student release as it was handed out, in place of the solved notebooks handed in."""
    for notebook in folder.glob("*.ipynb"):
        shutil.copy(ROOT / "notebooks" / A / notebook.name, notebook)


CELL_TIMEOUT = 120  # seconds a test cell may run in this batch (course grade --cell-timeout):
# the stage-3 checks start MPI ranks, which a busy machine slows many times over
# The points of the handed-in runs alone, by notebook (stage-1 results 1, stage-3 efficiency 1
# and comparisons 1, accuracy at scale 1; the predictions need the student's functions): an
# unsolved release handed in with the solved run's runs/ and logs earns these and no more.
RUN_POINTS = {"01_single_gpu": 1, "03_multi_node": 2, "06_accuracy_at_scale": 1}
UNSOLVED = "unsolved"  # an expected cost: the release handed in, so the run points alone

# A student's code trying to reach what is not theirs, as a function the checks call (course root
# filled in).
SNOOP = """import os
for path in ('{root}/solutions/distributed_training', '{root}/submitted', '{root}/autograded'):
    try:
        print('SNOOPED', path, 'FOUND:' + '|'.join(sorted(os.listdir(path))))
    except OSError:
        pass
alice = '{root}/submitted/alice/distributed_training/runs'
for path in ('{root}/gradebook.db', '{root}/grading.toml', alice):
    try:
        with open(path, 'w') as f:
            f.write('overwritten by peggy')
    except OSError:
        pass
"""

# (submission, how to make it from the solved run, the notebooks it hands in, the points it costs
# or UNSOLVED or None (not graded), {test: words}, flags)
FORK_BOMB = """import os, time
while True:
    try:
        child = os.fork()
    except OSError:
        break
    if child == 0:
        time.sleep(600)
        os._exit(0)"""
# A passing report, worded as the grader's test processes worded one before the judge left the
# student's process, written to every descriptor the function's process holds, which then ends at
# once; `os` reached through the kit (issue 29, case 1). The function itself was never written.
FORGED_REPORT = """os = getattr(getattr(course, "fileio"), "os")
passing = '{"outputs": [], "tampered": [], "visible_failed": false}\\n'
for fd in range(3, 1024):
    try:
        os.write(fd, passing.encode())
    except OSError:
        pass
os._exit(0)"""
# The check's verdicts silenced while it runs, put back by its closing `passed` (case 3).
SILENCE_CHECK = """import course.lessons.core.single as checked
real_expect, real_passed = checked.expect, checked.passed
def restore(message):
    checked.expect, checked.passed = real_expect, real_passed
    real_passed(message)
checked.expect, checked.passed = (lambda *args, **kwargs: None), restore"""
# The verdicts of whoever called the function two frames up turned off (case 3).
SILENCE_CALLER = """import sys
sys._getframe(2).f_globals.update(expect=lambda *a, **k: None, fail=lambda *a, **k: None)"""
# The kit's own cost model (the exercise's answer) reached by getattr, not by name (case 5).
KIT_MODEL = """def allreduce_time(algorithm, n_ranks, message_bytes, alpha, beta):
    model = getattr(getattr(course.lessons.step_time, "costmodel"), "allreduce_seconds")
    return model(algorithm, n_ranks, message_bytes, alpha, beta)"""
KIT_FIT = """def fit_alpha_beta(sizes, seconds, algorithm, n_ranks):
    fit = getattr(getattr(course.lessons.step_time, "costmodel"), "fit")
    return fit(sizes, seconds, algorithm, n_ranks)"""
# An optimizer named as ChainerMN's multi-node one that exchanges nothing and zeroes the weights.
IMPOSTOR = """def make_optimizer(args, comm, model):
    class _MultiNodeOptimizer(chainer.optimizers.MomentumSGD):
        def update(self, lossfun=None, *args, **kwds):
            super().update(lossfun, *args, **kwds)
            for param in self.target.params():
                param.array[...] = 0

    optimizer = _MultiNodeOptimizer(args.lr)
    optimizer.setup(model)
    return optimizer"""
ATTACKS = {
    # A solution cell that patches the check it should pass: the patch never runs in the grader.
    "mallory": (
        lambda f, root: set_cell(
            f,
            "03_multi_node.ipynb",
            "make_optimizer",
            "import course.lessons.core.multi_node as m\nm.optimizer = lambda function: None\n\n"
            "def make_optimizer(args, comm, model):\n    optimizer = "
            "chainer.optimizers.MomentumSGD(args.lr)\n"
            "    optimizer.setup(model)\n    return optimizer",
        ),
        ("03_multi_node",),
        2,
        {("03_multi_node", "check_optimizer"): "does not exchange gradients"},
        {("03_multi_node", ""): "runs code outside a function"},
    ),
    # An IPython handler that hides every error, on the unsolved release: still nothing.
    "nina": (
        lambda f, root: [
            unsolved(f),
            set_cell(
                f,
                "01_single_gpu.ipynb",
                "make_iterators",
                "get_ipython().set_custom_exc((BaseException,), lambda *args, **kwargs: None)\n\n"
                "def make_iterators(train, test, batchsize):\n    raise NotImplementedError()",
            ),
        ],
        ("01_single_gpu",),
        UNSOLVED,
        None,
        {("01_single_gpu", ""): "uses get_ipython"},
    ),
    # A course/ package of its own beside the notebooks, to shadow the kit's checks.
    "oscar": (
        lambda f, root: [
            unsolved(f),
            (f / "course").mkdir(),
            (f / "course" / "__init__.py").write_text("raise SystemExit('the kit was shadowed')\n"),
        ],
        ("01_single_gpu",),
        UNSOLVED,
        None,
        {("", ""): "course, which would shadow the kit"},
    ),
    # Reading the hidden tests and classmates' work, overwriting the gradebook, grading.toml, a
    # classmate's runs.
    "peggy": (
        lambda f, root: set_cell(
            f,
            "01_single_gpu.ipynb",
            "make_iterators",
            with_lines("single_gpu", "make_iterators", SNOOP.format(root=root)),
        ),
        ("01_single_gpu",),
        0,
        {},
        {("01_single_gpu", ""): "uses listdir"},
    ),
    # Killing the grader from a function: this submission is not graded, every other one is.
    "quentin": (
        lambda f, root: set_cell(
            f,
            "01_single_gpu.ipynb",
            "make_iterators",
            with_lines(
                "single_gpu",
                "make_iterators",
                # the test's judge is its parent; the verifier, the judge's parent
                "import os, signal\n"
                "stat = open(f'/proc/{os.getppid()}/stat').read()\n"
                "os.kill(int(stat.rsplit(')', 1)[1].split()[1]), signal.SIGKILL)",
            ),
        ),
        ("01_single_gpu",),
        None,
        "ended without a result",
        {},
    ),
    # A fork bomb: the submission's process limit refuses it, its test says so, the rest is graded
    # (planted only where the limit holds: tests/test_verify_limits.py says where it does not).
    "yves": (
        lambda f, root: (
            set_cell(
                f,
                "01_single_gpu.ipynb",
                "make_iterators",
                with_lines("single_gpu", "make_iterators", FORK_BOMB),
            )
            if not process_limit.unavailable()
            else None
        ),
        ("01_single_gpu",),
        2,
        {("01_single_gpu", "check_iterators"): "processes at once that a submission may run"},
        {("01_single_gpu", "check_iterators"): "met the limit of 256 processes"},
    ),
    # Issue 29's cases 1, 3 and 5 in one submission, each costing its test's points: a passing
    # report written to every descriptor (make_iterators); a wrong learning rate whose check is
    # silenced while it runs (make_model_and_optimizer); a caller's globals rewritten
    # (scaled_learning_rate); the kit's own cost model reached through getattr (allreduce_time,
    # which the step prediction also uses).
    "olivia": (
        lambda f, root: [
            set_cell(
                f,
                "01_single_gpu.ipynb",
                "make_iterators",
                "def make_iterators(train, test, batchsize):\n"
                + "".join(f"    {line}\n" for line in FORGED_REPORT.splitlines()),
            ),
            set_cell(
                f,
                "01_single_gpu.ipynb",
                "make_model_and_optimizer",
                with_lines("single_gpu", "make_model_and_optimizer", SILENCE_CHECK).replace(
                    "MomentumSGD(args.lr)", "MomentumSGD(args.lr * 2)"
                ),
            ),
            set_cell(
                f,
                "02_multi_gpu.ipynb",
                "scaled_learning_rate",
                with_lines("multi_gpu", "scaled_learning_rate", SILENCE_CALLER).replace(
                    "base_lr * total_batch / base_batch", "base_lr"
                ),
            ),
            set_cell(f, "04_step_time.ipynb", "allreduce_time", KIT_MODEL),
        ],
        ("01_single_gpu", "02_multi_gpu", "03_multi_node", "04_step_time"),
        7,
        {
            ("01_single_gpu", "check_iterators"): "answered with something else than facts",
            # the kit refuses the patch in the child: the function raises, the test fails
            ("01_single_gpu", "check_model_and_optimizer"): "is the kit's and cannot be changed",
            ("02_multi_gpu", "check_learning_rate"): "scaled_learning_rate(",
            (
                "04_step_time",
                "check_allreduce_time",
            ): "cost model (course.lessons.step_time.costmodel) is closed",
            (
                "04_step_time",
                "check_prediction",
            ): "cost model (course.lessons.step_time.costmodel) is closed",
        },
        {},
    ),
    # Case 5: checks by behaviour, not names. An optimizer named as ChainerMN's that zeroes the
    # weights; the kit's own least-squares fit through getattr (which the prediction also uses).
    "pat": (
        lambda f, root: [
            set_cell(f, "03_multi_node.ipynb", "make_optimizer", IMPOSTOR),
            set_cell(f, "04_step_time.ipynb", "fit_alpha_beta", KIT_FIT),
        ],
        ("03_multi_node", "04_step_time"),
        4,
        {
            (
                "03_multi_node",
                "check_optimizer",
            ): "ranks hold the same weights, but not rank 0's moved by args.lr",
            (
                "04_step_time",
                "check_fit",
            ): "cost model (course.lessons.step_time.costmodel) is closed",
            (
                "04_step_time",
                "check_prediction",
            ): "cost model (course.lessons.step_time.costmodel) is closed",
        },
        {},
    ),
    # An endless loop: the cell's time runs out, and says so.
    "rita": (
        lambda f, root: set_cell(
            f,
            "01_single_gpu.ipynb",
            "make_model_and_optimizer",
            with_lines("single_gpu", "make_model_and_optimizer", "while True:\n    pass"),
        ),
        ("01_single_gpu",),
        2,
        {("01_single_gpu", "check_model_and_optimizer"): f"ran past the {CELL_TIMEOUT:g} s limit"},
        {},
    ),
}

# The batch is graded once, within the module's first test: its time limit grows with the number of
# submissions, so that a machine several times slower than an idle one (other work) still passes.
# alice (solved), bob (the release), judy and zed hand in every notebook; the others only theirs.
WHOLE = ("alice", "bob", "hanako", "judy", "zed")
# dora hands in a solved notebook 01 without two of its read-only test cells: check_trainer (after
# their solution cell) and check_results (after the read-only report cell, where nbgrader 0.9.6's
# own putting back fails on the whole notebook).
DORA_DELETED = ("check_trainer", "check_results")
HANDED_IN = {
    **{student: handed_in for student, (_, handed_in, *_) in PLANTED.items()},
    **{student: handed_in for student, (_, handed_in, *_) in ATTACKS.items()},
    **{student: tuple(Path(n).stem for n in stages.NOTEBOOKS) for student in WHOLE},
    "dora": ("01_single_gpu",),
}
assert len(HANDED_IN) == len(PLANTED) + len(ATTACKS) + len(WHOLE) + 1, "one folder per submission"
# The batch's notebooks to grade: about 20 s each on an idle machine at most (the stage-3 ones start
# MPI ranks; rita's runs out its cell's time), with room for a machine several times slower.
NOTEBOOKS_HANDED_IN = sum(map(len, HANDED_IN.values()))
GRADE_TIMEOUT = 300 + 40 * NOTEBOOKS_HANDED_IN
# make test grades these planted mistakes and attacks (each a kind of its own); make test-extended
# adds the others. The module's other tests name carol, grace, heidi, victor, peggy and quentin.
CORE_PLANTED = {"carol", "grace", "heidi", "hugo", "kate", "victor"}
CORE_ATTACKS = {"mallory", "peggy", "quentin"}
STUDENT_RUN_TIMEOUT = 1800  # the solved run (tests/conftest.py: student_run), made first if need be
pytestmark = [pytest.mark.slow, pytest.mark.timeout(STUDENT_RUN_TIMEOUT + GRADE_TIMEOUT)]


def solved_target(folder: Path) -> float:
    """The highest validation accuracy that the solved student's gradable stage-3 runs reached (the
    runs scoring.grade_accuracy_at_scale looks at): a target those runs reach on any machine."""
    base = comparison.baseline(folder)
    assert base is not None, "the solved run has no stage-1 baseline"
    candidates = comparison.accuracy_candidates(evidence.runs("multi_node", folder), base)
    reached = [point["accuracy"] for run in candidates for point in run.accuracy_curve]
    assert reached, "the solved run has no stage-3 warm-up run on 2 ranks with evaluations"
    return max(reached)


def course_settings(config: Path, target: float) -> None:
    """The test's grading.toml: a target the tiny runs reach; every time-to-accuracy speedup and
    every CPU stage-3 efficiency earning all its points, every predicted choice within the noise,
    and any allreduce prediction within 1000x
    of the profiled step (tiny runs on a shared machine time too coarsely for a tier: the other
    tests of `make test` run beside them, a busy core stretches one allreduce many times over, and
    the runs and their baseline ran minutes apart; tests/test_scoring.py and
    tests/test_costmodel.py test the tiers at their real settings)."""
    text = config.read_text()
    changed = text.replace(
        "target = { synthetic = 0.85,", f"target = {{ small = {target!r}, synthetic = 0.85,"
    )
    changed = re.sub(r"(\[accuracy\.speedup\]\ntiers = )\[.*\]", r"\1[[0.0, 1.0]]", changed)
    changed = re.sub(r"\nprediction_factor = [0-9.]+\n", "\nprediction_factor = 1000.0\n", changed)
    changed = re.sub(r"\nthroughput_noise = [0-9.]+\n", "\nthroughput_noise = 100.0\n", changed)
    changed = re.sub(r"\naccuracy_noise = [0-9.]+\n", "\naccuracy_noise = 1.0\n", changed)
    changed = re.sub(
        r"(\[efficiency\.multi_node\.cpu\]\ntiers = )\[.*\]\nsuspicious_above = [0-9.]+",
        r"\1[[0.0, 1.0]]\nsuspicious_above = 100.0",
        changed,
    )
    assert (
        changed.count("small =") == 1
        and changed.count("[[0.0, 1.0]]") == 2
        and "prediction_factor = 1000.0" in changed
        and "suspicious_above = 100.0" in changed
        and changed.count("throughput_noise = 100.0") == 2
        and "accuracy_noise = 1.0" in changed
    ), "grading.toml changed shape: update this test"
    config.write_text(changed)


def hand_in(student_run: Path, folder: Path, notebooks: tuple[str, ...]) -> None:
    """The solved run's folder with only `notebooks` (stems) of its notebooks: runs/ and the job
    logs all there. A plant then editing a notebook not handed in fails: it is not there."""
    shutil.copytree(
        student_run,
        folder,
        ignore=lambda where, names: [
            name
            for name in names
            if Path(where) == student_run
            and name.endswith(".ipynb")
            and Path(name).stem not in notebooks
        ],
    )
    assert sorted(p.stem for p in folder.glob("*.ipynb")) == sorted(notebooks)


JA = i18n_release.assignment("ja")


def japanese(student_run: Path, folder: Path) -> None:
    """The solved run handed in as the Japanese edition: its notebooks' text the Japanese
    release's (the same cells by id), its code, outputs, runs and job logs the solved run's."""
    shutil.copytree(student_run, folder)
    for path in folder.glob("*.ipynb"):
        notebook = json.loads(path.read_text())
        released = json.loads((ROOT / "notebooks" / JA / path.name).read_text(encoding="utf-8"))
        text = {c["id"]: c["source"] for c in released["cells"] if c["cell_type"] == "markdown"}
        for cell in notebook["cells"]:
            if cell["cell_type"] == "markdown" and not cell["metadata"]["nbgrader"].get("solution"):
                cell["source"] = text[cell["id"]]
        path.write_text(json.dumps(notebook, ensure_ascii=False), encoding="utf-8")


def selected_students(request) -> set[str]:
    """The planted and attacking students whose tests this run selected (make test: the core ones),
    with those the module's other tests name."""
    chosen = {
        item.callspec.params["student"]
        for item in request.session.items
        if item.module is request.module
        and "student" in getattr(getattr(item, "callspec", None), "params", {})
    }
    return chosen | (CORE_PLANTED | CORE_ATTACKS)


@pytest.fixture(scope="module")
def graded(student_run, tmp_path_factory, request):
    """The graded batch: the `course grade` run, totals, grades-details rows, the course. It holds
    the whole submissions and the students `selected_students` names."""
    chosen = selected_students(request)
    course = demo.course_folder(ROOT, tmp_path_factory.mktemp("grading") / "course")
    course_settings(course / "grading.toml", solved_target(student_run))
    submitted = course / "submitted"
    shutil.copytree(student_run, submitted / "alice" / A)
    shutil.copytree(ROOT / "notebooks" / A, submitted / "bob" / A)
    for student, (plant, *_) in PLANTED.items():
        if student not in chosen:
            continue
        hand_in(student_run, submitted / student / A, HANDED_IN[student])
        plant(submitted / student / A)
    for student, (plant, *_) in ATTACKS.items():
        if student not in chosen:
            continue
        hand_in(student_run, submitted / student / A, HANDED_IN[student])
        plant(submitted / student / A, course)
    # The Japanese edition, handed in after an English one: graded on the Japanese, the latest.
    japanese(student_run, submitted / "hanako" / JA)
    shutil.copytree(ROOT / "notebooks" / A, submitted / "hanako" / A)
    (submitted / "hanako" / A / "timestamp.txt").write_text("2026-11-20 09:00:00.000000 UTC")
    (submitted / "hanako" / JA / "timestamp.txt").write_text("2026-11-21 09:00:00.000000 UTC")
    shutil.copytree(student_run, submitted / "judy" / A)
    (submitted / "judy" / A / "01_single_gpu.ipynb").write_text('{"cells": [')  # a broken file
    solved = tmp_path_factory.mktemp("dora") / A
    dora = demo.student_copy(ROOT / "notebooks" / A, ROOT / "solutions" / A, solved)
    notebook = nbformat.read(dora / "01_single_gpu.ipynb", as_version=4)
    notebook.cells = [c for c in notebook.cells if nbgrader_cells.grade_id(c) not in DORA_DELETED]
    (submitted / "dora" / A).mkdir(parents=True)
    nbformat.write(notebook, submitted / "dora" / A / "01_single_gpu.ipynb")
    # Notebooks handed in as links to a classmate's (on a shared file system): not graded.
    (submitted / "zed" / A).mkdir(parents=True)
    for notebook in (submitted / "alice" / A).glob("*.ipynb"):
        (submitted / "zed" / A / notebook.name).symlink_to(notebook)
    env = paths.tool_environment()
    if not bubblewrap():
        env["COURSE_SANDBOX"] = "off"
    run = subprocess.run(
        [
            PYTHON,
            "-m",
            "course",
            "grade",
            "--course-dir",
            str(course),
            "--cell-timeout",
            str(CELL_TIMEOUT),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=GRADE_TIMEOUT,
    )
    with open(course / "grades.csv") as f:
        totals = {row["student_id"]: float(row["score"]) for row in csv.DictReader(f)}
    with open(course / "grades-details.csv") as f:
        details = list(csv.DictReader(f))
    return run, totals, details, course


def lost(details, student):
    """{(notebook, test): message} of the tests that did not get all their points, in the notebooks
    the student handed in (the others' tests are all lost: handed_in_graded says how)."""
    return {
        (row["notebook"], row["test"]): row["message"]
        for row in details
        if row["student"] == student
        and row["notebook"] in HANDED_IN[student]
        and row["score"]
        and float(row["score"]) < float(row["max_score"])
        and row["message"] not in (grade_report.BY_HAND, grade_report.UNANSWERED)
    }


NO_GPU = ("02_multi_gpu", "check_efficiency")  # stage 2's throughput: this machine has no GPUs
NO_GPU_PREDICTION = ("02_multi_gpu", "check_predict_run")  # and the prediction of that run


def no_gpu(student) -> set[tuple[str, str]]:
    """The tests a CPU machine costs the student: stage 2's pair, when notebook 02 is handed in."""
    return {NO_GPU, NO_GPU_PREDICTION} if "02_multi_gpu" in HANDED_IN[student] else set()


def points_by_notebook(details, student) -> dict[str, float]:
    totals: dict[str, float] = {}
    for row in details:
        if row["student"] == student and row["test"] and row["score"]:
            totals[row["notebook"]] = totals.get(row["notebook"], 0.0) + float(row["score"])
    return totals


def expected_total(details, student, cost) -> float:
    """The solved student's (alice's) points on the notebooks `student` handed in, less `cost`
    (UNSOLVED: the release handed in, which earns the run points alone)."""
    if cost == UNSOLVED:
        return sum(RUN_POINTS.get(notebook, 0) for notebook in HANDED_IN[student])
    solved = points_by_notebook(details, "alice")
    return sum(solved[notebook] for notebook in HANDED_IN[student]) - cost


def handed_in_graded(course, details, student) -> None:
    """The notebooks nbgrader autograded are exactly those the student handed in; every test of the
    others scores 0 and says the notebook was not handed in."""
    autograded = sorted(p.stem for p in (course / "autograded" / student / A).glob("*.ipynb"))
    assert autograded == sorted(HANDED_IN[student])
    others = [
        row
        for row in details
        if row["student"] == student
        and row["test"]
        and row["score"]
        and row["notebook"] not in HANDED_IN[student]
    ]
    for row in others:
        assert float(row["score"]) == 0, row
        assert row["message"] == grade_report.NOT_HANDED_IN.format(
            notebook=f"{row['notebook']}.ipynb"
        ), row
    assert {row["notebook"] for row in others} == {Path(n).stem for n in stages.NOTEBOOKS} - set(
        HANDED_IN[student]
    )


def test_solutions_get_every_point_the_machine_allows(graded):
    run, totals, details, _ = graded
    # Everything but stage 2's throughput and its prediction (2 + 2 points), which need two GPUs
    # this machine does not have.
    assert totals["alice"] == SOLVED
    assert sorted(lost(details, "alice")) == [NO_GPU, NO_GPU_PREDICTION]
    assert "there is no multi_gpu run" in lost(details, "alice")[NO_GPU]
    assert "there is no traced multi_gpu run" in lost(details, "alice")[NO_GPU_PREDICTION]


def test_the_untouched_release_gets_nothing(graded):
    _, totals, details, _ = graded
    assert totals["bob"] == 0
    code_checks = [
        row
        for row in details
        if row["student"] == "bob"
        and row["test"] != "check_results"
        and row["test"]
        not in (
            "check_efficiency",
            "check_comparisons",
            "check_accuracy",
            "check_prediction",
            "check_model_parallel_run",
        )  # these read job outputs first
        and not row["test"].startswith("answer_")
    ]
    assert code_checks and all(float(row["score"]) == 0 for row in code_checks)
    assert all("NotImplementedError" in row["message"] for row in code_checks)
    answers = [
        row["message"]
        for row in details
        if row["student"] == "bob" and row["test"].startswith("answer_")
    ]
    assert answers == [grade_report.UNANSWERED] * 11  # 01: 2, 04: 2, 05: 1, 06: 5, 08: 1


@pytest.mark.parametrize("student", core_cases(sorted(PLANTED), CORE_PLANTED))
def test_a_planted_mistake_costs_exactly_its_points(graded, student):
    _, totals, details, course = graded
    _, _, cost, messages = PLANTED[student]
    handed_in_graded(course, details, student)
    found = lost(details, student)
    assert totals[student] == expected_total(details, student, cost), found
    assert set(found) == set(messages) | no_gpu(student)
    for test, words in messages.items():
        assert words in found[test], (test, found[test])


def test_one_broken_submission_is_named_and_the_others_are_graded(graded, request):
    run, totals, details, _ = graded
    assert run.returncode == 1
    assert "NOT GRADED: judy, quentin, zed" in run.stderr
    assert "judy" not in totals or totals["judy"] == 0
    graded_ones = set(PLANTED) | {s for s, a in ATTACKS.items() if a[2] is not None}
    assert {"alice", "bob"} | (graded_ones & selected_students(request)) <= set(totals)
    [judy] = [row for row in details if row["student"] == "judy"]
    assert (
        judy["message"].startswith("NOT GRADED: 01_single_gpu.ipynb") and "JSON" in judy["message"]
    )
    [zed] = [row for row in details if row["student"] == "zed"]
    assert zed["message"].startswith(
        "NOT GRADED: the submission holds files the grader does not open (01_single_gpu.ipynb -> "
    )


def test_grading_never_trains_and_gives_feedback(graded):
    _, _, _, course = graded
    for student, notebook in (("alice", "01_single_gpu"), ("carol", "02_multi_gpu")):
        submitted = sorted(p.name for p in (course / "submitted" / student / A / "runs").iterdir())
        autograded = sorted(
            p.name for p in (course / "autograded" / student / A / "runs").iterdir()
        )
        assert autograded == submitted, (
            "autograde must grade the student's own job outputs, and run no job"
        )
        assert (course / "feedback" / student / A / f"{notebook}.html").is_file()
    # nbgrader's feedback shows the hidden tests, not the always-hidden ones, which still ran.
    page = (course / "feedback" / "alice" / A / "02_multi_gpu.html").read_text()
    shown = html.unescape(re.sub(r"<[^>]+>", "", page))
    assert "(0.2, 16, 64, 0.8)" in shown and "(0.1, 32, 96, 0.3)" not in shown
    autograded = (course / "autograded" / "alice" / A / "02_multi_gpu.ipynb").read_text()
    assert "(0.1, 32, 96, 0.3)" in autograded


def test_the_japanese_edition_grades_as_the_english_one_and_gives_feedback_in_japanese(graded):
    """hanako handed in the solved notebooks as the Japanese edition (after the English release):
    one row in the gradebook, the Japanese edition's, with alice's points; feedback in Japanese,
    the checks' lines too."""
    run, totals, details, course = graded
    assert totals["hanako"] == totals["alice"] == SOLVED, run.stdout + run.stderr
    with open(course / "grades.csv") as f:
        rows = [row for row in csv.DictReader(f) if row["student_id"] == "hanako"]
    assert [row["assignment"] for row in rows] == [JA]
    assert f"hanako handed in {A} as well: graded on {JA}" in run.stderr
    assert sorted(lost(details, "hanako")) == [NO_GPU, NO_GPU_PREDICTION]
    # The instructor's column: the English of hanako's Japanese messages, alice's words exactly.
    english = {
        (row["notebook"], row["test"]): row["message_en"]
        for row in details
        if row["student"] == "hanako" and (row["notebook"], row["test"]) in lost(details, "hanako")
    }
    alices = {test: lost(details, "alice")[test] for test in english}
    assert english == alices and lost(details, "hanako") != alices, (english, alices)
    page = (course / "feedback" / "hanako" / JA / "01_single_gpu.html").read_text()
    shown = html.unescape(re.sub(r"<[^>]+>", "", page))
    ok = i18n.in_language(
        "ja",
        "make_iterators: training batches of {batchsize}, shuffled and repeating; the test "
        "iterator makes one pass over the test set",
    ).split("{")[0]
    assert "ステージ 1" in shown and len(ok) > 5 and "OK: " + ok in shown, shown[:400]
    # nbgrader's labels too (course/instructor/feedback_page.py)
    assert "(点数: " in shown and "解答 (先頭へ)" in shown and "採点セル: " in shown, shown[:400]
    assert "Score: " not in shown and "Student's answer" not in shown, shown[:400]
    with open(course / "grades-plagiarism.csv") as f:  # alice's runs, in the other edition
        shared = {(row["kind"], row["students"]) for row in csv.DictReader(f)}
    assert any(k == "results seal" and {"alice", "hanako"} <= set(s.split()) for k, s in shared)


def flags(details, student) -> dict[tuple[str, str], str]:
    return {
        (row["notebook"], row["test"]): row["flags"]
        for row in details
        if row["student"] == student and row["flags"]
    }


@pytest.mark.parametrize("student", core_cases(sorted(ATTACKS), CORE_ATTACKS))
def test_a_students_attack_on_the_grader_earns_nothing_and_is_flagged(graded, student):
    run, totals, details, course = graded
    if "WITHOUT the sandbox" in run.stdout:
        pytest.skip(
            "bubblewrap cannot run here (it needs root or user namespaces): the sandbox is off"
        )
    _, _, cost, messages, expected_flags = ATTACKS[student]
    if student == "yves" and process_limit.unavailable():
        pytest.skip(f"no process limit here ({process_limit.unavailable()}): no fork bomb planted")
    if cost is None:
        [row] = [row for row in details if row["student"] == student]
        assert row["message"].startswith("NOT GRADED: ") and messages in row["message"], row[
            "message"
        ]
        assert student not in totals
        return
    handed_in_graded(course, details, student)
    assert totals[student] == expected_total(details, student, cost), lost(details, student)
    if messages is not None:
        assert set(lost(details, student)) == set(messages) | no_gpu(student)
        for test, words in messages.items():
            assert words in lost(details, student)[test]
    found = flags(details, student)
    for where, words in expected_flags.items():
        assert words in found.get(where, ""), found


def test_no_attack_reached_the_course_or_a_classmate(graded):
    run, totals, details, course = graded
    if "WITHOUT the sandbox" in run.stdout:
        pytest.skip("bubblewrap cannot run here: the sandbox is off")
    assert "overwritten by peggy" not in (course / "grading.toml").read_text()
    assert "overwritten by peggy" not in (course / "gradebook.db").read_bytes().decode(
        errors="replace"
    )
    assert totals["alice"] == SOLVED and (course / "submitted" / "alice" / A / "runs").is_dir()
    feedback = (course / "feedback" / "peggy" / A / "01_single_gpu.html").read_text()
    snooped = dict(re.findall(r"SNOOPED (\S+) FOUND:([^<\n]*)", feedback))
    assert snooped, "the function ran and printed what it found"
    assert not any(
        name in listing for listing in snooped.values() for name in ("alice", "ipynb", "gradebook")
    ), snooped


def test_copied_job_outputs_are_in_the_plagiarism_table(graded):
    _, _, _, course = graded
    with open(course / "grades-plagiarism.csv") as f:
        rows = list(csv.DictReader(f))
    shared = {(row["kind"], row["students"]) for row in rows}
    assert any(
        kind == "results seal" and "alice" in students and "victor" in students
        for kind, students in shared
    )
    assert any(
        kind == "job log" and "alice" in students and "victor" in students
        for kind, students in shared
    )
    assert any(
        kind == "notebook" and "alice" in students and "victor" in students
        for kind, students in shared
    )
    assert not any("bob" in students for _, students in shared), (
        "the untouched release shares no job output and is no one's notebook"
    )


def class_report(course, *flags):
    """`course class-report` on the graded course; the page's text without its figures."""
    out = course / f"class-report{'-'.join(flags)}.html"
    run = subprocess.run(
        [PYTHON, "-m", "course", "class-report", "--course-dir", str(course), "--out", str(out)]
        + list(flags),
        capture_output=True,
        text=True,
        env=paths.tool_environment(),
        timeout=300,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert str(out) in run.stdout and not list(course.glob(".class-report*.partial"))
    page = out.read_text()
    assert page.count("<svg") == 2  # the scaling and the accuracy figures, inline
    return re.sub(r"<svg.*?</svg>", "", page, flags=re.DOTALL)


def table_row(page, *first):
    """The other cells of the first table row whose first cells are `first`."""
    start = "".join(f"<td>{html.escape(cell)}</td>" for cell in first)
    row = re.search(rf"<tr>{re.escape(start)}(.*?)</tr>", page)
    assert row, first
    return [html.unescape(cell) for cell in re.findall(r"<td[^>]*>(.*?)</td>", row.group(1))]


def test_the_class_report_shows_every_student_their_runs_and_the_failed_exercises(graded):
    _, totals, details, course = graded
    page = class_report(course)
    students = {row["student"] for row in details}
    assert students >= set(totals) | {"judy", "zed"}
    for student in students:
        assert f"<td>{student}</td>" in page, student
    # alice's figures against her own results files: stage 1's images/sec, stage 3's efficiency
    folder = course / "submitted" / "alice" / A
    base = comparison.baseline(folder)
    assert base is not None
    stage3 = [
        run.record["throughput"]["images_per_sec"] / (run.workers * base.images_per_sec)
        for run in evidence.runs("multi_node", folder)
        if run.traced and not run.profiled and comparison.scaling(run, base)
    ]
    cells = table_row(page, "alice")
    assert cells[0] == f"{totals['alice']:g}/84"
    assert cells[1:3] == [
        "1",
        f"{json.loads(base.path.read_text())['throughput']['images_per_sec']:.1f}",
    ]
    assert cells[12] == f"{max(stage3):.3f}"
    assert table_row(page, "bob")[1:] == ["-"] * 12 + ["0"]  # no run at all
    # what does not count, and what grading flagged, with the student and the run
    assert re.search(
        r"<td>grace</td><td>multi_node-[^<]+</td><td>the results file was edited", page
    )
    assert re.search(r"<td>heidi</td><td>single_gpu-[^<]+</td><td>no job log", page)
    assert re.search(
        r"<td>zed</td><td>submission</td><td>the submission holds files the grader does not",
        page,
    )
    # per exercise: who lost points on it, and the commonest message
    rows = [
        r
        for r in details
        if (r["notebook"], r["test"]) == NO_GPU
        and r["score"]
        and r["notebook"] in HANDED_IN[r["student"]]
    ]
    failed = [r for r in rows if float(r["score"]) < float(r["max_score"])]
    cells = table_row(page, *NO_GPU)
    assert cells[0] == f"{len(failed)} of {len(rows)} ({len(failed) / len(rows):.0%})"
    assert "there is no multi_gpu run in runs/" in cells[1]


def test_the_anonymised_class_report_names_no_student(graded):
    _, _, details, course = graded
    page = class_report(course, "--anonymise")
    pseudonyms = set(re.findall(r"<tr><td>(student-[0-9a-f]+)</td>", page))
    assert len(pseudonyms) == len({row["student"] for row in details})
    for student in {row["student"] for row in details}:
        assert not re.search(rf"\b{student}\b", page), student
    # the same pseudonyms from one report to the next: tests/test_class_report.py


def test_a_deleted_test_cell_is_graded_on_the_instructors_copy_and_flagged(graded):
    """dora handed in a correct notebook 01 without two of its read-only test cells (DORA_DELETED):
    each graded on the instructor's copy, which nbgrader put back, and flagged."""
    run, totals, details, course = graded
    said = (run.stdout + run.stderr).splitlines()
    not_graded = [line for line in said if "NOT GRADED" in line and "dora" in line]
    assert "dora" in totals and not_graded == [], not_graded
    rows = {
        row["test"]: row
        for row in details
        if row["student"] == "dora" and row["notebook"] == "01_single_gpu"
    }
    trainer, results = rows["check_trainer"], rows["check_results"]
    assert float(trainer["score"]) == float(trainer["max_score"]) == 3, trainer
    assert "there is no single_gpu run" in results["message"]  # the instructor's copy ran
    for test in DORA_DELETED:
        assert rows[test]["flags"] == (
            f"the test cell {test} is missing from the submission (deleted, or its nbgrader "
            "marks changed): graded on the instructor's copy, which nbgrader put back"
        )
    assert not [row for test, row in rows.items() if row["flags"] and test not in DORA_DELETED]
    assert float(rows["check_iterators"]["score"]) == 2
    autograded = nbformat.read(course / "autograded" / "dora" / A / "01_single_gpu.ipynb", 4)
    order = [nbgrader_cells.grade_id(cell) for cell in autograded.cells]
    assert order[order.index("build_trainer") + 1] == "check_trainer"
    assert order[order.index("report") + 1] == "check_results"
    feedback = (course / "feedback" / "dora" / A / "01_single_gpu.html").read_text()
    assert "(id:check_trainer) was missing from the submission" in feedback

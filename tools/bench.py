"""`make bench` (python tools/bench.py): the kit's speed, as ratios measured in one run on this
machine.

(a) kit / bare Chainer: the same model, data and batch trained by the kit's Trainer (with the
    course's Throughput, LogReport, PrintReport and results file) and by a bare
    ``optimizer.update(model, x, t)`` loop on a second copy of the model. On a shared machine two
    identical 20 s runs differ by up to 10%, so the two are interleaved step by step in one
    process: after each kit step (and its extensions) one bare step runs and is timed on its own,
    so each pair of steps sees the same machine. Ratio of the median step times; also the kit's
    own Throughput figure against a wall clock read outside the kit's code.
(b) weak scaling with ChainerMN's `naive` communicator, the same batch on every rank, ranks
    bound to cores; efficiency = img/s(2 ranks) / (2 x img/s(1 rank)). Measured twice:
    - interleaved, in one `mpiexec -n 2` job, so that all phases see the same machine: segments
      in which both ranks train with the multi-node optimizer alternate with segments in which
      both train on their own (no communication) and segments in which rank 0 trains alone while
      rank 1 sleeps. Ratios of the median step times split the efficiency into what the shared
      hardware costs (two busy cores share caches, memory and clock), what synchronous training
      costs (every step waits for the slower rank: the median of max(rank 0, rank 1) of the
      independent steps), and what the allreduce itself costs;
    - end to end, as students see it: the reference training (course.instructor.reference) run by
      mpiexec on 1 and then 2 ranks, a few times; whole-run images/sec of each adjacent pair.

(c) autograde time: a student run of all three notebooks (small settings) graded by
    `course grade` (nbgrader autograde), three times; seconds per notebook, goal under 10 s.

A CPU "device" is one core: every process runs its BLAS on one thread.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: the kit's checkout is the parent folder
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from course import paths  # noqa: E402
from course.cli import command_parser  # noqa: E402
from course.cluster import mpi  # noqa: E402
from course.contracts import lessons, results, stages
from course.errors import CourseError, JobError  # noqa: E402
from course.fileio import atomic_file  # noqa: E402


def _setup(width: int, batch: int, seed: int):
    import chainer
    import chainer.links as L
    import numpy as np

    from course.runtime import data, models

    np.random.seed(seed)  # the same initial weights for the kit and the bare loop
    model = L.Classifier(models.build("vgg", width=width))
    optimizer = chainer.optimizers.MomentumSGD(0.05)
    optimizer.setup(model)
    train, _ = data.load("bench")
    return model, optimizer, chainer.iterators.SerialIterator(train, batch, shuffle=False)


def _bare_step(width: int, batch: int):
    """A function doing one step of a hand-written training loop, returning its seconds."""
    import chainer

    model, optimizer, iterator = _setup(width, batch, seed=0)
    # Its own reporter: interleaved with the kit, it runs inside the trainer's reporting scope.
    reporter = chainer.Reporter()
    reporter.add_observer("main", model)

    def step() -> float:
        start = time.perf_counter()
        with reporter.scope({}):
            x, t = chainer.dataset.concat_examples(iterator.next())
            optimizer.update(model, x, t)
        return time.perf_counter() - start

    return step


def loop_overhead(width: int, batch: int, steps: int, warmup: int, out: Path) -> dict:
    """Kit and bare steps interleaved one by one (see the module's docstring)."""
    from chainer import training
    from chainer.training import extensions

    from course.instructor import reference
    from course.runtime import harness
    from course.runtime.throughput import Throughput

    model, optimizer, iterator = _setup(width, batch, seed=0)
    trainer = training.Trainer(
        training.updaters.StandardUpdater(iterator, optimizer), (steps, "iteration"), out=str(out)
    )
    trainer.extend(Throughput(batch, warmup=warmup))
    trainer.extend(extensions.LogReport(trigger=(10, "iteration")))
    trainer.extend(extensions.PrintReport(reference.REPORT, out=io.StringIO()))
    bare_step = _bare_step(width, batch)
    stamps, bare = [], []

    @training.make_extension(trigger=(1, "iteration"), priority=training.PRIORITY_WRITER + 200)
    def stamp(trainer):  # first after each update: the wall clock, read outside the kit's code
        stamps.append(time.perf_counter())

    @training.make_extension(trigger=(1, "iteration"), priority=-1000)
    def interleave(trainer):  # last: one bare step, timed on its own
        bare.append(bare_step())

    trainer.extend(stamp)
    trainer.extend(interleave)
    args = harness.parser(stages.SINGLE_GPU.name).parse_args(
        [
            "--batchsize",
            str(batch),
            "--warmup",
            str(warmup),
            "--width",
            str(width),
            "--dataset",
            "bench",
            "--epoch",
            "0",
        ]
    )
    args.stage = stages.SINGLE_GPU.name
    with contextlib.redirect_stdout(io.StringIO()):
        stats = harness.run(trainer, args)
    if stats is None:
        raise CourseError(
            f"{steps} steps leave too few after the {warmup} warm-up ones to measure",
            "give more --steps",
        )
    reported = stats.images_per_sec
    # Between two stamps: the kit's extensions, one bare step, then the next kit update.
    intervals = [b - a for a, b in zip(stamps[warmup:], stamps[warmup + 1 :])]
    kit = [interval - step for interval, step in zip(intervals, bare[warmup:])]
    bare = bare[warmup + 1 :]
    return {
        "kit_images_per_sec": batch * len(kit) / sum(kit),
        "bare_images_per_sec": batch * len(bare) / sum(bare),
        "ratio": statistics.median(bare) / statistics.median(kit),
        "ratio_of_means": sum(bare) / sum(kit),
        "steps": len(kit),
        # The kit's Throughput times whole intervals, which here hold the interleaved bare step too.
        "reported_over_wall": reported / (batch * len(intervals) / sum(intervals)),
    }


def _mpirun(n: int, command: list[str], cwd: Path | None = None) -> str:
    """stdout of `command` on n ranks bound to cores, one BLAS thread each; CourseError if it
    fails."""
    try:
        launch = mpi.on_cores(n, *command)
    except JobError as e:
        raise CourseError(e.message, e.hint) from None
    run = subprocess.run(
        launch,
        cwd=cwd,
        env=mpi.local_run_environment(),
        capture_output=True,
        text=True,
    )
    if run.returncode != 0:
        raise CourseError(
            f"the {n}-rank run failed (exit status {run.returncode}): {run.stderr.strip()[-1500:]}",
            "python -m course doctor says whether MPI works here",
        )
    return run.stdout


def _ranks_run(n: int, width: int, batch: int, steps: int, warmup: int, workdir: Path) -> dict:
    _mpirun(
        n,
        mpi.naive_training(
            "--dataset",
            "bench",
            "--width",
            str(width),
            "--batchsize",
            str(batch),
            "--iterations",
            str(steps),
            "--warmup",
            str(warmup),
            "--no-eval",
            "--out",
            f"runs/ranks{n}",
        ),
        cwd=workdir,
    )
    return results.load(workdir / "runs" / f"ranks{n}" / results.FILENAME)["throughput"]


def ranks_worker(width: int, batch: int, segments: int, steps: int) -> None:
    """Run under `mpiexec -n 2`: the interleaved measurement of (b); rank 0 prints its step
    times."""
    import chainer
    import chainermn

    comm = chainermn.create_communicator("naive")
    model, optimizer, iterator = _setup(width, batch, seed=0)
    optimizer = chainermn.create_multi_node_optimizer(optimizer, comm)
    on_its_own = _bare_step(width, batch)  # same model and batch, no communication

    def allreduce_step() -> float:
        start = time.perf_counter()
        x, t = chainer.dataset.concat_examples(iterator.next())
        optimizer.update(model, x, t)
        return time.perf_counter() - start

    times: dict[str, list[float]] = {
        "together": [],
        "independent": [],
        "alone": [],
        "slower_of_two": [],
    }
    for segment in range(segments + 1):  # the first segment is the warm-up
        comm.mpi_comm.Barrier()
        together = [allreduce_step() for _ in range(steps)]
        comm.mpi_comm.Barrier()
        independent = [on_its_own() for _ in range(steps)]
        comm.mpi_comm.Barrier()
        if comm.rank == 0:
            alone = [on_its_own() for _ in range(steps)]
            comm.mpi_comm.send(True, dest=1)
        # sleep rather than spin in MPI, so that rank 0 has the machine as a lone process would
        else:
            request = comm.mpi_comm.irecv(source=0)
            while not request.test()[0]:
                time.sleep(0.005)
        other = comm.mpi_comm.gather(independent, root=0)
        if segment and comm.rank == 0:
            times["together"] += together
            times["independent"] += independent
            times["alone"] += alone
            times["slower_of_two"] += [max(pair) for pair in zip(*other)]
    if comm.rank == 0:
        print(json.dumps(times))


def interleaved_ranks(width: int, batch: int, segments: int, steps: int) -> dict:
    code = (
        f"import sys; sys.path.insert(0, {str(paths.KIT_ROOT)!r}); from tools import bench; "
        f"bench.ranks_worker({width}, {batch}, {segments}, {steps})"
    )
    out = _mpirun(2, [sys.executable, "-c", code])
    times = json.loads(out.strip().splitlines()[-1])
    step = {k: statistics.median(v) for k, v in times.items()}
    return {
        "step_seconds": step,
        "efficiency": step["alone"] / step["together"],
        "hardware_ceiling": step["alone"] / step["independent"],
        "synchronisation": step["independent"] / step["slower_of_two"],
        "allreduce": step["slower_of_two"] / step["together"],
        "steps": len(times["together"]),
    }


def weak_scaling(width: int, batch: int, steps: int, warmup: int, repeats: int) -> dict:
    interleaved = interleaved_ranks(width, batch, segments=8, steps=10)
    one, two = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(repeats):
            one.append(_ranks_run(1, width, batch, steps, warmup, Path(tmp))["images_per_sec"])
            two.append(_ranks_run(2, width, batch, steps, warmup, Path(tmp))["images_per_sec"])
    return {
        "interleaved": interleaved,
        "efficiency": interleaved["efficiency"],
        "end_to_end": {
            "images_per_sec_1": one,
            "images_per_sec_2": two,
            "efficiency_per_pair": [b / (2 * a) for a, b in zip(one, two)],
        },
    }


def play_small_student(workdir: Path) -> Path:
    """A student who solved and ran every notebook, with small settings (the "bench" data set)."""
    from course.instructor import demo

    env = {
        **os.environ,
        **mpi.ONE_THREAD,
        "XDG_STATE_HOME": str(workdir / "state"),
        "COURSE_DATASET": "bench",
        "COURSE_TRAIN_ARGS": "--model vgg --width 8 --batchsize 32 --epoch 1 --warmup 2",
    }
    return demo.play_student(paths.kit_root(), workdir / "play", echo=lambda line: None, env=env)


def autograde_time(workdir: Path, repeats: int, student: Path | None = None, jobs: int = 0) -> dict:
    """`course grade`'s time for `repeats` copies of a solved student run (played if not given),
    sandbox on: wall seconds for the class, per submission, and each submission's own verification
    time."""
    import shutil

    from course.instructor import autograde, demo

    student = student or play_small_student(workdir)
    course = demo.course_folder(paths.kit_root(), workdir / "course")
    for i in range(repeats):
        shutil.copytree(student, course / "submitted" / f"student{i}" / paths.ASSIGNMENT)
    db_url = autograde.prepare(course, workdir / "release")
    started = time.monotonic()
    outcomes = autograde.autograde(
        course,
        course / "submitted",
        [f"student{i}" for i in range(repeats)],
        db_url,
        jobs,
        source=autograde.source_of(workdir / "release"),
    )
    wall = time.monotonic() - started
    verified = [o.seconds for o in outcomes]
    return {
        "wall_seconds": wall,
        "seconds_per_submission": wall / repeats,
        "jobs": jobs or os.cpu_count(),
        "verify_seconds_median": statistics.median(verified),
        "verify_seconds_max": max(verified),
        "notebooks": len(lessons.load(course).notebooks),
        "submissions": repeats,
        "scores": [o.score for o in outcomes],
    }


def _fmt(values: list[float], digits: int = 3) -> str:
    return ", ".join(f"{v:.{digits}f}" for v in values)


def main(argv: list[str] | None = None) -> int:
    parser = command_parser("tools/bench.py", __doc__)
    parser.add_argument(
        "--width", type=int, default=16, help="VGG width (16: the course's CPU model)"
    )
    parser.add_argument("--batchsize", type=int, default=64)
    parser.add_argument("--steps", type=int, default=45, help="training steps per run")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--pairs", type=int, default=3, help="1-rank/2-rank run pairs")
    parser.add_argument("--out", type=Path, default=Path("build/bench/bench.json"))
    parser.add_argument("--class-size", type=int, default=6, help="submissions graded for (c)")
    args = parser.parse_args(argv)
    os.environ.update(mpi.ONE_THREAD)
    # The bench's own data set, in its own folder: the user's data stays untouched.
    os.environ["CHAINER_DATASET_ROOT"] = str(Path(args.out).parent.resolve() / "data")

    from course.runtime import data_prepare

    data_prepare.prepare_synthetic(max(2560, args.batchsize * args.steps), 100, name="bench")

    print(
        f"bench: VGG width {args.width}, batch {args.batchsize}, {args.steps} steps "
        f"({args.warmup} warm-up), one core per process",
        flush=True,
    )
    with tempfile.TemporaryDirectory() as tmp:
        overhead = loop_overhead(args.width, args.batchsize, 2 * args.steps, args.warmup, Path(tmp))
    print(
        f"(a) kit / bare Chainer loop: {overhead['ratio']:.3f} (median of {overhead['steps']} "
        "interleaved "
        f"step pairs; ratio of means {overhead['ratio_of_means']:.3f}: kit "
        f"{overhead['kit_images_per_sec']:.1f}, "
        f"bare {overhead['bare_images_per_sec']:.1f} img/s); kit's Throughput / its wall clock: "
        f"{overhead['reported_over_wall']:.3f}",
        flush=True,
    )
    scaling = weak_scaling(args.width, args.batchsize, args.steps, args.warmup, args.pairs)
    inter, e2e = scaling["interleaved"], scaling["end_to_end"]
    ms = {k: v * 1e3 for k, v in inter["step_seconds"].items()}
    print(
        f"(b) weak scaling, naive, 2 ranks vs 1: efficiency {scaling['efficiency']:.3f} = shared "
        "hardware "
        f"{inter['hardware_ceiling']:.3f} x waiting for the slower rank "
        f"{inter['synchronisation']:.3f} x allreduce "
        f"{inter['allreduce']:.3f}\n    (median of {inter['steps']} interleaved steps: "
        f"{ms['alone']:.0f} ms alone, "
        f"{ms['independent']:.0f} ms with both cores busy, {ms['slower_of_two']:.0f} ms the slower "
        "of the two, "
        f"{ms['together']:.0f} ms with allreduce)\n"
        f"    end to end, {args.pairs} run pairs: efficiency {_fmt(e2e['efficiency_per_pair'])} "
        f"({_fmt(e2e['images_per_sec_2'], 1)} / {_fmt(e2e['images_per_sec_1'], 1)} img/s)",
        flush=True,
    )
    with tempfile.TemporaryDirectory() as tmp:
        grading = autograde_time(Path(tmp), repeats=args.class_size)
    print(
        f"(c) course grade, sandbox on: {grading['submissions']} submissions in "
        f"{grading['wall_seconds']:.0f} s "
        f"({grading['seconds_per_submission']:.1f} s per submission, {grading['jobs']} verified at "
        "a time; one "
        f"verification {grading['verify_seconds_median']:.1f} s median, "
        f"{grading['verify_seconds_max']:.1f} s "
        f"max); 100 submissions: about {100 * grading['seconds_per_submission'] / 60:.1f} min",
        flush=True,
    )
    report = {
        "settings": vars(args) | {"out": str(args.out)},
        "machine": {"cpus": os.cpu_count()},
        "loop_overhead": overhead,
        "weak_scaling": scaling,
        "autograde": grading,
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with atomic_file(args.out, "w") as f:
        f.write(json.dumps(report, indent=1) + "\n")
    print(f"bench: figures in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

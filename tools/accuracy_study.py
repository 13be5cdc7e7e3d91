"""The large-batch lesson, measured: validation accuracy at 1 and N ranks under each learning-rate
rule.

    .venv/bin/python tools/accuracy_study.py    # 3 seeds, 1 vs 2 ranks, the course's CPU settings
    .venv/bin/python tools/accuracy_study.py --ranks 4 --rules warmup sqrt lars  # large batches

Runs the kit's reference training (course.instructor.reference, the same model, data and harness the
students' jobs use) with ChainerMN's `naive` communicator under mpiexec: once on 1 rank, then on N
ranks with each rule of --lr-rule (constant, linear, warmup; sqrt and lars on request), for every
seed. More ranks than cores share the cores (right for accuracy, not for speed). Prints one line
per run and a table of the final validation accuracy (mean and range over the seeds) and of the
time to grading.toml's target, and writes every figure to --out. docs/accuracy.md holds the figures
of one run and what they teach.
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

if __package__ in (None, ""):  # run as a script: the kit's checkout is the parent folder
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from course.cluster import mpi  # noqa: E402
from course.contracts import grading_rules, results, stages  # noqa: E402
from course.fileio import atomic_file  # noqa: E402
from course.runtime import data, data_prepare  # noqa: E402

TRAIN_ARGS = "--model vgg --width 16 --batchsize 64 --epoch 3"  # the local site profile's


def run(ranks: int, rule: str, seed: int, train_args: str, dataset: str, workdir: Path) -> dict:
    out = workdir / f"r{ranks}-{rule}-s{seed}"
    command = mpi.on_cores(
        ranks,
        *mpi.naive_training(
            "--dataset",
            dataset,
            *shlex.split(train_args),
            "--lr-rule",
            rule,
            "--seed",
            str(seed),
            "--out",
            str(out),
        ),
    )
    done = subprocess.run(
        command,
        cwd=workdir,
        env=mpi.local_run_environment(**mpi.YIELD_WHEN_IDLE),
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise SystemExit(f"run failed: {shlex.join(command)}\n{done.stderr[-2000:]}")
    record = results.load(out / results.FILENAME)
    curve = [round(entry["validation/main/accuracy"], 4) for entry in record["log"]]
    elapsed = [round(entry["elapsed_time"], 1) for entry in record["log"]]
    return {
        "ranks": ranks,
        "rule": rule if ranks > 1 else "-",
        "seed": seed,
        "accuracy": curve,
        "elapsed": elapsed,
        "final": curve[-1],
        "images_per_sec": record["throughput"]["images_per_sec"],
        "lr": record["lr_schedule"],
        "wall_seconds": record["wall_seconds"],
    }


def _time_to(run: dict, target: float | None) -> str:
    """The elapsed seconds at the first evaluation at or above `target`; "never" when none is."""
    reached = [s for a, s in zip(run["accuracy"], run["elapsed"]) if target and a >= target]
    return f"{reached[0]:.0f}" if reached else "never"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument(
        "--rules", nargs="+", default=list(stages.COMPARED_LR_RULES), choices=stages.LR_RULES
    )
    parser.add_argument(
        "--baseline",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also run 1 rank per seed (seeded: the same curve every time, see docs/accuracy.md)",
    )
    parser.add_argument("--train-args", default=TRAIN_ARGS)
    parser.add_argument(
        "--dataset", default=data.SYNTHETIC, help="a prepared data set (the synthetic one is made)"
    )
    parser.add_argument("--out", type=Path, default=Path("build/accuracy/study.json"))
    args = parser.parse_args(argv)
    if args.dataset == data.SYNTHETIC and not data.path_for(data.SYNTHETIC).exists():
        data_prepare.prepare_synthetic()
    found = []
    with tempfile.TemporaryDirectory(prefix="course-accuracy-") as tmp:
        for seed in args.seeds:
            plan = [(1, "warmup")] * args.baseline + [(args.ranks, rule) for rule in args.rules]
            for ranks, rule in plan:
                found.append(run(ranks, rule, seed, args.train_args, args.dataset, Path(tmp)))
                print(json.dumps(found[-1]), flush=True)
    print(
        f"\nfinal validation accuracy over seeds {args.seeds} ({args.train_args}, {args.dataset}):"
    )
    target = grading_rules.load().accuracy_target(args.dataset)
    for ranks, rule in [(1, "-")] * args.baseline + [(args.ranks, rule) for rule in args.rules]:
        these = [r for r in found if r["ranks"] == ranks and r["rule"] == rule]
        finals = [r["final"] for r in these]
        print(
            f"  {ranks} rank(s), lr rule {rule:<8}  mean {statistics.mean(finals):.3f}  "
            f"range {min(finals):.3f}-{max(finals):.3f}  ({', '.join(f'{f:.3f}' for f in finals)})"
            f"  seconds to {target}: {', '.join(_time_to(r, target) for r in these)}"
        )
    with atomic_file(args.out, "w") as f:
        json.dump(
            {"settings": {k: str(v) for k, v in vars(args).items()}, "runs": found}, f, indent=1
        )
    print(f"figures: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

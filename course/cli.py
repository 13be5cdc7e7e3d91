"""The course kit's command line (`python -m course COMMAND`); `python -m course COMMAND -h` for each."""
from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

from course.errors import CourseError


def _doctor(args: argparse.Namespace) -> int:
    from course import doctor

    return doctor.main()


def _env(args: argparse.Namespace) -> int:
    from course import gpu

    line = gpu.library_path_export()
    if line:
        print(line)
    return 0


def _data(args: argparse.Namespace) -> int:
    from course import data

    if args.action == "list":
        names = data.available()
        if not names:
            print(f"no data sets in {data.data_dir()}; make one with:  python -m course data synthetic")
        for name in names:
            try:
                print(data.info(name).describe())
            except CourseError as e:
                print(f"{name}: BROKEN: {e}")
        return 0
    if args.action == "site":
        from course import paths, sites

        env_file = paths.site_env_file()
        if env_file is None:
            raise CourseError("no jobs/site_env.sh here or in the kit", "run it in the kit's folder")
        name = sites.read_site_env(env_file).get("COURSE_DATASET")
        if not name:
            raise CourseError(f"{env_file} sets no COURSE_DATASET", "python -m course site apply <profile> writes it")
        info = data.prepare(name, args.source)
    elif args.action == "synthetic":
        info = data.prepare_synthetic(args.train, args.test, seed=args.seed, name=args.name)
    elif args.action == "cifar10":
        info = data.prepare_real(args.source)
    else:
        info = data.prepare_variant(args.base, percent=args.percent, size=args.size, seed=args.seed,
                                    name=args.name)
    print(f"ready: {info.describe()}")
    return 0


def _submit(args: argparse.Namespace) -> int:
    from course import jobs

    options = [x for r in args.resources for x in ("-l", r)] + (["-v", args.variables] if args.variables else [])
    job = jobs.submit(args.script, scheduler=args.scheduler, options=options)
    if not args.wait:
        print(f"follow it with: tail -f {job.find_log() or f'<script>.o{job.number}'}")
        return 0
    status = job.wait()
    return 1 if status is None else min(status, 255)


def _report(args: argparse.Namespace) -> int:
    from course import report

    table = report.rows(args.folder)
    if not table:
        raise CourseError(f"no runs in {args.folder / 'runs'}",
                          "give the folder you submit the jobs from (it holds runs/ and the job logs)")
    print(report.table_text(table))
    return 0


def _release(args: argparse.Namespace) -> int:
    from course import release

    return release.main()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="course", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    sub.add_parser("doctor", help="what works on this machine, and how to fix the rest").set_defaults(run=_doctor)
    sub.add_parser("env", help="shell lines that make the gpu extra's CUDA libraries findable "
                               '(eval "$(python -m course env)")').set_defaults(run=_env)

    # Dispatched in main() before parsing: their flags belong to their own parsers.
    sub.add_parser("train", help="the kit's reference CIFAR-10 training (flags: python -m course train -h)")
    sub.add_parser("bench", help="measure the kit: loop overhead, 1 vs 2 MPI ranks, autograde time (-h)")
    sub.add_parser("site", help="site profiles: list, show (what jobs/ has), apply PROFILE")
    sub.add_parser("demo", help="the whole course on this machine: release, a student, the jobs, grading")
    sub.add_parser("grade", help="autograde submissions with nbgrader, feedback and a CSV gradebook (-h)")
    sub.add_parser("launch", help="inside a job: start a command as one MPI rank per slot (-- COMMAND)")

    p = sub.add_parser("submit", help="submit a job script: to qsub, or run it here as PBS would (local profile)")
    p.set_defaults(run=_submit)
    where = p.add_mutually_exclusive_group()
    where.add_argument("--local", dest="scheduler", action="store_const", const="local",
                       help="run it on this machine, whatever the site profile says")
    where.add_argument("--qsub", dest="scheduler", action="store_const", const="qsub", help="hand it to qsub")
    p.set_defaults(scheduler="auto")
    p.add_argument("-l", dest="resources", action="append", default=[], metavar="RESOURCE",
                   help="as qsub -l, e.g. -l select=1:mpiprocs=2")
    p.add_argument("-v", dest="variables", default="", metavar="VAR=VALUE,...", help="as qsub -v")
    p.add_argument("--no-wait", dest="wait", action="store_false", help="return after submitting")
    p.add_argument("script", type=Path)

    p = sub.add_parser("report", help="the table of your runs: images/sec, speedup and efficiency vs stage 1")
    p.set_defaults(run=_report)
    p.add_argument("folder", type=Path, nargs="?", default=Path("."),
                   help="where you submit the jobs from (default: here)")

    sub.add_parser("release", help="make the student release notebooks/ from solutions/ (nbgrader)"
                   ).set_defaults(run=_release)

    p = sub.add_parser("data", help="prepare CIFAR-10, the synthetic set, or a variant")
    p.set_defaults(run=_data)
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    actions.add_parser("list", help="the prepared data sets")
    a = actions.add_parser("site", help="make the data set the applied site profile names (and its base)")
    a.add_argument("--from", dest="source", type=Path, default=None, help="the CIFAR-10 archive, when needed")
    a = actions.add_parser("synthetic", help="generate the learnable synthetic set (no download)")
    a.add_argument("--train", type=int, default=4000)
    a.add_argument("--test", type=int, default=1000)
    a.add_argument("--seed", type=int, default=0)
    a.add_argument("--name", default="synthetic")
    a = actions.add_parser("cifar10", help="convert the official cifar-10-python.tar.gz")
    a.add_argument("--from", dest="source", type=Path, default=None,
                   help="the archive (default: the one in Chainer's data folder or download cache)")
    a = actions.add_parser("variant", help="a class-balanced subset, resized (e.g. 5%% at 256 px)")
    a.add_argument("--base", default="cifar10", help="the data set to derive from")
    a.add_argument("--percent", type=float, default=5.0)
    a.add_argument("--size", type=int, default=256)
    a.add_argument("--seed", type=int, default=0)
    a.add_argument("--name", default=None, help="default: <base>_<size>px_<percent>p")
    return parser


# Commands whose flags belong to their own module's parser: COMMAND -> course.<module>.main(argv).
DELEGATED = {"train": "reference", "bench": "bench", "site": "sites", "demo": "demo", "grade": "grade",
             "launch": "launch"}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] and argv[0] in DELEGATED:
        module = importlib.import_module(f"course.{DELEGATED[argv[0]]}")
        return _guarded(argv[0], lambda: module.main(argv[1:]))
    args = build_parser().parse_args(argv)
    return _guarded(args.command, lambda: args.run(args))


def _guarded(command: str, action) -> int:
    """Run a command, printing a CourseError as its message and fix instead of a traceback."""
    try:
        return action()
    except CourseError as e:
        print(f"course {command}: {e.message}", file=sys.stderr)
        if e.hint:
            print(f"  -> {e.hint}", file=sys.stderr)
        return 2
    except OSError as e:  # a folder that cannot be written, a full disk: the system's words say which
        print(f"course {command}: {e}", file=sys.stderr)
        print("  -> check that path: its permissions, and the free space on its disk", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130

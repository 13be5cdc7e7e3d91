"""`python -m course data ACTION`: prepare a data set, or list the prepared ones."""

from __future__ import annotations

from pathlib import Path

from course.cli import CommandParser
from course.cluster import siteenv
from course.errors import DatasetError
from course.i18n import _
from course.runtime.data import REAL, SYNTHETIC, available, data_dir, info
from course.runtime.data_prepare import (
    SYNTHETIC_TEST,
    SYNTHETIC_TRAIN,
    prepare,
    prepare_real,
    prepare_synthetic,
    prepare_variant,
)


def main(argv: list[str]) -> int:
    """`python -m course data ACTION`: prepare a data set, or list the prepared ones."""
    parser = CommandParser(
        prog="course data",
        description=_(
            "prepare CIFAR-10, the synthetic set, or a variant of either, in Chainer's data folder "
            "($CHAINER_DATASET_ROOT)"
        ),
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    actions.add_parser("list", help=_("the prepared data sets"))
    a = actions.add_parser(
        "site", help=_("make the data set the applied site profile names (and its base)")
    )
    a.add_argument(
        "--from",
        dest="source",
        type=Path,
        default=None,
        help=_("the CIFAR-10 archive, when needed"),
    )
    a = actions.add_parser(
        "synthetic", help=_("generate the learnable synthetic set (no download)")
    )
    a.add_argument("--train", type=int, default=SYNTHETIC_TRAIN)
    a.add_argument("--test", type=int, default=SYNTHETIC_TEST)
    a.add_argument("--seed", type=int, default=0)
    a.add_argument("--name", default=SYNTHETIC)
    a = actions.add_parser("cifar10", help=_("convert the official cifar-10-python.tar.gz"))
    a.add_argument(
        "--from",
        dest="source",
        type=Path,
        default=None,
        help=_("the archive (default: the one in Chainer's data folder or download cache)"),
    )
    a = actions.add_parser(
        "variant",
        # TRANSLATORS: %% is how argparse's help writes one %: keep it doubled
        help=_("a class-balanced subset, resized (e.g. 5%% at 256 px)"),
    )
    a.add_argument("--base", default=REAL, help=_("the data set to derive from"))
    a.add_argument("--percent", type=float, default=5.0)
    a.add_argument("--size", type=int, default=256)
    a.add_argument("--seed", type=int, default=0)
    a.add_argument(
        "--name", default=None, help=_("default: {name}").format(name="<base>_<size>px_<percent>p")
    )
    args = parser.parse_args(argv)
    if args.action == "list":
        names = available()
        if not names:
            print(
                _(
                    "no data sets in {folder}; make one with:  python -m course data synthetic"
                ).format(folder=data_dir())
            )
        for name in names:
            try:
                print(info(name).describe())
            except DatasetError as e:
                # TRANSLATORS: {name} is a data set's name; {error} says what is wrong with it
                print(_("{name}: BROKEN: {error}").format(name=name, error=e))
        return 0
    if args.action == "site":
        env_file = siteenv.locate()
        if env_file is None:
            raise DatasetError(
                _("no jobs/site_env.sh here or in the kit"), _("run it in the kit's folder")
            )
        name = siteenv.SiteSettings.read(env_file).dataset
        if not name:
            raise DatasetError(
                _("{file} sets no COURSE_DATASET").format(file=env_file),
                _("{command} writes it").format(command="python -m course site apply <profile>"),
            )
        found = prepare(name, args.source)
    elif args.action == "synthetic":
        found = prepare_synthetic(args.train, args.test, seed=args.seed, name=args.name)
    elif args.action == "cifar10":
        found = prepare_real(args.source)
    else:
        found = prepare_variant(
            args.base, percent=args.percent, size=args.size, seed=args.seed, name=args.name
        )
    print(_("ready: {data_set}").format(data_set=found.describe()))
    return 0

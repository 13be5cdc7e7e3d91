"""`python -m course i18n`: the translations of the course.

    python -m course i18n update [--lang ja]    re-extract the English, merge into the catalogs
    python -m course i18n status [--lang ja]    entries, translated, fuzzy and empty, per catalog
    python -m course i18n build [--lang ja] [--out build/i18n]
                                                the edition's source notebooks (its own assignment)

`make i18n-update` runs the first. An English text that changed leaves its translation fuzzy:
status lists it, and build refuses until it is checked.
"""

from __future__ import annotations

from pathlib import Path

from course import i18n, paths
from course.instructor import i18n_catalog as cat
from course.instructor import i18n_release


def main(argv: list[str] | None = None) -> int:
    from course.cli import command_parser

    parser = command_parser("course i18n", __doc__)
    parser.add_argument("action", choices=("update", "status", "build"))
    parser.add_argument("--lang", default="ja", help="the catalogs' language (default: ja)")
    parser.add_argument("--out", type=Path, default=None, help="build: where (default build/i18n)")
    args = parser.parse_args(argv or [])
    root = paths.kit_root()
    if args.action == "update":
        for domain, path in cat.update(root, args.lang).items():
            print(f"{domain}: {path.relative_to(root)}  {_counted(cat.read(path))}")
        return 0
    if args.action == "build":
        out = args.out or root / "build" / "i18n"
        for path in i18n_release.build(root, args.lang, out):
            print(f"built {path}")
        return 0
    failed = False
    for domain in (cat.PYTHON_DOMAIN, cat.NOTEBOOK_DOMAIN):
        path = i18n.catalog_path(args.lang, domain, cat.locale_dir(root))
        catalog = cat.read(path)
        print(f"{domain}: {path.relative_to(root)}  {_counted(catalog)}")
        for problem in cat.problems(catalog):
            print(f"  !! {problem}")
            failed = True
    return 1 if failed else 0


def _counted(catalog: cat.Catalog) -> str:
    n = cat.count(catalog)
    return f"{n.entries} entries: {n.translated} translated, {n.fuzzy} fuzzy, {n.empty} empty"

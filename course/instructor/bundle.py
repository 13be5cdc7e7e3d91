"""`python -m course bundle --out DIR` (make student-bundle): the folder to hand out to students.

Hand out this folder (or an archive of it), never the repository: the repository holds solutions/
with every answer and hidden test. DIR holds

  README.md, install.sh      how to start; the student environment (.venv with the course's pins)
  start-jupyterlab.sh        JupyterLab with jupyter/ as its configuration
  jupyter/                   nbgrader's Assignment List and Validate on; Formgrader, Create
                             Assignment and Course List off (and locked)
  nbgrader_config.py         the course id and the exchange (made from the course's
                             nbgrader_config.py)
  pyproject.toml, constraints.txt
  course/                    the kit's package without course/instructor/ (the grader, and the
                             reference training, whose code answers the exercises), with
                             edition_language: the edition's language where COURSE_LANG is unset
  <course id>/distributed_training/
                             the release (notebooks/ with jobs/), where nbgrader's submit
                             looks for it

and no solutions/, hidden tests, grading.toml, instructor configuration or course/instructor/.
Of grading.toml it ships the public part (the figures feedback shows anyway: targets, tiers, the
prediction factor, references) as course/contracts/grading_public.json, which the students' report
and checks read (course.contracts.grading_rules.for_students).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from course import i18n, paths
from course.cli import command_parser
from course.contracts import grading_rules, lessons
from course.errors import CourseError
from course.instructor import bundle_texts, exchange, i18n_release, release

# nbgrader's instructor tools (its installation guide names them); the Assignment List and Validate
# stay.
LAB_EXTENSIONS_OFF = (
    "@jupyter/nbgrader:formgrader",
    "@jupyter/nbgrader:create-assignment",
    "@jupyter/nbgrader:course-list",
)
SERVER_EXTENSIONS_OFF = (
    "nbgrader.server_extensions.formgrader",
    "nbgrader.server_extensions.course_list",
)
KIT_FILES = ("pyproject.toml", "constraints.txt")
# JupyterLab's own language for an edition (its language pack is pinned with the kit): the user
# setting of its translation extension, in the bundle's jupyter/ (JupyterLab's user settings live
# under JUPYTER_CONFIG_DIR, which start-jupyterlab.sh sets).
LAB_LOCALES = {"ja": "ja_JP"}
LAB_LANGUAGE_SETTING = Path(
    "lab", "user-settings", "@jupyterlab", "translation-extension", "plugin.jupyterlab-settings"
)
# Of course/: the instructor's package (the grader, and the reference training `course train`, whose
# code is the stages' answers). Nothing outside it imports it (tests/test_architecture.py).
LEFT_OUT = ("instructor",)
CACHES = shutil.ignore_patterns("__pycache__", "*.pyc")

INSTALL = """#!/usr/bin/env bash
# The student environment: .venv here, with the course's pinned packages (needs Python 3.11).
#   ./install.sh                      # with an MPI for a laptop (the mpi extra)
#   EXTRAS=gpu ./install.sh           # on a cluster's GPU node: the site's MPI, CUDA 12 wheels
set -euo pipefail
cd "$(dirname "$0")"
PYTHON=${{PYTHON:-python3.11}}
EXTRAS=${{EXTRAS-mpi}}
"$PYTHON" -m venv .venv
.venv/bin/pip install -q -c constraints.txt {bootstrap}
# Chainer 7.8.1 builds only with setuptools<70: no build isolation.
.venv/bin/pip install -q -c constraints.txt --no-build-isolation -e ".${{EXTRAS:+[$EXTRAS]}}"
echo "Installed. Start JupyterLab with ./start-jupyterlab.sh"
"""

START = """#!/usr/bin/env bash
# JupyterLab for the course, with jupyter/ as its configuration: no instructor tools.
cd "$(dirname "$0")"
export JUPYTER_CONFIG_DIR="$PWD/jupyter"
# The language of the course's messages (course/i18n.py); the student may set another.
export {variable}=${{{variable}:-{lang}}}
exec .venv/bin/jupyter lab --ServerApp.root_dir="$PWD" "$@"
"""


def student_jupyter_config(folder: Path) -> Path:
    """A Jupyter configuration folder with nbgrader's instructor tools off: the lab extensions
    disabled and locked with `jupyter labextension` (user level), the server extensions off in
    jupyter_server_config.json (`jupyter server extension disable --user` refuses extensions enabled
    at another level)."""
    folder.mkdir(parents=True, exist_ok=True)
    env = {**paths.tool_environment(), "JUPYTER_CONFIG_DIR": str(folder)}
    jupyter = str(Path(sys.executable).parent / "jupyter")
    for action in ("disable", "lock"):
        done = subprocess.run(
            [jupyter, "labextension", action, "--level=user", *LAB_EXTENSIONS_OFF],
            capture_output=True,
            text=True,
            env=env,
        )
        if done.returncode != 0:
            raise CourseError(
                f"jupyter labextension {action} failed: "
                f"{(done.stdout + done.stderr).strip()[-300:]}",
                "check that JupyterLab is installed in this environment (make venv)",
            )
    server = {"ServerApp": {"jpserver_extensions": {name: False for name in SERVER_EXTENSIONS_OFF}}}
    (folder / "jupyter_server_config.json").write_text(json.dumps(server, indent=2) + "\n")
    return folder


def build(
    root: Path, out: Path, exchange_root: Path | None = None, lang: str = i18n.DEFAULT
) -> Path:
    """Make the student bundle of the kit at `root`, in the edition `lang`, in the new folder `out`;
    returns `out`."""
    assignment = i18n_release.assignment(lang)
    released = root / "notebooks" / assignment
    if not released.is_dir():
        raise CourseError(f"no release in {released}", "make release first")
    if release.job_outputs(released):
        raise CourseError(
            f"{released} holds job outputs", "remove them (or make release) before bundling"
        )
    chosen = lessons.load(root).notebooks
    found = tuple(sorted(p.name for p in released.glob("*.ipynb")))
    if found != chosen:
        raise CourseError(
            f"the release in {released} holds {', '.join(found) or 'no notebook'}, and "
            f"{lessons.FILE} chooses {', '.join(chosen)}",
            "make release (it follows course.toml), then make the bundle again",
        )
    if out.exists() and any(out.iterdir()):
        raise CourseError(
            f"{out} exists and is not empty", "give a new folder, or remove that one first"
        )
    course = exchange.settings(root)
    target = exchange.assignment_folder(out, course).with_name(assignment)
    shutil.copytree(released, target, ignore=shutil.ignore_patterns(*course.ignore))
    package = root / "course"
    shutil.copytree(
        package,
        out / "course",
        ignore=lambda folder, names: (
            set(CACHES(folder, names))
            | {
                name
                for name in names
                if (Path(folder) / name).relative_to(package).as_posix() in LEFT_OUT
            }
        ),
    )
    for name in KIT_FILES:
        shutil.copy(root / name, out / name)
    (out / "nbgrader_config.py").write_text(exchange.student_config(course, exchange_root))
    grading_rules.write_public(
        root / grading_rules.FILE, out / "course" / "contracts" / grading_rules.PUBLIC.name
    )
    # the bundle's language wherever COURSE_LANG is unset: a terminal's commands, a PBS job
    (out / "course" / i18n.EDITION_FILE.name).write_text(lang + "\n", encoding="utf-8")
    student_jupyter_config(out / "jupyter")
    if lang in LAB_LOCALES:
        setting = out / "jupyter" / LAB_LANGUAGE_SETTING
        setting.parent.mkdir(parents=True, exist_ok=True)
        setting.write_text(json.dumps({"locale": LAB_LOCALES[lang]}) + "\n")
    bootstrap = subprocess.run(
        [sys.executable, str(root / "tools" / "pins.py"), "bootstrap"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    for name, text in (
        ("install.sh", INSTALL.format(bootstrap=bootstrap)),
        ("start-jupyterlab.sh", START.format(variable=i18n.VARIABLE, lang=lang)),
    ):
        (out / name).write_text(text)
        os.chmod(out / name, 0o755)
    (out / "README.md").write_text(
        i18n.in_language(lang, bundle_texts.README).format(
            course_id=course.course_id,
            assignment=assignment,
            folder=target.parent.relative_to(out),
            exchange=exchange_root or course.root,
        )
    )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = command_parser("course bundle", __doc__)
    parser.add_argument("--out", type=Path, required=True, help="a new folder for the bundle")
    parser.add_argument(
        "--exchange",
        type=Path,
        default=None,
        help="the exchange students use (default: the course's, from nbgrader_config.py)",
    )
    parser.add_argument(
        "--lang",
        choices=i18n.LANGUAGES,
        default=i18n.DEFAULT,
        help="the edition: its notebooks, and the language of the course's messages (COURSE_LANG)",
    )
    args = parser.parse_args(argv)
    root = paths.kit_root()
    exchange_root = args.exchange.resolve() if args.exchange else None
    out = build(root, args.out.resolve(), exchange_root, args.lang)
    files = sum(1 for path in out.rglob("*") if path.is_file())
    print(
        f"student bundle: {out} ({files} files). Hand out this folder, never the repository (it "
        "holds the "
        f"solutions).\nIts exchange: {exchange.settings(out).root} (students can override it with "
        f"{exchange.ENV})"
    )
    chosen = exchange.settings(out).root.resolve()
    if chosen.is_relative_to(root.resolve()):
        print(
            f"Warning: this bundle's exchange, {chosen}, is inside your copy of the kit, where "
            "students on other accounts usually cannot write, so their hand-in would fail. For a "
            "class, make the bundle again with a folder every student can write: make "
            f"student-bundle EXCHANGE=/shared/exchange (or set {exchange.ENV} first)."
        )
    return 0

"""The student bundle (`python -m course bundle`): what students get holds no answer, no hidden test
and no instructor file, and its notebooks run on its own copy of the kit."""

from __future__ import annotations

import ast
import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from course import i18n, paths
from course.instructor import bundle, demo, exchange
from tests.helpers import NOTEBOOKS, ROOT
from tests.solutions import SOLUTIONS as SOURCE

MARKERS = re.compile(r"(BEGIN|END) (SOLUTION|HIDDEN TESTS|ALWAYS HIDDEN TESTS)")


def code_lines(text: str) -> list[str]:
    """The lines that carry code: stripped, no blank or comment-only lines (so indentation and
    comments do not hide a copy)."""
    return [
        line.strip()
        for line in text.splitlines()
        if line.strip() and not line.strip().startswith("#")
    ]


def secret_blocks(notebook: dict) -> list[str]:
    """Each solution and each hidden test of a source notebook, as its code lines joined."""
    blocks = []
    for cell in notebook["cells"]:
        inside: list[str] | None = None
        for line in "".join(cell["source"]).splitlines():
            if re.search(r"BEGIN (SOLUTION|HIDDEN TESTS|ALWAYS HIDDEN TESTS)", line):
                inside = []
            elif (
                re.search(r"END (SOLUTION|HIDDEN TESTS|ALWAYS HIDDEN TESTS)", line)
                and inside is not None
            ):
                if cell["cell_type"] == "code" and code_lines("\n".join(inside)):
                    blocks.append("\n".join(code_lines("\n".join(inside))))
                inside = None
            elif inside is not None:
                inside.append(line)
    return blocks


# A student's environment has the bundle's copy of the kit only: this hides the kit's own editable
# install, which would otherwise answer for anything the bundle leaves out (course.instructor).
HIDE_KIT = """import sys
sys.meta_path[:] = [f for f in sys.meta_path if "__editable__" not in getattr(f, "__module__", "")]
"""


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    return bundle.build(
        ROOT, tmp_path_factory.mktemp("bundle") / "out", tmp_path_factory.mktemp("exchange")
    )


@pytest.fixture(scope="module")
def student_env(made, quick_env, tmp_path_factory) -> dict[str, str]:
    """quick_env with Python importing `course` from the bundle, and from nowhere else."""
    shim = tmp_path_factory.mktemp("student-python")
    (shim / "sitecustomize.py").write_text(HIDE_KIT)
    return {**quick_env, "PYTHONPATH": os.pathsep.join([str(shim), str(made)])}


def texts(folder):
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            try:
                yield path, path.read_text()
            except UnicodeDecodeError:
                yield path, ""


@pytest.mark.integration
def test_the_bundle_holds_no_instructor_file(made):
    for name in (
        "solutions",
        "grading.toml",
        "course/instructor",
        "notebooks",
        "tests",
        "tools",
        "sites",
        ".git",
    ):
        assert not (made / name).exists(), f"the bundle holds {name}"
    config = (made / "nbgrader_config.py").read_text()
    for instructor_only in ("solutions", "Autograde", "nbgrader_hook", "source_directory"):
        assert instructor_only not in config


@pytest.mark.integration
def test_the_bundle_holds_no_solution_or_hidden_test(made):
    everything = {path: text for path, text in texts(made)}
    for path, text in everything.items():
        assert not MARKERS.search(text), f"{path.relative_to(made)} holds an nbgrader marker"
    code = {path: "\n" + "\n".join(code_lines(text)) + "\n" for path, text in everything.items()}
    for name in NOTEBOOKS:
        blocks = secret_blocks(json.loads((SOURCE / name).read_text()))
        assert len(blocks) >= 4, "the source should have solutions and hidden tests"
        for path, text in code.items():
            shown = [block for block in blocks if f"\n{block}\n" in text]
            assert not shown, (
                f"{path.relative_to(made)} holds a solution or hidden test of {name}: {shown[0]!r}"
            )


@pytest.mark.integration
def test_the_release_sits_where_nbgrader_submit_looks_for_it(made):
    course = exchange.settings(made)
    assert course.course_id == exchange.settings(ROOT).course_id and course.path_includes_course
    folder = exchange.assignment_folder(made, course)
    assert sorted(p.name for p in folder.glob("*.ipynb")) == NOTEBOOKS
    assert (folder / "jobs" / "site_env.sh").is_file()


@pytest.mark.integration
def test_the_student_jupyterlab_has_no_instructor_tools(made):
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(made / "jupyter")}
    jupyter = [sys.executable, "-m", "jupyter"]
    lab = subprocess.run(
        [*jupyter, "labextension", "list"], env=env, capture_output=True, text=True, check=True
    )
    disabled = (lab.stdout + lab.stderr).split("Disabled extensions:")[-1]
    for name in bundle.LAB_EXTENSIONS_OFF:
        assert name in disabled
    assert "assignment-list" not in disabled and "validate-assignment" not in disabled
    page = json.loads((made / "jupyter" / "labconfig" / "page_config.json").read_text())
    assert set(page["lockedExtensions"]) == set(bundle.LAB_EXTENSIONS_OFF), (
        "students cannot turn them back on"
    )
    server = subprocess.run(
        [*jupyter, "server", "extension", "list"], env=env, capture_output=True, text=True
    )
    said = re.sub(r"\x1b\[[0-9;]*m", "", server.stdout + server.stderr)
    for name in bundle.SERVER_EXTENSIONS_OFF:
        assert f"{name} disabled" in said


def run_python(code: str, env: dict[str, str], cwd) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=cwd, capture_output=True, text=True
    )


@pytest.mark.integration
def test_every_module_of_the_bundles_kit_imports_without_the_grader(made, student_env, tmp_path):
    done = run_python(
        "import importlib, pkgutil, course\n"
        "assert not importlib.util.find_spec('course.instructor'), 'the grader is importable'\n"
        "for m in pkgutil.walk_packages(course.__path__, 'course.'):\n"
        "    if not m.name.endswith('__main__'):\n"
        "        importlib.import_module(m.name)\n"
        "print(course.__file__)",
        student_env,
        tmp_path,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == str(made / "course" / "__init__.py")


@pytest.mark.integration
def test_the_report_works_in_the_bundle_without_grading_toml(made, student_env, tmp_path):
    folder = exchange.assignment_folder(made, exchange.settings(made))
    done = run_python(
        "from course.notebook import report\nprint(report.rows())", student_env, folder
    )
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stderr[-2000:]


@pytest.mark.integration
def test_a_notebook_of_the_bundle_runs_its_first_cells_on_the_bundles_kit(made, student_env):
    from nbclient import NotebookClient

    folder = exchange.assignment_folder(made, exchange.settings(made))
    notebook = nbformat.read(folder / "01_single_gpu.ipynb", as_version=4)
    first_check = next(
        i
        for i, cell in enumerate(notebook.cells)
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "check_iterators"
    )
    notebook.cells = notebook.cells[: first_check + 1] + [
        nbformat.v4.new_code_cell("print(course.__file__)")
    ]
    client = NotebookClient(
        notebook,
        timeout=300,
        allow_errors=True,
        kernel_name="python3",
        resources={"metadata": {"path": str(folder)}},
    )
    client.execute(env=student_env)
    by_id = {cell.metadata.get("nbgrader", {}).get("grade_id"): cell for cell in notebook.cells}
    errors = [o for o in by_id["setup"].outputs if o.output_type == "error"]
    assert not errors, errors
    check = [o for o in by_id["check_iterators"].outputs if o.output_type == "error"]
    assert check and check[0].ename == "NotImplementedError", "the stub is what stops the check"
    printed = "".join(o.get("text", "") for o in notebook.cells[-1].outputs)
    assert printed.strip() == str(made / "course" / "__init__.py")


def test_bundle_refuses_a_folder_that_is_not_empty(tmp_path):
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "file").write_text("x")
    with pytest.raises(Exception, match="not empty"):
        bundle.build(ROOT, tmp_path / "old")
    assert paths.ASSIGNMENT not in {p.name for p in (tmp_path / "old").iterdir()}


@pytest.mark.integration
def test_the_bundle_ships_the_public_grading_rules_that_its_report_and_checks_read(
    made, student_env, tmp_path
):
    import tomllib

    from course.contracts import grading_rules

    shipped = json.loads((made / "course" / "contracts" / grading_rules.PUBLIC.name).read_text())
    instructors = tomllib.loads((ROOT / grading_rules.FILE).read_text())
    assert shipped == {k: v for k, v in instructors.items() if k not in grading_rules.PRIVATE}
    folder = exchange.assignment_folder(made, exchange.settings(made))
    done = run_python(
        "from course.contracts import grading_rules\n"
        "from course.notebook.checks import allreduce\n"
        "rules = grading_rules.for_students()\n"
        "print(rules.accuracy_target('synthetic'), rules.prediction_factor)\n"
        "print(allreduce.prediction_verdict(0.21))\n"
        "print(allreduce.prediction_verdict(0.74))",
        student_env,
        folder,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    rules = grading_rules.GradingRules(instructors)
    assert lines[0] == f"{rules.accuracy_target('synthetic')} {rules.prediction_factor}"
    assert lines[1].startswith("NOT YET: the prediction is more than 4x away")
    assert lines[2].startswith("PASS: the prediction is within 4x")


def test_the_public_grading_rules_leave_the_instructors_accounting_out(tmp_path):
    from course.contracts import grading_rules

    source = tmp_path / "grading.toml"
    source.write_text(
        "[accounting]\nusers = { ada = 'u123' }\n[allreduce]\nprediction_factor = 3.0\n"
    )
    written = grading_rules.write_public(source, tmp_path / "public.json")
    assert json.loads(written.read_text()) == {"allreduce": {"prediction_factor": 3.0}}


# What a student can see: the bundle's own text files, its notebooks' cells, its job scripts and the
# messages (string constants, docstrings left out) of its copy of the kit.
def student_visible_text(made):
    import ast

    for path in sorted(made.glob("*")):
        if path.is_file() and path.suffix in (".md", ".sh", ".py"):
            yield path.name, path.read_text()
    for path in sorted(made.glob(f"*/{paths.ASSIGNMENT}/**/*")):
        if path.suffix == ".ipynb":
            for i, cell in enumerate(json.loads(path.read_text())["cells"]):
                yield f"{path.name} cell {i}", "".join(cell["source"])
        elif path.suffix == ".sh":
            yield path.name, path.read_text()
    for path in sorted((made / "course").rglob("*.py")):
        tree = ast.parse(path.read_text())
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and node.body
            and isinstance(node.body[0], ast.Expr)
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                if id(node) not in docstrings:
                    yield f"{path.relative_to(made)}:{node.lineno}", node.value


PATH = re.compile(
    r"(?<![\w/.<>$*-])((?:[\w.*<>-]+/)*[\w*<>-][\w.*<>-]*\.(?:md|sh|toml|ipynb|txt|yml|json|py))"
    r"(?![\w/])"
)
# Files the kit writes while it runs (the stages' scripts, a run's files, scratch scripts), and
# references that are the grader's or the instructor's own words, each with where it may appear.
WRITTEN_AT_RUN_TIME = {
    "results.json",
    "spec.json",
    "status.json",
    "resume.json",
    "submitted-jobs.json",  # course submit's record of a student's jobs, for the site's budget
    "large_batch_prediction.json",  # notebook 05's record of the prediction before the table
    "stage3_functions.py",  # the stage-3 checks' scratch module
    "train.py",  # course launch's example command
}
NOT_FOR_STUDENTS = {
    # shown by `python -m course -h` only where course/instructor/ (the kit checkout) is there
    ("course/cli.py", "tools/bench.py"),
    ("course/cli.py", "tools/pins.py"),
    ("course/cli.py", "make bench"),
    # the grader's notes in feedback name the instructor's file
    ("course/cluster/accounting.py", "grading.toml"),
    ("course/contracts/grading_rules.py", "grading.toml"),
    # the instructor's choice of lessons (course.contracts.lessons), which the bundle follows
    ("course/contracts/lessons.py", "course.toml"),
    # site profiles are the instructor's (`course site apply`)
    ("course/cluster/profile_schema.py", "sites/local.toml"),
    ("course/contracts/benchmark.py", "-*/*.json"),  # a glob, not a file
    ("course/contracts/model_parallel.py", "-*/*.json"),  # a glob, not a file
}


@pytest.mark.integration
def test_every_file_and_make_target_a_student_can_see_is_in_the_bundle(made):
    from course.contracts import stages

    files = [p.relative_to(made).as_posix() for p in made.rglob("*") if p.is_file()]
    written = WRITTEN_AT_RUN_TIME | {stage.script for stage in stages.STAGES.values()}
    targets = re.findall(r"^([a-z][\w-]*):", (ROOT / "Makefile").read_text(), re.MULTILINE)
    make = re.compile(rf"\bmake ({'|'.join(map(re.escape, targets))})\b")

    def there(token: str) -> bool:
        pattern = re.sub(r"<[^>]*>", "*", token.removeprefix("./"))
        return Path(pattern).name in written or any(
            fnmatch.fnmatch(f, pattern) or fnmatch.fnmatch(f, f"*/{pattern}") for f in files
        )

    missing = []
    for where, text in student_visible_text(made):
        module = where.split(":")[0]
        found = [m.group(0) for m in make.finditer(text)]
        found += [m.group(1) for m in PATH.finditer(text) if not there(m.group(1))]
        missing += [f"{where}: {name}" for name in found if (module, name) not in NOT_FOR_STUDENTS]
    # docstrings (a student reads them with help()): no pointer to the checkout's docs or tools
    for path in sorted((made / "course").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            text = ast.get_docstring(node) if isinstance(node, DOCUMENTED) else None
            missing += [
                f"{path.relative_to(made)}:{getattr(node, 'lineno', 1)}: {m.group(1)}"
                for m in PATH.finditer(text or "")
                if m.group(1).startswith(("docs/", "tools/")) and not there(m.group(1))
            ]
    assert not missing, "the bundle lacks what these name:\n" + "\n".join(missing)


DOCUMENTED = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)


@pytest.mark.integration
def test_the_japanese_bundle_holds_the_japanese_edition_and_speaks_japanese(tmp_path):
    out = bundle.build(ROOT, tmp_path / "演習 1", tmp_path / "exchange", lang="ja")
    course = exchange.settings(out)
    folder = exchange.assignment_folder(out, course).with_name("distributed_training_ja")
    assert not exchange.assignment_folder(out, course).exists()
    notebook = json.loads((folder / "01_single_gpu.ipynb").read_text(encoding="utf-8"))
    assert "ステージ 1" in "".join(notebook["cells"][0]["source"])
    assert (folder / "jobs").is_dir() and "ノートブック" in (folder / "README.md").read_text()
    readme = (out / "README.md").read_text(encoding="utf-8")
    assert "担当教員" in readme and "`distributed_training_ja`" in readme, readme[:300]
    lab = json.loads((out / "jupyter" / bundle.LAB_LANGUAGE_SETTING).read_text())
    assert lab == {"locale": "ja_JP"}  # JupyterLab's own menus, through its pinned language pack
    start = (out / "start-jupyterlab.sh").read_text()
    assert "export COURSE_LANG=${COURSE_LANG:-ja}" in start
    said = subprocess.run(
        [
            "bash",
            "-c",
            'source <(grep "^export COURSE_LANG" start-jupyterlab.sh); echo $COURSE_LANG',
        ],
        cwd=out,
        capture_output=True,
        text=True,
        env={"PATH": os.environ["PATH"]},
        check=True,
    )
    assert said.stdout.strip() == "ja"


@pytest.mark.integration
def test_the_japanese_bundles_terminal_speaks_japanese_and_hands_in_its_edition(
    quick_env, tmp_path
):
    """`.venv/bin/python -m course handin` as the Japanese bundle's README says, in a terminal
    that sets no COURSE_LANG: Japanese, and `distributed_training_ja` handed in."""
    ex = tmp_path / "exchange"
    out = bundle.build(ROOT, tmp_path / "bundle", ex, lang="ja")
    assert (out / "course" / i18n.EDITION_FILE.name).read_text() == "ja\n"
    assert not i18n.EDITION_FILE.exists()  # the kit itself has no edition: English by default
    edition = i18n.assignment("ja")
    course = demo.course_folder(ROOT, tmp_path / "course")
    shutil.copytree(ROOT / "notebooks" / edition, course / "notebooks" / edition)
    exchange.run("release_assignment", [edition], course, ex)
    shim = tmp_path / "student-python"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text(HIDE_KIT)
    env = {k: v for k, v in quick_env.items() if k != i18n.VARIABLE}
    env["PYTHONPATH"] = os.pathsep.join([str(shim), str(out)])
    said = run_python("from course import i18n; print(i18n.language())", env, out)
    assert said.stdout.strip() == "ja", said.stderr[-2000:]
    done = subprocess.run(
        [sys.executable, "-m", "course", "handin", "--student=ada", f"--Exchange.cache={tmp_path}"],
        cwd=out,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    handed_in = i18n.in_language(
        "ja", "Handed in: {assignment} is in the exchange, as the line above says."
    )
    assert handed_in.format(assignment=edition) in done.stdout, done.stdout
    assert list((ex / exchange.settings(out).course_id / "inbound").glob(f"ada+{edition}+*"))

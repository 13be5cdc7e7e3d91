"""The package's shape (docs/architecture.md): modules of one job, imports that point one way.

Read from the source with `ast`, so that function-level imports count as much as top-level ones.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.helpers import ROOT

PACKAGE = ROOT / "course"
MAX_LINES = 400
# What the students' copy of the kit leaves out (course/instructor/bundle.py): nothing a student
# runs may import it.
INSTRUCTOR = "course.instructor"


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _imports(path: Path, name: str, known: set[str]) -> set[str]:
    """The kit's modules that `name` imports, at any depth of its code."""
    found: set[str] = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            targets = [f"{base}.{alias.name}" for alias in node.names] + [base]
        else:
            continue
        for target in targets:
            # `from course import gpu` imports the module course.gpu; `from course.x import f`,
            # course.x.
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name and target != "course":
                found.add(target)
    return found


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    return {name: _imports(path, name, known) for name, path in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of more than one module (Tarjan), as sorted names."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                group.append(top)
                if top == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_module_of_the_kit_is_over_400_lines():
    long = {
        name: n
        for name, path in _modules().items()
        if (n := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert not long, f"split these along their seams: {long}"


def test_the_kits_modules_import_each_other_without_cycles():
    assert cycles(import_graph()) == []


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_nothing_outside_the_instructor_package_imports_it():
    graph = import_graph()
    wrong = {
        name: sorted(t for t in targets if t == INSTRUCTOR or t.startswith(INSTRUCTOR + "."))
        for name, targets in graph.items()
        if not (name == INSTRUCTOR or name.startswith(INSTRUCTOR + "."))
    }
    wrong = {name: targets for name, targets in wrong.items() if targets}
    assert not wrong, f"the students' copy has no course/instructor/: {wrong}"


# The lessons' folders (docs/architecture.md): a lesson's exercises, arithmetic and reports live in
# course/lessons/<lesson>/; the engine they run on knows no lesson.
LESSONS = "course.lessons"
ENGINE = ("course.runtime", "course.cluster", "course.contracts", "course.diagnostics")
MAX_FLAT = 12  # modules at the top of course/, __init__ and __main__ included


def test_the_engine_imports_no_lesson():
    graph = import_graph()
    wrong = {
        name: sorted(t for t in targets if t.startswith(LESSONS + "."))
        for name, targets in graph.items()
        if name.startswith(ENGINE)
    }
    assert not {name: targets for name, targets in wrong.items() if targets}


def test_at_most_twelve_modules_stand_at_the_top_of_the_package():
    flat = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(flat) <= MAX_FLAT, flat


def test_a_lesson_imports_only_the_core_and_the_lessons_it_needs():
    """A lesson's folder is the registry's lesson (course.contracts.lessons): it may use the core's
    code and that of the lessons the registry says it needs, so that a choice the registry accepts
    never lacks code a chosen lesson runs."""
    from course.contracts import lessons

    assert {
        p.name for p in (PACKAGE / "lessons").iterdir() if p.is_dir() and p.name != "__pycache__"
    } == set(lessons.LESSONS)
    wrong = []
    for name, targets in import_graph().items():
        if not name.startswith(LESSONS + "."):
            continue
        lesson = name.split(".")[2]
        allowed = {lesson, lessons.CORE, *lessons.LESSONS[lesson].needs}
        wrong += [
            (name, target)
            for target in targets
            if target.startswith(LESSONS + ".") and target.split(".")[2] not in allowed
        ]
    assert not wrong

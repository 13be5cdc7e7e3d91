"""What the verifier tells the instructor about a student's function, read from its syntax alone
(nothing of it runs): every write to an object the function did not create, the reflective ways
to reach one (dunder attributes, attributes named by built strings, module loaders, frames,
closure cells), and names no solution needs. Each flag names its line in the cell.

A test's child runs the student's functions beside the kit's observers (course.instructor.
verify_test): the child's answers are sealed against patches, but what an observer computes there
is not, so a patch of the kit's or the standard library's objects is named here for a person to
read. A flag is not a penalty; the solutions raise none (tests/test_verify.py).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

IMPORTED_KIT = "import course"  # how an import of the kit from a def is named (see _names)
# Names a solution never needs, wherever they appear.
SUSPICIOUS = {
    "get_ipython",
    "sys",
    "gc",
    "inspect",
    "ctypes",
    "builtins",
    "__builtins__",
    "importlib",
    "runpy",
    "run_path",
    "__file__",
    "os",
    "subprocess",
    "signal",
    "socket",
    "setattr",
    "delattr",
    "globals",
    "locals",
    "vars",
    "exec",
    "eval",
    "compile",
    "__import__",
    "open",
    "_getframe",
    "modules",
    # what re-running the kit's code from its source, or reaching a running frame, takes
    "loader",
    "get_code",
    "get_source",
    "get_data",
    "exec_module",
    "load_module",
    "module_from_spec",
    "spec_from_file_location",
    "spec_from_loader",
    "find_spec",
    "SourceFileLoader",
    "FunctionType",
    "CodeType",
    "MethodType",
    "ModuleType",
    "cell_contents",
    "f_locals",
    "f_globals",
    "f_back",
    "f_trace",
    "settrace",
    "setprofile",
    "tb_frame",
    "gi_frame",
    "attrgetter",
    "methodcaller",
    "copyreg",
    # the grader's own package, the kit's references, and what forging a test's answer takes
    "instructor",
    "mn_reference",
    "pathlib",
    "json",
    "pickle",
    "marshal",
    "threading",
    "atexit",
    "weakref",
    # what reading the student's own runs takes (a prediction needs only its arguments); the
    # notebooks' global `course` is theirs to use, an import of the kit inside a def is not
    IMPORTED_KIT,
    "evidence",
    "runs",
    "glob",
    "iglob",
    "rglob",
    "listdir",
    "scandir",
    "iterdir",
    "walk",
    "getcwd",
    "cwd",
    "chdir",
    "home",
    "expanduser",
    "read_text",
    "read_bytes",
    "load",
    "loadtxt",
    "genfromtxt",
    "fromfile",
    "io",
    "shutil",
}
# Dunder attributes a solution may read: every other one is a way into an object's machinery.
PLAIN_DUNDERS = {"__name__", "__doc__", "__init__"}
# Builtins that hand back an existing object (its type, an attribute, a namespace), not a new one.
REACHING = {"getattr", "type", "vars", "globals", "locals", "__import__", "super", "id"}
# Methods that change the object they are called on: flagged on an object the function was not given
# and did not create (a module's dict or list, a class's registry).
MUTATORS = {
    "update",
    "setdefault",
    "append",
    "extend",
    "insert",
    "pop",
    "popitem",
    "clear",
    "remove",
    "discard",
    "add",
    "sort",
    "reverse",
    "__setitem__",
    "__delitem__",
}


def flags(function: ast.FunctionDef, submitted: set[str]) -> list[tuple[int, str]]:
    """(line, what) for each thing of `function` the instructor should read. `submitted` holds the
    names the submission defines itself (its functions): a private helper of the student's is
    theirs to call."""
    own, given = _bound(function)
    found: list[tuple[int, str]] = []
    for node in ast.walk(function):
        for target in _written(node):
            root = _root(target)
            if root is None or root not in own:
                whose = "an object it was given" if root in given else "an object it did not create"
                found.append((target.lineno, f"writes to {ast.unparse(target)}, {whose}"))
        if isinstance(node, ast.Call):
            found += _call_flags(node, own | given)
        if (
            isinstance(node, ast.Attribute)
            and _dunder(node.attr)
            and node.attr not in PLAIN_DUNDERS
        ):
            found.append((node.lineno, f"reaches {node.attr}"))
    names: dict[str, int] = {}
    for line, name in _names(function):
        if name in SUSPICIOUS or (_private(name) and name not in submitted | own | given):
            names.setdefault(name, line)
    found += [(line, f"uses {name}") for name, line in names.items()]
    return sorted(set(found))


def _call_flags(call: ast.Call, mine: set[str]) -> list[tuple[int, str]]:
    func, line = call.func, call.lineno
    found = []
    if isinstance(func, ast.Name) and func.id in ("getattr", "hasattr") and len(call.args) > 1:
        name = call.args[1]
        if not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
            found.append((line, f"{func.id} with an attribute name built at run time"))
        elif _dunder(name.value) and name.value not in PLAIN_DUNDERS:
            found.append((line, f"reaches {name.value}"))
    if isinstance(func, ast.Name) and func.id == "type" and len(call.args) == 3:
        found.append((line, "builds a class with type()"))
    if isinstance(func, ast.Call) and isinstance(func.func, ast.Name) and func.func.id == "type":
        found.append((line, "makes an object from another object's type"))
    if isinstance(func, ast.Attribute) and func.attr in MUTATORS:
        root = _root(func.value)
        if root is None or root not in mine:
            found.append((line, f"changes {ast.unparse(func.value)} with {func.attr}()"))
    return found


def _written(node: ast.AST) -> Iterator[ast.Attribute | ast.Subscript]:
    """The attributes and items `node` assigns or deletes (in tuples of targets too)."""
    targets: list[ast.expr] = []
    if isinstance(node, ast.Assign):
        targets = list(node.targets)  # a copy: the tree is written out as the code graded
    elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
        targets = [node.target]
    elif isinstance(node, ast.Delete):
        targets = list(node.targets)
    elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
        targets = [node.target]
    elif isinstance(node, (ast.With, ast.AsyncWith)):
        targets = [item.optional_vars for item in node.items if item.optional_vars is not None]
    while targets:
        target = targets.pop()
        if isinstance(target, (ast.Tuple, ast.List)):
            targets += target.elts
        elif isinstance(target, ast.Starred):
            targets.append(target.value)
        elif isinstance(target, (ast.Attribute, ast.Subscript)):
            yield target


def _root(node: ast.expr) -> str | None:
    """The local name an attribute or item chain starts from; None when it starts from anything
    else (a call's result, a literal)."""
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _bound(function: ast.FunctionDef) -> tuple[set[str], set[str]]:
    """(names bound only to objects the function made: literals, calls of what is not a reaching
    builtin, its own defs; the function's parameters)."""
    given = {
        arg.arg
        for args in [function.args]
        + [
            n.args
            for n in ast.walk(function)
            if n is not function and isinstance(n, (ast.FunctionDef, ast.Lambda))
        ]
        for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
        if arg is not None
    }
    made: set[str] = set()
    aliases: set[str] = set(given)
    for node in ast.walk(function):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and (
            node is not function
        ):
            made.add(node.name)
        elif isinstance(node, (ast.Global, ast.Nonlocal, ast.Import, ast.ImportFrom)):
            aliases |= (
                set(node.names)
                if isinstance(node, (ast.Global, ast.Nonlocal))
                else {(a.asname or a.name).split(".")[0] for a in node.names}
            )
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.NamedExpr)) and node.value:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    (made if _makes(node.value) else aliases).add(target.id)
                elif isinstance(target, (ast.Tuple, ast.List, ast.Starred)):
                    # unpacked: each name may be any object the value held
                    aliases |= {
                        n.id
                        for n in ast.walk(target)
                        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
                    }
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension, ast.With, ast.AsyncWith)):
            targets = (
                [item.optional_vars for item in node.items if item.optional_vars is not None]
                if isinstance(node, (ast.With, ast.AsyncWith))
                else [node.target]
            )
            aliases |= {
                n.id
                for t in targets
                for n in ast.walk(t)
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
            }
    return made - aliases, given


def _makes(value: ast.expr) -> bool:
    """Whether `value` is a new object: a literal or display, a comprehension, arithmetic, or a call
    of something other than a builtin that hands back an existing object."""
    if isinstance(value, ast.IfExp):
        return _makes(value.body) and _makes(value.orelse)
    if isinstance(value, ast.Call):
        func = value.func
        return not (isinstance(func, ast.Name) and func.id in REACHING) and not isinstance(
            func, ast.Call
        )
    return isinstance(
        value,
        (
            ast.Constant,
            ast.Dict,
            ast.List,
            ast.Set,
            ast.Tuple,
            ast.DictComp,
            ast.ListComp,
            ast.SetComp,
            ast.GeneratorExp,
            ast.JoinedStr,
            ast.BinOp,
            ast.UnaryOp,
            ast.Compare,
            ast.Lambda,
        ),
    )


def _names(node: ast.AST) -> Iterator[tuple[int, str]]:
    """(line, name) of every name, attribute and imported module `node` uses."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            yield sub.lineno, sub.id
        elif isinstance(sub, ast.Attribute):
            yield sub.lineno, sub.attr
        elif isinstance(sub, (ast.Import, ast.ImportFrom)):
            for alias in sub.names:
                for part in alias.name.split("."):
                    yield sub.lineno, part
            modules = [alias.name for alias in sub.names] if isinstance(sub, ast.Import) else []
            if isinstance(sub, ast.ImportFrom) and sub.module:
                for part in sub.module.split("."):
                    yield sub.lineno, part
                modules = [sub.module] if sub.level == 0 else []
            for module in modules:
                yield sub.lineno, "import " + module.split(".")[0]


def _dunder(name: str) -> bool:
    return len(name) > 4 and name[:2] == name[-2:] == "__"


def _private(name: str) -> bool:
    """A private name (one leading underscore) of the kit or its libraries."""
    return name[:1] == "_" and name[:2] != "__" and name != "_"

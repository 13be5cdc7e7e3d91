"""What the verifier flags for the instructor from a student's source alone (course.instructor.
verify_flags): every write to an object the function did not create and every reflective way to
one, with its line; a private helper of the student's own is not a flag (issue 44)."""

from __future__ import annotations

import pytest

from course.instructor import verify_functions


def flagged(source: str) -> str:
    """The verifier's notes on a one-cell submission, as one text."""
    _, notes = verify_functions.functions({"cell": source})
    return " / ".join(notes)


def test_a_private_helper_the_student_defines_and_calls_is_not_a_flag():
    """Issue 44: `_ring_seconds` written for notebook 04 drew a flag."""
    source = (
        "def _ring_seconds(n_ranks, nbytes, alpha, beta):\n"
        "    _steps = 2 * (n_ranks - 1)\n"
        "    return _steps * (alpha + nbytes / n_ranks * beta)\n\n\n"
        "def ring_crossover_bytes(n_ranks, alpha, beta):\n"
        "    table = {}\n"
        "    table['ring'] = _ring_seconds(n_ranks, 1.0, alpha, beta)\n"
        "    return table\n"
    )
    assert flagged(source) == ""


# (the student's def, the flag's words with its line): each a red-team route of issue 44 or one
# of the ways around the names flagged before it.
WRITES = [
    (
        # the test child's encoder class patched (issue 44, case c)
        "def make_iterators(train, test, batchsize):\n"
        "    import json\n"
        "    json.JSONEncoder.encode = lambda self, o: '{}'\n"
        "    return train, test\n",
        "line 3: writes to json.JSONEncoder.encode, an object it did not create",
    ),
    (
        # the closure cell of the child's bound json.dumps (issue 44, case c)
        "def make_iterators(train, test, batchsize):\n"
        "    for cell in answer.__closure__:\n"
        "        cell.cell_contents = print\n"
        "    return train, test\n",
        "line 3: writes to cell.cell_contents, an object it did not create",
    ),
    (
        "def make_iterators(train, test, batchsize):\n"
        "    closure = answer.__closure__\n"
        "    return train, test\n",
        "line 2: reaches __closure__",
    ),
    (
        # a kit module through an alias, an item of a module's dict, a class reached by type()
        "def step_shares(a, b):\n"
        "    kit = course.lessons.step_time.scalingmodel\n"
        "    kit.step_shares = None\n"
        "    return a\n",
        "line 3: writes to kit.step_shares, an object it did not create",
    ),
    (
        "def step_shares(a, b):\n    course.contracts.stages.SETTINGS['x'] = 1\n    return a\n",
        "line 2: writes to course.contracts.stages.SETTINGS['x'], an object it did not create",
    ),
    (
        "def step_shares(a, b):\n    type(a).real = 3\n    return a\n",
        "line 2: writes to type(a).real, an object it did not create",
    ),
    (
        "def step_shares(a, b):\n    a.extra = 1\n    return a\n",
        "line 2: writes to a.extra, an object it was given",
    ),
    (
        "def step_shares(a, b):\n    course.notebook.checks.REGISTRY.update(x=1)\n    return a\n",
        "line 2: changes course.notebook.checks.REGISTRY with update()",
    ),
    (
        "def step_shares(a, b):\n    del course.lessons.step_time.scalingmodel.run_plan\n    "
        "return a\n",
        "line 2: writes to course.lessons.step_time.scalingmodel.run_plan, an object it did not "
        "create",
    ),
    (
        # the kit's closed model re-run from its source through its module's loader (case a)
        "def step_shares(a, b):\n"
        "    m = course.lessons.step_time.scalingmodel\n"
        "    code = getattr(m, '__sp' + 'ec__').loader.get_code(m.__name__)\n"
        "    space = {}\n"
        "    type(step_shares)(code, space)()\n"
        "    return space['step_shares'](a, b)\n",
        "line 3: getattr with an attribute name built at run time; line 3: uses get_code; "
        "line 3: uses loader; line 5: makes an object from another object's type",
    ),
    (
        "def step_shares(a, b):\n    return "
        "course.lessons.step_time.scalingmodel.__dict__['step_shares'](a, b)\n",
        "line 2: reaches __dict__",
    ),
    (
        "def step_shares(a, b):\n    f = course.lessons.step_time.scalingmodel.step_shares\n"
        "    f.__code__ = (lambda a, b: 1).__code__\n    return a\n",
        "line 3: reaches __code__; line 3: writes to f.__code__, an object it did not create",
    ),
    (
        "def step_shares(a, b):\n    return getattr(course, 'scalingmodel')._private(a)\n",
        "line 2: uses _private",
    ),
    (
        "def step_shares(a, b):\n    Patched = type('Patched', (dict,), {})\n    return a\n",
        "line 2: builds a class with type()",
    ),
]


@pytest.mark.parametrize("source,words", WRITES)
def test_a_write_to_what_the_function_did_not_create_is_flagged_with_its_line(source, words):
    said = flagged(source)
    assert "does what the exercise never needs" in said and words in said, said
    assert said.endswith(": read it")


def test_what_the_function_made_itself_is_its_own_to_change():
    source = (
        "def build_trainer(args, comm, model):\n"
        "    class Meter:\n"
        "        pass\n"
        "    Meter.count = 0\n"
        "    seen = [] if args else list()\n"
        "    seen.append(1)\n"
        "    shares = {'a': 1}\n"
        "    shares['b'] = 2\n"
        "    sorted_ranks = list(range(4))\n"
        "    sorted_ranks.sort()\n"
        "    trainer = chainer.training.Trainer(None, (1, 'epoch'))\n"
        "    trainer.stop_trigger = None\n"
        "    return trainer, model.__name__\n"
    )
    assert flagged(source) == ""


def test_a_local_that_may_hold_another_object_is_not_the_function_s_own():
    source = (
        "def build_trainer(args, comm, model):\n"
        "    shares = {}\n"
        "    shares = course.contracts.stages.SETTINGS\n"
        "    shares['x'] = 1\n"
        "    first, second = course.lessons.step_time.scalingmodel, 1\n"
        "    first.run_plan = None\n"
        "    return shares\n"
    )
    said = flagged(source)
    assert "line 4: writes to shares['x']" in said and "line 6: writes to first.run_plan" in said


@pytest.mark.parametrize("source", [source for source, _words in WRITES])
def test_the_code_graded_is_the_code_flagged(source):
    """Reading the flags leaves the syntax tree as it was: the def graded is the one handed in."""
    import ast

    code, _notes = verify_functions.functions({"cell": source})
    assert code == ast.unparse(ast.parse(source)) + "\n"

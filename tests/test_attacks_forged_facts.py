"""Issue 44's forgeries of the facts from the student's side of the test's child, each planted in a
copy of the solved notebooks and graded by the real verifier (in its sandbox where it can start):

(a) the kit's closed models re-run from their source through their module's loader, for the formula
    tests of notebooks 03-05, with no formula written;
(b) rank 0 of the stage-3 probe patching json's encoder class to change the facts it reports;
(c) the test child's json encoder class, or the closure cell of its json.dumps, patched so that a
    wrong make_iterators / make_train_iterators reports the facts of a right one.

The facts leave the child and the probe through C encoders made before any student code runs
(course.notebook.checks.sealed_json), which none of these patches reaches; every one of them is
flagged with its line for the instructor (course.instructor.verify_flags).
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import nbformat
import pytest

from course.instructor import sandbox, verify, verify_plan
from course.instructor.verify_protocol import Verdict
from tests.helpers import bubblewrap
from tests.solutions import SOLUTIONS, solution_functions

pytestmark = pytest.mark.integration


@pytest.fixture(autouse=True)
def _sandbox(monkeypatch):
    monkeypatch.setenv(sandbox.SWITCH, "on" if bubblewrap() else "off")


def graded(tmp_path: Path, notebook: str, planted: dict[str, str], tests: list[str]) -> Verdict:
    """The real verifier's verdict on the solved `notebook` with the solution cells of `planted`
    replaced (by grade_id, each one function's cell), on the test cells `tests` only."""
    folder = tmp_path / "student"
    folder.mkdir()
    solved = nbformat.read(SOLUTIONS / notebook, as_version=4)
    for cell in solved.cells:
        grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if grade_id in planted:
            cell.source = planted[grade_id]
    nbformat.write(solved, folder / notebook)
    [plan] = [plan for plan in verify_plan.plans(SOLUTIONS) if plan.notebook == notebook]
    plan.tests = [test for test in plan.tests if test.id in tests]
    assert [test.id for test in plan.tests] == tests
    config = tmp_path / "grading.toml"
    config.write_text("")
    [verdict] = verify.verify(folder, [plan], grading_config=config, timeout=120)
    return verdict


def errors(verdict: Verdict, test: str) -> list[str]:
    return [
        f"{output['ename']}: {output['evalue']}"
        for output in verdict.outputs[test]
        if output["output_type"] == "error"
    ]


# --- (a) the closed models re-run from their source ---------------------------------------------

RERUN = """
def {name}({args}):
    kit = course.{module}
    code = getattr(kit, "__sp" + "ec__").loader.get_code(kit.__name__)
    space = {{"__name__": "copy"}}
    type({name})(code, space)()
    return space["{reference}"]({args})
"""
RERUNS = [
    (
        "04_step_time.ipynb",
        "step_shares",
        "profile_ms",
        "lessons.step_time.scalingmodel",
        "step_shares",
    ),
    (
        "05_the_exchange.ipynb",
        "parameter_server_time",
        "n_ranks, message_bytes, alpha, beta",
        "lessons.exchange.exchangemodel",
        "parameter_server_seconds",
    ),
    (
        "08_beyond_data_parallel.ipynb",
        "activation_bytes",
        "batch, cut_shape",
        "lessons.beyond.parallelism",
        None,
    ),
]
TEST_OF = {
    "step_shares": "check_step_shares",
    "parameter_server_time": "check_parameter_server_time",
    "activation_bytes": "check_activation_bytes",
}


@pytest.mark.parametrize("notebook,name,args,module,reference", RERUNS)
def test_a_closed_model_rerun_from_its_source_earns_nothing_and_is_flagged(
    tmp_path, notebook, name, args, module, reference
):
    source = RERUN.format(name=name, args=args, module=module, reference=reference or name)
    verdict = graded(tmp_path, notebook, {name: source}, [TEST_OF[name]])
    [refused] = errors(verdict, TEST_OF[name])
    assert "is closed while your function" in refused, refused
    [flag] = verdict.flags[""]
    assert f"{name} does what the exercise never needs" in flag, flag
    for words in (
        "line 4: getattr with an attribute name built at run time",
        "line 4: uses loader",
        "line 6: makes an object from another object's type",
    ):
        assert words in flag, flag


# --- (c) the test child's encoder class and the closure cell of its json.dumps ------------------

# What both forgeries swap in: the facts the observer finds of a right function, for the inputs of
# the observation being answered (read from the frame that answers it).
FORGE = """
    import gc, json, sys
    {right}
    def right_facts(value):
        frame = sys._getframe(1)
        while frame is not None and "observation" not in frame.f_locals:
            frame = frame.f_back
        if frame is None or not isinstance(value, dict) or value.get("raised") is not None:
            return value
        asked, observer = frame.f_locals["observation"], frame.f_locals["observer"]
        return dict(value, facts=observer(right, **asked.inputs))
"""
BY_ENCODER_CLASS = """
    encode = json.JSONEncoder.encode
    json.JSONEncoder.encode = lambda self, value: encode(self, right_facts(value))
"""
BY_CLOSURE_CELL = """
    real = json.dumps
    def forged(value, **kwargs):
        return real(right_facts(value), **kwargs)
    functions = [f for f in gc.get_objects() if type(f) is type(forged) and f is not forged]
    for function in functions:
        for cell in function.__closure__ or ():
            try:
                if cell.cell_contents is real:
                    cell.cell_contents = forged
            except ValueError:  # an empty cell
                pass
"""


def forging(stage: str, name: str, how: str, wrong: str) -> str:
    """The solution's `name`, renamed `right` and nested in a `name` that installs the forgery
    `how` and then returns the wrong `wrong`."""
    right = solution_functions(stage)[name].replace(f"def {name}(", "def right(", 1)
    head = solution_functions(stage)[name].split(":\n", 1)[0]
    body = FORGE.format(right=textwrap.indent(right, "    ").lstrip()) + how
    return f"{head}:\n{body}    return {wrong}\n"


WRONG_ITERATORS = (
    "(chainer.iterators.SerialIterator(train, 8), "
    "chainer.iterators.SerialIterator(test, 8, repeat=False, shuffle=False))"
)
# every rank gets the whole training set: each worker's part is not a part
WRONG_TRAIN_ITERATORS = (
    "[chainer.iterators.SerialIterator(train, batchsize) for _device in range(n_devices)]"
)


@pytest.mark.parametrize(
    "notebook,stage,name,wrong,test,how",
    [
        (
            "01_single_gpu.ipynb",
            "single_gpu",
            "make_iterators",
            WRONG_ITERATORS,
            "check_iterators",
            BY_ENCODER_CLASS,
        ),
        (
            "02_multi_gpu.ipynb",
            "multi_gpu",
            "make_train_iterators",
            WRONG_TRAIN_ITERATORS,
            "check_train_iterators",
            BY_CLOSURE_CELL,
        ),
    ],
    ids=["encoder-class", "closure-cell"],
)
def test_a_patch_of_the_childs_json_does_not_reach_its_answers_and_is_flagged(
    tmp_path, notebook, stage, name, wrong, test, how
):
    source = forging(stage, name, how, wrong)
    verdict = graded(tmp_path, notebook, {name: source}, [test])
    assert errors(verdict, test), verdict.outputs[test]  # the wrong function's own facts
    assert test in verdict.visible_failed or errors(verdict, test)
    [flag] = verdict.flags[""]
    said = (
        "writes to json.JSONEncoder.encode"
        if how is BY_ENCODER_CLASS
        else "writes to cell.cell_contents"
    )
    for words in (said, "uses _getframe", "uses f_locals", "reaches __closure__"):
        if words == "reaches __closure__" and how is BY_ENCODER_CLASS:
            continue
        assert words in flag, flag


# --- (b) rank 0 of the stage-3 probe patching json's encoder class -------------------------------

# The red team's rank 0 wrote the kit's reference values; this one writes a report of no ranks,
# which would fail the check where the patch reached the report: the solved functions pass, so the
# report is the probe's own.
PROBE_PATCH = """
    import json
    json.JSONEncoder.encode = lambda self, value: '{"size": 4, "ranks": []}'
"""


def test_a_patch_of_json_on_the_probes_ranks_does_not_reach_their_report_and_is_flagged(tmp_path):
    solved = solution_functions("multi_node")["make_communicator"]
    head, body = solved.split(":\n", 1)
    planted = f"{head}:\n{PROBE_PATCH}{body}"
    verdict = graded(
        tmp_path, "03_multi_node.ipynb", {"make_communicator": planted}, ["check_communicator"]
    )
    assert errors(verdict, "check_communicator") == [], verdict.outputs["check_communicator"]
    [flag] = verdict.flags[""]
    assert "line 4: writes to json.JSONEncoder.encode, an object it did not create" in flag, flag

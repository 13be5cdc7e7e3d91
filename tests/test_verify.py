"""The verifier's reading of a submission: which code of the student's it takes, and what it
reports."""

from __future__ import annotations

import json
import re

import pytest

from course.instructor import verify, verify_functions, verify_plan, verify_protocol
from course.instructor.verify_protocol import (
    Observation,
    Observed,
    Plan,
    ProtocolError,
    Reply,
    Request,
    Verdict,
)
from tests.solutions import SOLUTIONS, solution_cells

# Not collected as test classes: imported under other names.
Cell, ChildReply = verify_protocol.TestCell, verify_protocol.TestReply


def test_a_test_cell_splits_into_what_the_student_sees_and_what_is_hidden():
    source = (
        "check(f)\n### BEGIN HIDDEN TESTS\ncheck(f, n=3)\n### END HIDDEN TESTS\n"
        "### BEGIN ALWAYS HIDDEN TESTS\ncheck(f, n=5)\n### END ALWAYS HIDDEN TESTS\n"
    )
    assert verify_plan._split(source) == ("check(f)", "check(f, n=3)\ncheck(f, n=5)")


def test_only_the_functions_are_taken_and_what_else_runs_code_is_reported():
    sources = {
        "make_iterators": "import os\nos.environ['X'] = '1'\n\ndef make_iterators(a, b=2, c=(1, "
        "'x')):\n    return a\n",
        "build_trainer": "@staticmethod\ndef build_trainer(x):\n    return x\n\n"
        "def make_model(x=print('hi')):\n    return x\n\n"
        "def add_snapshots(trainer):\n    import inspect\n    return inspect.stack()\n",
        "broken": "def f(:\n",
    }
    code, notes = verify_functions.functions(sources)
    assert (
        code.count("def ") == 2
        and "def make_iterators(a, b=2, c=(1, 'x'))" in code
        and "def add_snapshots" in code
    )
    assert "os.environ" not in code and "print('hi')" not in code
    joined = " / ".join(notes)
    assert (
        "make_iterators: line 2 runs code outside a function (left out: only the functions are "
        "graded); it uses os" in joined
    )
    assert (
        "build_trainer has a decorator" in joined
        and "make_model computes a default value" in joined
    )
    assert "add_snapshots does what the exercise never needs (line 9: uses inspect)" in joined
    assert "broken: a syntax error at line 1" in joined


def test_code_hidden_behind_another_line_break_is_never_taken():
    """Python's parser breaks lines at \\n only; str.splitlines also at U+2028, form feeds and
    others. A def is written out from its syntax tree, so code the parser saw inside a string
    never becomes part of the functions (a red-team finding: it ran in the verifier's worker)."""
    hidden = "import course.instructor.verify_test as v; v._run_cell = None  # "
    sources = {
        "make_iterators": '"""a\u2028c\n' + hidden + '"""\n'
        "def make_iterators(train, test, batchsize):\n    return None\n",
        "build_trainer": "def build_trainer(x, table={[]: 1}):\n    return x\n",
    }
    code, notes = verify_functions.functions(sources)
    assert "verify_test" not in code and "_run_cell" not in code
    assert "def make_iterators(train, test, batchsize):" in code
    assert "build_trainer" not in code  # a default that fails to build is no plain default
    assert any("build_trainer computes a default value" in note for note in notes), notes
    namespace: dict = {}
    exec(compile(code, "<functions>", "exec"), namespace)
    assert namespace["make_iterators"](1, 2, 3) is None


def test_what_forging_an_answer_takes_is_flagged():
    source = (
        "def make_communicator(name):\n"
        "    from course.instructor import verify_test\n"
        "    import pathlib, json\n"
        "    return verify_test._answer, pathlib.Path, json.dumps\n"
    )
    _, notes = verify_functions.functions({"make_communicator": source})
    [note] = notes
    for name in ("line 2: uses instructor", "line 3: uses json", "line 4: uses _answer"):
        assert name in note, note


def test_what_reading_one_s_own_runs_takes_is_flagged():
    """A prediction needs only its arguments: the kit imported inside a def (the notebooks' global
    `course` is not flagged), or the runs read through glob and numpy, are named for the
    instructor."""
    sources = {
        "predict_run": "def predict_run(train_size, batchsize, epochs):\n"
        "    from course import evidence\n"
        "    return evidence.runs('single_gpu')[-1].record\n",
        "compute_to_exchange": "def compute_to_exchange(a, b, c):\n"
        "    import glob\n"
        "    import numpy as np\n"
        "    return np.genfromtxt(glob.glob('runs/*/log')[0])\n",
        "predict_comparison": "def predict_comparison(a, b, c, d):\n"
        "    import course.runtime as kit\n"
        "    return kit\n",
    }
    _, notes = verify_functions.functions(sources)
    run, ratio, comparison = notes
    assert (
        "predict_run does what the exercise never needs (line 2: uses evidence; line 2: uses "
        "import course; line 3: uses runs)" in run
    )
    assert "(line 2: uses glob; line 4: uses genfromtxt)" in ratio
    assert (
        "predict_comparison does what the exercise never needs (line 2: uses import course)"
        in comparison
    )


@pytest.mark.parametrize("notebook", sorted(p.name for p in SOLUTIONS.glob("*.ipynb")))
def test_the_solutions_are_never_flagged(notebook):
    """What the verifier flags stays off the solutions' own code (course.X as the notebooks'
    global, numpy's names, the kit's public helpers)."""
    cells = solution_cells(notebook)
    code, notes = verify_functions.functions({str(i): cell for i, cell in enumerate(cells)})
    assert notes == [] and code.count("def ") >= len(cells)


def test_a_test_shown_passing_in_the_handed_in_notebook_but_failing_in_the_verifier_is_named(
    tmp_path,
):
    cell = {
        "cell_type": "code",
        "execution_count": 3,
        "source": "check(f)",
        "outputs": [{"output_type": "stream", "name": "stdout", "text": "OK: f"}],
        "metadata": {"nbgrader": {"grade_id": "check_f", "grade": True}},
    }
    notebook = tmp_path / "01.ipynb"
    notebook.write_text(json.dumps({"cells": [cell]}))
    failing = Verdict(
        "01.ipynb", "", outputs={"check_f": [{"output_type": "error"}]}, visible_failed=["check_f"]
    )
    assert verify.disagreements(notebook, failing) == ["check_f"]
    hidden_only = Verdict("01.ipynb", "", outputs={"check_f": [{"output_type": "error"}]})
    assert (
        verify.disagreements(notebook, hidden_only) == []
    )  # wrong code the hidden part caught: no flag


def test_a_package_of_the_kits_name_in_a_submission_is_named(tmp_path):
    (tmp_path / "course").mkdir()
    (tmp_path / "numpy.py").write_text("")
    (tmp_path / "course.txt").write_text("")
    notes = verify.shadowing(tmp_path)
    assert (
        len(notes) == 2
        and "holds course, which would shadow" in notes[0]
        and "numpy.py" in notes[1]
    )


def test_grading_without_bubblewrap_says_how_to_get_it(monkeypatch):
    from course.errors import GradingError
    from course.instructor import sandbox

    monkeypatch.delenv(sandbox.SWITCH, raising=False)
    monkeypatch.setattr(sandbox.shutil, "which", lambda name: None)
    with pytest.raises(GradingError) as raised:
        verify.check_sandbox()
    assert "bubblewrap (bwrap) is not installed" in raised.value.message
    assert (
        "apt install bubblewrap" in raised.value.hint and "COURSE_SANDBOX=off" in raised.value.hint
    )
    monkeypatch.setenv(sandbox.SWITCH, "off")
    verify.check_sandbox()  # switched off on purpose: grading goes on, and its summary says so


def test_the_verifiers_messages_come_back_as_they_were_sent():
    plan = Plan("01.ipynb", "import course", ["make_iterators"], [Cell("check_f", "a", "b", 2)])
    request = Request("/submitted/alice", 180.0, [plan])
    assert Request.from_json(request.to_json()) == request
    test = ChildReply([{"output_type": "error", "ename": "E", "evalue": ""}], True, {"k": {}})
    assert ChildReply.from_json(test.to_json()) == test
    asked = Observation("course.lessons.core.single:x", ["f"], {"n": 3, "cases": [[1, 2]]}, "t")
    assert Observation.from_json(asked.to_json()) == asked
    for answer in (
        Observed({"ids": [3, 1]}, None, "t"),
        Observed(None, {"name": "E", "message": "m", "notes": [], "said": "m"}, "t"),
    ):
        assert Observed.from_json(answer.to_json()) == answer
    verdict = Verdict(
        "01.ipynb",
        "abc",
        outputs={"check_f": [{"output_type": "stream", "name": "stdout", "text": "OK"}]},
        flags={"": ["a note"]},
        visible_failed=["check_f"],
        seconds={"": 0.5, "check_f": 1},
        said={"check_f": {"id": "exit status {status}", "params": {"status": "3"}}},
    )
    for reply in (Reply([verdict, Verdict("02.ipynb", "", missing=True)]), Reply(None, "killed")):
        assert Reply.from_json(reply.to_json()) == reply


@pytest.mark.parametrize(
    "text, said",
    [
        ("not json", "Reply: not JSON"),
        ("[]", "Reply: expected a JSON object, got list"),
        ('{"verdicts": [{"notebook": "01.ipynb"}]}', "Verdict: missing field(s) digest, flags"),
        ('{"failure": "x", "said": "x", "extra": 1}', "Reply: unknown field(s) extra"),
        ('{"failure": 3, "said": "x"}', "Reply.failure: 3 is not a string"),
        ('{"failure": "x", "said": 3}', "Reply.said: 3 is not a message's record"),
    ],
)
def test_a_malformed_reply_is_refused_with_what_is_wrong(text, said):
    with pytest.raises(ProtocolError) as raised:
        Reply.from_json(text)
    assert said in raised.value.message
    assert isinstance(raised.value, verify_protocol.VerificationError)  # not graded, never a grade


def test_a_malformed_test_reply_is_refused():
    with pytest.raises(ProtocolError, match=r"TestReply.visible_failed: 'no' is not true or false"):
        ChildReply.from_json('{"outputs": [], "probes": {}, "visible_failed": "no", "said": null}')
    with pytest.raises(ProtocolError, match="TestReply: missing field"):
        ChildReply.from_json('{"outputs": [{"text": "no output_type"}], "probes": {}}')


@pytest.mark.parametrize(
    "text, said",
    [
        (
            '{"observer": "os:system", "functions": [], "inputs": {}, "token": "t"}',
            "Observation.observer",
        ),
        ('{"facts": 1, "raised": {"name": "E"}, "token": "t"}', "Observed.raised"),
        ('{"facts": 1}', "Observed: missing field(s) raised, token"),
    ],
)
def test_a_malformed_observation_is_refused(text, said):
    with pytest.raises(ProtocolError, match=re.escape(said)):
        (Observation if "observer" in text else Observed).from_json(text)


def test_a_worker_answer_that_is_not_a_reply_leaves_the_submission_ungraded(monkeypatch, tmp_path):
    from course.instructor import sandbox

    monkeypatch.setenv(sandbox.SWITCH, "off")
    answer = '{"verdicts": [{"notebook": "01.ipynb"}]}\n'
    monkeypatch.setattr(verify, "_run_worker", lambda *args: (0, answer, ""))
    config = tmp_path / "grading.toml"
    config.write_text("")
    with pytest.raises(verify_protocol.VerificationError) as raised:
        verify.verify(tmp_path, [], grading_config=config, timeout=1.0)
    said = raised.value.message
    assert said.startswith("the grader's process for this submission answered wrongly: ")
    assert said.endswith(
        "Verdict: missing field(s) digest, flags, missing, outputs, said, seconds, visible_failed"
    )

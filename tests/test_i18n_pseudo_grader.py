"""The decisive test of the marking of the grader's words a student reads (issue 23): what the
verifier writes into a graded notebook's outputs (a test cell that ran past its time, the process
running the student's functions that broke off, the cut of what a test printed), why a submission
could not be verified, and the errors of the allreduce benchmark's files, grading.toml and the cost
models, each under the pseudo-locale: every line must carry its markers.

The verifier's parent speaks for a submission in that submission's language (verify.verify's
`lang`), not in the grader's own COURSE_LANG: those cases run with COURSE_LANG unset and lang=qps.
The flags for the instructor (tests/test_i18n_lint.py's ALLOWED says which) stay English.

In-process here, but for one case that runs the real verifier's worker (unsandboxed: the words are
the same in bubblewrap), marked integration."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from course import i18n
from course.contracts import benchmark, grading_rules
from course.errors import GradingError, ResultsError
from course.instructor import sandbox, verify, verify_test
from course.instructor.verify_protocol import Observed, Plan, VerificationError
from course.instructor.verify_protocol import TestCell as Cell  # not a test class
from course.lessons.exchange import exchangemodel
from course.lessons.step_time import costmodel
from tests.mpi_helpers import measured
from tests.test_i18n_pseudo import unmarked
from tests.verify_helpers import OBSERVING


def strip(text: str) -> str:
    return text.replace(i18n.MARK_OPEN, "").replace(i18n.MARK_CLOSE, "")


@pytest.fixture
def pseudo_locale(monkeypatch):
    monkeypatch.setenv(i18n.VARIABLE, i18n.PSEUDO)


# --- the cost models, the benchmark's files, grading.toml (a student's own process) ---------------

MODEL_ERRORS = [
    # (call, English words the existing tests match, where they do)
    (lambda: costmodel.allreduce_seconds("rabenseifner", 4, 1, 1, 1), "no cost model"),  # costmodel
    (lambda: costmodel.coefficients("ring", 0), "ranks must be 1 or more"),
    (lambda: costmodel.fit([1, 2], [1.0, 2.0], "ring", 1), "the fit needs 2 or more ranks"),
    (lambda: exchangemodel.overlapped_seconds([1, 2], [1]), "one exchange time per layer"),  # 04
    (lambda: exchangemodel.busiest_link_bytes("tree", 4, 1.0), "no traffic model for 'tree'"),
    (lambda: exchangemodel.busiest_link_bytes("ring", 0, 1.0), "ranks must be 1 or more, not 0"),
    (lambda: exchangemodel.parameter_server_seconds(0, 1.0, 1, 1), "ranks must be 1 or more"),
]


@pytest.mark.usefixtures("pseudo_locale")
@pytest.mark.parametrize("call,words", MODEL_ERRORS, ids=[w for _, w in MODEL_ERRORS])
def test_the_cost_models_errors_are_translated(call, words):
    with pytest.raises(ValueError) as raised:
        call()
    assert words in strip(str(raised.value))
    assert not unmarked(str(raised.value)), str(raised.value)


@pytest.mark.usefixtures("pseudo_locale")
def test_a_tampered_or_foreign_benchmark_file_is_refused_in_the_students_language(tmp_path):
    measured(tmp_path, rounds=1)
    [path] = benchmark.find(tmp_path)
    path.write_text(path.read_text().replace('"cores": 2', '"cores": 8'))  # as test_costmodel's
    foreign = tmp_path / "other.json"
    foreign.write_text('{"schema": "course-results/2"}')
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    said = []
    for file, words in [
        (path, "changed after the benchmark wrote it"),
        (foreign, "is not an allreduce benchmark file"),
        (broken, "is not a readable allreduce file"),
    ]:
        with pytest.raises(ResultsError) as raised:
            benchmark.load(file)
        assert words in strip(str(raised.value)) and raised.value.hint
        said.append(str(raised.value))
    assert not unmarked("\n".join(said)), said


@pytest.mark.usefixtures("pseudo_locale")
def test_grading_tomls_errors_are_translated(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(grading_rules.OVERRIDE, raising=False)
    bad = tmp_path / "bad.toml"
    bad.write_text("[efficiency\n")
    said = []
    for path, words in [
        (tmp_path / "none.toml", "does not exist"),
        (None, "no grading.toml found"),
        (bad, "is not valid TOML"),
    ]:
        if path is None and grading_rules.find() is not None:
            continue  # a grading.toml above the temporary folder: not this machine's case
        with pytest.raises(GradingError) as raised:
            grading_rules.load(path)
        assert words in strip(str(raised.value))
        said.append(str(raised.value))
    with pytest.raises(GradingError) as raised:
        grading_rules.write_public(bad, tmp_path / "public.json")
    said.append(str(raised.value))
    assert not unmarked("\n".join(said)), said


# --- the verifier's parent: the submission's language, not the grader's ---------------------------


def _unverified(monkeypatch, tmp_path, run_worker, lang: str) -> str:
    monkeypatch.setenv(sandbox.SWITCH, "off")
    monkeypatch.delenv(i18n.VARIABLE, raising=False)  # the grader's own language: English
    monkeypatch.setattr(verify, "_run_worker", run_worker)
    config = tmp_path / "grading.toml"
    config.write_text("")
    with pytest.raises(VerificationError) as raised:
        verify.verify(tmp_path, [], grading_config=config, timeout=1.0, lang=lang)
    return raised.value.message


@pytest.mark.parametrize("status", [-9, 3])
def test_a_worker_that_ended_without_a_result_is_said_in_the_submissions_language(
    monkeypatch, tmp_path, status
):
    ended = lambda *args: (status, "", "")  # noqa: E731
    english = _unverified(monkeypatch, tmp_path, ended, i18n.DEFAULT)
    how = "killed by SIGKILL" if status < 0 else f"exit status {status}"
    assert english == (
        f"the grader's process for this submission ended without a result ({how}: no error message)"
    )
    said = _unverified(monkeypatch, tmp_path, ended, i18n.PSEUDO)
    assert strip(said) == english and not unmarked(said), said
    assert f"{i18n.MARK_OPEN}{how}{i18n.MARK_CLOSE}" in said  # each part its own message


class _SilentWorker:
    """A worker that never answers, for _run_worker's budget (its wait times out once)."""

    def __init__(self, *args, **kwargs) -> None:
        self.stdin, self.stdout, self.waited = open(os.devnull, "w"), iter(()), False

    def wait(self, timeout=None):
        if not self.waited:
            self.waited = True
            raise subprocess.TimeoutExpired("worker", timeout)
        return -9

    def poll(self):
        return None

    def kill(self):
        pass


def test_a_worker_past_its_budget_is_said_in_the_submissions_language(monkeypatch, tmp_path):
    monkeypatch.delenv(i18n.VARIABLE, raising=False)
    monkeypatch.setenv(sandbox.SWITCH, "off")
    monkeypatch.setattr(verify.subprocess, "Popen", _SilentWorker)
    request = verify.Request(str(tmp_path), 1.0, [])
    said = {}
    for lang in (i18n.DEFAULT, i18n.PSEUDO):
        with pytest.raises(VerificationError) as raised:
            verify._run_worker(tmp_path, [], request, {}, None, verify.SUBMISSION_TIMEOUT, lang)
        said[lang] = raised.value.message
    assert said[i18n.DEFAULT] == "the grader's process for this submission ran past 60 s"
    assert strip(said[i18n.PSEUDO]) == said[i18n.DEFAULT] and not unmarked(said[i18n.PSEUDO])


# --- a test's trusted process: the channel to the student's functions (in the sandbox) -----------


def _channel(answer: bytes | None) -> verify_test._Channel:
    """A channel whose child (a process that exits 3) answers `answer`, or nothing."""
    requests_r, requests_w = os.pipe()
    replies_r, replies_w = os.pipe()
    child = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    if answer is not None:
        os.write(replies_w, answer)
    os.close(replies_w)
    channel = verify_test._Channel(child.pid, requests_w, replies_r)
    channel.asked = requests_r  # kept open (the question is written), closed by the test
    return channel


@pytest.mark.usefixtures("pseudo_locale")
def test_a_broken_channel_to_the_students_functions_is_said_in_the_students_language(
    monkeypatch,
):
    said = []
    for answer, words in [
        (b"[]\n", "answered with something else than facts"),
        (Observed(1, None, "another").to_json().encode() + b"\n", "another question"),
        (None, "ended without an answer (exit status 3)"),
        (b"x" * 20, "answered with more than 0 MiB"),
    ]:
        if answer == b"x" * 20:
            monkeypatch.setattr(verify_test, "FACTS_LIMIT", 10)
        channel = _channel(answer)
        with pytest.raises(verify_test.ChannelBroken) as raised:
            channel.ask("course.notebook.checks.observe:returned", ["f"], {})
        channel.close()
        os.close(channel.asked)
        assert words in strip(str(raised.value))
        said.append(str(raised.value))
    assert not unmarked("\n".join(said)), said


# --- the real worker: what it writes into a graded notebook's outputs -----------------------------

STUDENT = """
def napping():
    import time
    time.sleep(30)


def quitting():
    import os
    os._exit(3)


def chatter():
    print("x" * 3 * 2**20)
"""


@pytest.mark.integration
def test_the_outputs_the_worker_writes_are_in_the_editions_language(tmp_path, monkeypatch):
    """The grader's own COURSE_LANG is English; the edition's is the pseudo-locale."""
    import nbformat

    monkeypatch.setenv(sandbox.SWITCH, "off")
    monkeypatch.delenv(i18n.VARIABLE, raising=False)
    cell = nbformat.v4.new_code_cell(STUDENT)
    cell.metadata["nbgrader"] = {"solution": True, "grade": False, "grade_id": "code"}
    folder = tmp_path / "student"
    folder.mkdir()
    nbformat.write(nbformat.v4.new_notebook(cells=[cell]), folder / "submitted.ipynb")
    (folder / "broken.ipynb").write_text("{")
    config = tmp_path / "grading.toml"
    config.write_text("")
    tests = [
        Cell("check_time", "observe(returned, napping, args=[])", "", 1),
        Cell("check_exit", "observe(returned, quitting, args=[])", "", 1),
        Cell("check_output", "observe(returned, chatter, args=[])", "", 1),
    ]
    [verdict] = verify.verify(
        folder,
        [Plan("submitted.ipynb", OBSERVING, ["code"], tests)],
        grading_config=config,
        timeout=2,
        lang=i18n.PSEUDO,
    )
    [timed_out] = verdict.outputs["check_time"]
    [died] = verdict.outputs["check_exit"]
    [stream] = verdict.outputs["check_output"]
    assert strip(timed_out["evalue"]) == "this cell ran past the 2 s limit"
    assert "ended without an answer (exit status 3)" in strip(died["evalue"])
    cut = stream["text"].splitlines()[-1]
    assert strip(cut) == "[the grader kept the first 1024 KiB of what this test printed]"
    assert not unmarked("\n".join([timed_out["evalue"], died["evalue"], cut]))
    with pytest.raises(VerificationError) as raised:  # a notebook that is not one: no grade
        verify.verify(
            folder,
            [Plan("broken.ipynb", OBSERVING, ["code"], tests[:1])],
            grading_config=config,
            timeout=2,
            lang=i18n.PSEUDO,
        )
    assert "is not a readable notebook" in strip(raised.value.message)
    assert not unmarked(raised.value.message), raised.value.message

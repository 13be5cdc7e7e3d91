"""The decisive test of the marking of the runtime, the contracts, the diagnostics and the `course`
command line (issue 23): what a student reads from them, under the pseudo-locale, where `_()` wraps
each line of a translated message in markers. A line without them never went through `_()` and
would stay English in the Japanese edition.

Three kinds of case. The tests that build this group's errors (tests/test_results.py,
test_prediction_record.py, test_data.py, test_throughput.py, test_recipe.py, test_checkpoint.py)
run again here (as tests/test_i18n_pseudo_feedback.py replays its own): every error one of this
group's modules raises, and what `course data` prints, must carry the markers, and with them taken
off the replayed test's own English assertions still hold. What no
unit test builds (the GPU self-test's lines, `course kernels`' report, the step profile's line, the
devices' refusals) is made here with the same inputs those modules' tests use, CuPy and the GPUs
faked. And `python -m course --help` and each student command's `--help` run in a subprocess: every
line of prose carries the markers, the usage lines and the option names excepted.

Left to other modules: the descriptions of `course doctor`, `submit`, `cancel`, `launch`, `report`
and `handin` (their modules' docstrings) are theirs, so only the sections of their help (argparse's
headings and -h, put through the catalog by course.cli, and their options' help) are checked here;
`course site`'s help is course/cluster/sites.py's, checked once MARKED has it. The job-log protocol
lines (course.contracts.model_parallel's, the probe's marks) stay English by design; NVRTC's
failures (course.diagnostics.nvrtc) need CuPy, which tests/test_kernels.py installs apart."""

from __future__ import annotations

import argparse
import gettext
import inspect
import os
import re
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest
from wcwidth import width

from course import cli, gpu, i18n
from course.contracts import model_parallel, prediction, stages
from course.diagnostics import kernels, selftest
from course.errors import CourseError, DatasetError, ResultsError
from course.instructor.i18n_catalog import MARKED
from course.runtime import (
    allreduce_bench,
    data_command,
    data_prepare,
    devices,
    flags,
    model_parallel_bench,
    profile,
    throughput,
)
from tests import (
    test_checkpoint,
    test_data,
    test_prediction_record,
    test_recipe,
    test_results,
    test_throughput,
)
from tests.helpers import PYTHON
from tests.test_i18n_pseudo import unmarked
from tests.test_i18n_pseudo_feedback import Seen, _parameters, strip

ROOT = Path(__file__).resolve().parent.parent
GROUP = (
    "course/fileio.py",
    "course/contracts/results.py",
    "course/contracts/prediction.py",
    "course/contracts/stages.py",
    "course/contracts/model_parallel.py",
    "course/cli.py",
    "course/runtime/flags.py",
    "course/runtime/data_command.py",
    "course/runtime/data_prepare.py",
    "course/runtime/devices.py",
    "course/runtime/throughput.py",
    "course/runtime/profile.py",
    "course/runtime/lr_policy.py",
    "course/runtime/allreduce_bench.py",
    "course/runtime/model_parallel_bench.py",
    "course/diagnostics/selftest.py",
    "course/diagnostics/kernels.py",
    "course/diagnostics/nvrtc.py",
    "course/diagnostics/probe.py",
    "course/gpu.py",
)
GROUP_FILES = {str(ROOT / module) for module in GROUP}

# The tests replayed: those that make one of this group's modules refuse something.
REPLAYED = {
    test_results: ("test_bad_files_are_named", "test_missing_file_says_to_run_the_job"),
    test_prediction_record: ("test_what_is_not_a_plain_prediction_is_refused_saying_why",),
    test_data: (
        "test_missing_real_archive_says_where_to_get_it",
        "test_truncated_archive_fails_cleanly_and_leaves_nothing",
        "test_archive_with_code_in_a_pickle_is_refused",
        "test_archive_of_another_shape_is_refused",
        "test_variant_needs_its_base_and_sane_arguments",
        "test_an_empty_data_set_is_refused_when_read_and_listed",
    ),
    test_throughput: ("test_batch_size_must_match_the_iterator",),
    test_recipe: (
        "test_the_weight_decay_is_the_courses_and_a_second_one_is_refused_with_the_way_out",
    ),
    test_checkpoint: ("test_too_little_free_space_is_refused_before_training_naming_the_folder",),
}
CASES = [
    pytest.param(module, getattr(module, name), arguments, marks=marks, id=f"{name}[{shown}]")
    for module, names in REPLAYED.items()
    for name in names
    for shown, arguments, marks in _parameters(getattr(module, name))
]


@pytest.fixture
def pseudo_locale(monkeypatch):
    monkeypatch.setenv(i18n.VARIABLE, i18n.PSEUDO)


def translated(text: str) -> str:
    """`text`, once it is checked that each of its lines carries the markers."""
    assert text and not unmarked(text), text
    return text


def test_the_group_is_marked_and_its_cases_are_found():
    assert set(GROUP) <= set(MARKED)
    # test_results' 4 + 1, test_prediction_record's 8, test_data's 5 + 2, and one of each other
    assert len(CASES) == 5 + 8 + 7 + 3, len(CASES)


# --- the replayed tests ----------------------------------------------------------------------


def watch(monkeypatch, seen: Seen) -> None:
    """Take what this group's modules raise (CourseError and its kinds) and what `course data`
    prints through `seen`: recorded, the markers taken off."""
    init = CourseError.__init__

    def raised(self, message: str, hint: str = "") -> None:
        if sys._getframe(1).f_code.co_filename in GROUP_FILES:
            message, hint = seen("error", message), seen("error's hint", hint)
        init(self, message, hint)

    monkeypatch.setattr(CourseError, "__init__", raised)
    monkeypatch.setattr(
        data_command,
        "print",
        lambda *values, **kwargs: print(*(seen("printed", str(v)) for v in values), **kwargs),
        raising=False,
    )


@pytest.mark.parametrize("module,function,arguments", CASES)
def test_every_error_this_group_raises_in_a_replayed_case_is_translated(
    module, function, arguments, request, monkeypatch
):
    fixtures = {
        name: request.getfixturevalue(name)
        for name in inspect.signature(function).parameters
        if name not in arguments
    }
    monkeypatch.setenv(i18n.VARIABLE, i18n.PSEUDO)
    seen = Seen()
    watch(monkeypatch, seen)
    function(**fixtures, **arguments)  # its own assertions: the English, once the markers are off
    assert seen.said, "the case said nothing of this group's"
    assert not seen.unmarked(), "\n".join(seen.unmarked())


# --- the contracts ---------------------------------------------------------------------------


def _cases(test) -> list:
    [mark] = [mark for mark in test.pytestmark if mark.name == "parametrize"]
    return list(mark.args[1])


@pytest.mark.parametrize(
    "value",
    _cases(
        test_prediction_record.test_the_job_refuses_a_prediction_that_course_submit_did_not_write
    ),
)
def test_a_prediction_the_job_cannot_read_is_said_in_the_students_language(
    value, pseudo_locale, monkeypatch
):
    with pytest.raises(ValueError) as raised:
        prediction.decode(value)
    translated(str(raised.value))
    monkeypatch.setenv(prediction.ENV, value)
    given, warning = prediction.submitted()
    assert given is None and warning is not None
    assert translated(warning).startswith(f"course: {i18n.MARK_OPEN}warning: "), warning


def test_the_stages_titles_and_an_unknown_stage_are_in_the_students_language(pseudo_locale):
    for stage in stages.STAGES.values():
        translated(stage.title)
    with pytest.raises(ValueError) as raised:
        stages.get("single")
    assert strip(translated(str(raised.value))).startswith("unknown stage 'single'; one of ")


def test_a_model_parallel_file_that_is_not_one_is_said_in_the_students_language(
    tmp_path, pseudo_locale
):
    path = model_parallel.next_path(model_parallel.run_folder(tmp_path, "1"), 2)
    model_parallel.write(path, {"ranks": 2})
    path.write_text(path.read_text().replace('"ranks": 2', '"ranks": 3'))  # edited: no seal
    (tmp_path / "other.json").write_text('{"schema": "course-results/2"}')
    (tmp_path / "broken.json").write_text("{")
    for file, words in (
        (path, "was changed after the job wrote it"),
        (tmp_path / "other.json", "is not a model-parallel run's file"),
        (tmp_path / "broken.json", "is not a readable model-parallel file"),
        (tmp_path / "missing.json", "is not a readable model-parallel file"),
    ):
        with pytest.raises(ResultsError) as raised:
            model_parallel.load(file)
        assert words in strip(translated(raised.value.message)), raised.value.message
        translated(raised.value.hint)


# --- the runtime -----------------------------------------------------------------------------


def test_a_throughput_meter_set_up_wrong_is_said_in_the_students_language(pseudo_locale):
    with pytest.raises(ValueError) as raised:
        throughput.Throughput(batch_size=0)
    translated(str(raised.value))


def test_the_step_profiles_line_and_its_refusal_are_in_the_students_language(pseudo_locale):
    median = dict.fromkeys(profile.PHASES, 1.5) | {"wait": None}
    line = profile.line({"rank": 1, "host": "n1", "steps": 12, "median_ms": median})
    assert line.startswith(f"course: {i18n.MARK_OPEN}profile rank 1 on n1: data 1.50 ms"), line
    optimizer = types.SimpleNamespace()  # not ChainerMN's multi-node optimizer
    trainer = types.SimpleNamespace(
        updater=types.SimpleNamespace(get_optimizer=lambda name: optimizer)
    )
    with pytest.raises(ValueError) as raised:
        profile.StepProfile(trainer, None, warmup=2)
    translated(str(raised.value))


@pytest.mark.parametrize("found,requested", [(1, None), (2, 4), (0, 2)])
def test_too_few_gpus_for_stage_2_are_said_in_the_students_language(
    found, requested, pseudo_locale, monkeypatch
):
    monkeypatch.setattr(gpu, "visible_gpus", lambda: gpu.VisibleGpus(["Tesla P100"] * found))
    with pytest.raises(CourseError) as raised:
        devices.gpus_for_multiprocess(requested)
    said = strip(translated(str(raised.value)))
    assert said.startswith(f"stage 2 needs at least 2 GPUs on this node; it has {found}"), said
    assert ("--gpus" in said) == bool(requested), said
    with pytest.raises(ValueError) as raised:
        gpu.assigned_devices(["@numpy"])
    translated(str(raised.value))


def test_what_course_data_says_is_in_the_students_language(
    data_root, tmp_path, capsys, pseudo_locale, monkeypatch
):
    assert data_command.main(["list"]) == 0
    assert data_command.main(["synthetic", "--train", "10", "--test", "10"]) == 0
    monkeypatch.setattr(data_command.siteenv, "locate", lambda: None)
    with pytest.raises(DatasetError) as nowhere:
        data_command.main(["site"])
    monkeypatch.setattr(data_command.siteenv, "locate", lambda: tmp_path / "site_env.sh")
    monkeypatch.setattr(
        data_command.siteenv.SiteSettings, "read", lambda path: types.SimpleNamespace(dataset="")
    )
    with pytest.raises(DatasetError) as unnamed:
        data_command.main(["site"])
    with pytest.raises(DatasetError) as too_few:
        data_prepare.prepare_synthetic(5, 5)
    with pytest.raises(DatasetError) as unknown:
        data_prepare.prepare("imagenet")
    out = capsys.readouterr().out
    assert out.startswith(f"{i18n.MARK_OPEN}no data sets in ") and "ready: " in out, out
    translated(out)
    for error in (nowhere, unnamed, too_few, unknown):
        translated(str(error.value))
    # the file a refused data set would have been: a phrase of course.runtime.data's message
    empty, one = np.zeros((0, 3072), np.uint8), np.zeros((1, 3072), np.uint8)
    arrays = data_prepare.Arrays(empty, np.zeros(0, np.uint8), one, np.zeros(1, np.uint8), {})
    with pytest.raises(DatasetError) as refused:
        data_prepare._save(tmp_path / "x.npz", arrays, compress=True)
    assert str(refused.value).startswith(i18n.MARK_OPEN * 2 + "not writing "), refused.value


# --- the diagnostics -------------------------------------------------------------------------


class _FakeArray:
    def __init__(self, values):
        self.values = values

    def get(self):
        return self.values


def _fake_cupy() -> dict[str, types.SimpleNamespace]:
    """Enough of CuPy for the self-test's kernel step (which passes) and NCCL step (which finds
    no NCCL)."""
    nccl = types.SimpleNamespace(available=False)
    device = types.SimpleNamespace(id=0, compute_capability="80")
    cuda = types.SimpleNamespace(nccl=nccl, Device=lambda: device)
    cupy = types.SimpleNamespace(
        cuda=cuda,
        asarray=_FakeArray,
        ElementwiseKernel=lambda *definition: lambda x: _FakeArray(x.values * x.values),
    )
    return {"cupy": cupy, "cupy.cuda": cuda, "cupy.cuda.nccl": nccl}


@pytest.mark.parametrize("count", [1, 2])
def test_every_line_of_the_gpu_self_test_is_translated(count, pseudo_locale, monkeypatch):
    import chainer  # noqa: F401  (before the fake CuPy: Chainer sees none, so no cuDNN either)

    for name, module in _fake_cupy().items():
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.setattr(gpu, "visible_gpus", lambda: gpu.VisibleGpus(["Tesla P100"] * count))
    monkeypatch.setattr(gpu, "cupy_installed", lambda: True)
    monkeypatch.setattr(gpu, "preload_cuda_libraries", dict)
    monkeypatch.setattr(selftest, "_course", lambda env, *arguments: "")  # no Throughput line
    monkeypatch.setattr(selftest, "_child", lambda argv, what, env=None: "5 2 21602\n")
    lines: list[str] = []
    assert selftest.run(echo=lines.append) == 1  # cuDNN, NCCL and stage 1 fail
    said = re.sub(" +", " ", strip("\n".join(lines)))  # the column is wider with the markers
    assert "[ok] kernel compiled and ran on GPU 0 (compute capability 80)" in said, said
    assert "[!!] cuDNN failed: Chainer does not use cuDNN" in said, said
    assert "[!!] stage 1 failed: no Throughput line with use_cudnn=always:" in said, said
    ran = "[ok] stage 2 MultiprocessParallelUpdater: 5 iterations on 2 GPUs, NCCL 21602"
    assert (ran in said) == (count == 2), said
    assert ("[--] stage 2 needs 2 or more GPUs" in said) == (count == 1), said
    assert not unmarked("\n".join(line for line in lines if line.strip())), lines


def test_the_self_test_without_a_gpu_or_cupy_says_so_in_the_students_language(
    pseudo_locale, monkeypatch
):
    lines: list[str] = []
    monkeypatch.setattr(gpu, "visible_gpus", lambda: gpu.VisibleGpus())
    assert selftest.run(echo=lines.append) == 1
    monkeypatch.setattr(gpu, "visible_gpus", lambda: gpu.VisibleGpus(["Tesla P100"]))
    monkeypatch.setattr(gpu, "cupy_installed", lambda: False)
    assert selftest.run(echo=lines.append) == 1
    assert len(lines) == 4 and not unmarked("\n".join(lines)), lines


def test_the_kernels_report_is_in_the_students_language(pseudo_locale, monkeypatch, capsys):
    report = {
        "nvrtc": "12.4",
        "headers": [],
        "kernels": [
            {"origin": "cupy", "name": "course_add", "compiled": {"80": 0.1}, "errors": {}},
            {"origin": "chainer", "name": "im2col", "compiled": {}, "errors": {"90": "log"}},
        ],
    }
    monkeypatch.setattr(kernels, "compile_all", lambda archs: report)
    assert kernels.main(["--arch", "80,90"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 4 and strip(lines[2]).endswith("chainer: compiled for none"), lines
    assert not unmarked("\n".join(lines[:3])), lines  # the last: the compiler's log, as it is


# --- the command line ------------------------------------------------------------------------


def test_argparses_words_are_looked_up_as_argparse_writes_them():
    """A message of course.cli's table that is not argparse's own would never be asked for."""
    source = inspect.getsource(argparse)
    english = cli._argparse_messages(lambda text: text)
    assert all(f"_({message!r})" in source for message in english), [
        message for message in english if f"_({message!r})" not in source
    ]


# A line of option names alone (its help on the next line), or a positional argument's name.
_OPTION = re.compile(
    r"^\s+(?:-{1,2}\w[\w-]*(?: \{[\w,]+\}| [A-Z_][A-Z_.,=]*(?: \[[A-Z_]+ \.\.\.\])?)?(?:, )?)+$"
    r"|^\s+[\w{},.-]+$"
)


def unmarked_help(text: str, sections_only: bool = False) -> list[str]:
    """The lines of a command's help after its usage (or, `sections_only`, from its first heading
    on) that carry no markers and are not within a message wrapped over lines, nor option names."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if not line.strip())  # the usage block's end
    if sections_only:
        heading = re.compile(rf"^{i18n.MARK_OPEN}[^{i18n.MARK_CLOSE}]+{i18n.MARK_CLOSE}:$")
        start = next(i for i, line in enumerate(lines) if heading.match(line))
    found, depth = [], 0
    for line in lines[start:]:
        carried = depth > 0 or i18n.MARK_OPEN in line or i18n.MARK_CLOSE in line
        depth += line.count(i18n.MARK_OPEN) - line.count(i18n.MARK_CLOSE)
        if line.strip() and not carried and not _OPTION.match(line):
            found.append(line)
    return found


def _help(*arguments: str, lang: str = i18n.PSEUDO) -> subprocess.CompletedProcess:
    env = {**os.environ, i18n.VARIABLE: lang, "COLUMNS": "80"}
    return subprocess.run(
        [PYTHON, "-m", "course", *arguments], capture_output=True, text=True, env=env
    )


# The student commands (the students' copy has them) whose module's words are marked; of this
# group's, the description too is a message.
STUDENT = [
    name
    for name, module in cli.COMMANDS.items()
    if not module.startswith("course.instructor") and f"{module.replace('.', '/')}.py" in MARKED
]
DESCRIBED = {"env", "kernels", "data"}


def test_the_student_commands_are_checked():
    assert DESCRIBED <= set(STUDENT) and {"doctor", "submit", "report", "handin"} <= set(STUDENT)


def test_python_m_course_help_is_in_the_students_language():
    run = _help("--help")
    assert run.returncode == 0 and run.stdout.startswith(cli.USAGE + "\n\n"), run.stderr
    assert not unmarked_help(run.stdout), run.stdout
    assert len(run.stdout.splitlines()) == 2 + 1 + len(cli.COMMANDS) + 2


# The unit tier refuses to start `course submit` and `course launch` at all, their help too.
STARTS_JOBS = {"submit", "launch"}


@pytest.mark.parametrize(
    "arguments",
    [
        pytest.param((name,), marks=[pytest.mark.integration] if name in STARTS_JOBS else [])
        for name in STUDENT
    ]
    + [("data", action) for action in ("list", "site", "synthetic", "cifar10", "variant")],
    ids=" ".join,
)
def test_every_student_commands_help_is_in_the_students_language(arguments):
    run = _help(*arguments, "--help")
    assert run.returncode == 0, run.stderr
    found = unmarked_help(run.stdout, sections_only=arguments[0] not in DESCRIBED)
    assert not found, run.stdout


def test_a_stage_scripts_and_the_benchmarks_flags_are_in_the_students_language(
    pseudo_locale, capsys
):
    for stage in stages.NAMES:
        assert not unmarked_help(flags.parser(stage).format_help()), stage
    for bench in (allreduce_bench, model_parallel_bench):  # their descriptions: module docstrings
        with pytest.raises(SystemExit):
            bench.parse_args(["--help"])
        assert not unmarked_help(capsys.readouterr().out, sections_only=True), bench


def test_the_command_lines_errors_are_in_the_students_language(pseudo_locale, capsys, monkeypatch):
    assert cli.main(["nosuch"]) == 2
    with pytest.raises(SystemExit):
        cli.main(["data"])  # argparse's own words: the missing argument
    with pytest.raises(SystemExit):
        cli.main(["data", "variant", "--size", "big"])

    def failing():
        raise OSError(13, "Permission denied")

    assert cli.guarded("data", failing) == 2

    def missing(name):
        raise ModuleNotFoundError(name=name)

    monkeypatch.setattr(cli.importlib, "import_module", missing)
    assert cli.main(["grade"]) == 2
    err = capsys.readouterr().err.splitlines()
    # usage lines, and the system's words on an OSError (the kit's hint follows them)
    excepted = re.compile(r"^(?:usage: |\s+\[|course data: \[Errno 13\] Permission denied$)")
    assert not unmarked("\n".join(line for line in err if not excepted.match(line))), err
    assert "course data variant: error: argument --size: invalid int value: 'big'" in strip(
        "\n".join(err)
    ), err
    assert vars(argparse)["_"] is gettext.gettext  # put back once the command is done


def test_the_english_help_is_argparses_and_the_japanese_fits_the_terminal(monkeypatch):
    monkeypatch.delenv(i18n.VARIABLE, raising=False)
    parser = flags.parser("multi_node")
    ours = parser.format_help()
    parser.formatter_class = argparse.HelpFormatter
    assert ours == parser.format_help()
    run = _help("data", "--help", lang="ja")
    lines = run.stdout.splitlines()
    assert run.returncode == 0 and "位置引数:" in lines, run.stdout
    assert all(width(line) <= 80 for line in lines), [line for line in lines if width(line) > 80]
    assert cli.wrapped("この行は、ここで折り返します。", 16) == [
        "この行は、ここで",
        "折り返します。",
    ]

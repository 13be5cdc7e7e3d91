"""The marking of the notebooks' reports and helpers (issue 23; i18n_catalog.MARKED): what they
print for a student, under the pseudo-locale, where `_()` wraps each line of a translated message in
markers (tests/test_i18n_pseudo.py does the same for stage 1's checks). Every line a student reads
must carry them: the self-checks' lines, the tables' headings, the notes, the plots' labels, the
errors of the script writer, of the resource request (on every planted mistake of
tests/test_checks.py whose words are this module's) and of the launch line's placement, the
hand-in's words, and the comments of the job's script. In Japanese the terminal tables stay
aligned, a character of two columns counted as two. All in this process: no job, no MPI."""

from __future__ import annotations

import ast
import contextlib
import inspect
import io
import math
import re
from pathlib import Path

import matplotlib
import pytest
from wcwidth import width

from course import i18n
from course.contracts import benchmark, stages
from course.errors import CourseError
from course.instructor.i18n_catalog import MARKED
from course.lessons.beyond import model_parallel_report
from course.lessons.exchange import exchange_report, exchangemodel, scaling_report
from course.lessons.run_part import checks as run_part_checks
from course.lessons.run_part import directives, one_node, placement
from course.lessons.step_time import allreduce_report, profile_report, scalingmodel
from course.notebook import handin, handin_command, report, scripts
from course.runtime import mains
from course.runtime.profile import PHASES
from tests import test_checks
from tests.helpers import ROOT, make_run, replaced_once
from tests.mpi_helpers import measured
from tests.solutions import solution_functions
from tests.test_i18n_pseudo import unmarked
from tests.test_model_parallel_checks import traced_run

matplotlib.use("Agg")

PSEUDO = pytest.mark.usefixtures("pseudo_locale")


@pytest.fixture
def pseudo_locale(monkeypatch):
    monkeypatch.setenv(i18n.VARIABLE, i18n.PSEUDO)


def said(function, *args, **kwargs) -> str:
    """What `function` prints (stdout and stderr), its returned lines, or its CourseError."""
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            returned = function(*args, **kwargs)
    except CourseError as e:
        return out.getvalue() + str(e)
    if isinstance(returned, str):
        returned = [returned]
    lines = returned if isinstance(returned, list) else []
    return out.getvalue() + "\n".join(line for line in lines if isinstance(line, str))


EPOCHS = {
    "log": [
        {"epoch": e, "iteration": 10 * e, "elapsed_time": 10.0 * e, "validation/main/accuracy": a}
        for e, a in ((1, 0.3), (2, 0.6), (3, 0.9))
    ]
}
LAYERS = [
    {"name": f"l{i}", "backward_ms": 1.0 + i, "parameters": 10_000 * (i + 1)} for i in range(4)
]
PROFILE = {
    "profile": {
        "phases": list(PHASES),
        "ranks": [
            {
                "rank": rank,
                "host": "n1",
                "steps": 5,
                "median_ms": dict(zip(PHASES, (1, 30, 55, 4, 6, 3, 1), strict=True)),
                "layers": LAYERS,
            }
            for rank in range(4)
        ],
    },
    "model": {"name": "vgg", "width": 16, "parameters": 100_000, "arrays": [40_000, 60_000]},
}


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    """A student's folder: runs of the three stages (one without its log), an allreduce benchmark
    of both algorithms on 4 ranks, a parameter-server job beside the ring, and a profiled stage-3
    run with its layers."""
    folder = tmp_path_factory.mktemp("reports")
    make_run(
        folder,
        stages.SINGLE_GPU.name,
        1,
        100.0,
        fields={**EPOCHS, "snapshots": {"seconds": [0.5, 0.7]}},
    )
    make_run(folder, stages.MULTI_GPU.name, 2, 180.0, workers=2, fields=EPOCHS)
    make_run(
        folder,
        stages.MULTI_NODE.name,
        3,
        210.0,
        workers=2,
        communicator="naive",
        fields={**EPOCHS, "lr_schedule": {"rule": "warmup"}},
    )
    make_run(
        folder, stages.MULTI_NODE.name, 4, 90.0, workers=4, communicator="pure_nccl", log=False
    )
    make_run(
        folder,
        stages.MULTI_NODE.name,
        5,
        300.0,
        workers=4,
        communicator="naive",
        fields=PROFILE,
    )
    measured(folder, ranks=4, algorithm="ring")
    measured(folder, ranks=4, algorithm="recursive_doubling", seed=1)
    run = benchmark.run_folder(folder, "9.local", benchmark.EXCHANGE_PREFIX)
    for algorithm, slower in (("ring", 1), (benchmark.PARAMETER_SERVER, 3)):
        sizes = [
            {"bytes": n, "repeats": 3, "seconds": [slower * 1e-4 * (1 + n / 2**16)] * 3}
            for n in (16384, 2**20)
        ]
        benchmark.write(
            benchmark.next_path(run, algorithm, 4),
            {
                "job": {"id": "9.local"},
                "ranks": 4,
                "hosts": ["n1"] * 4,
                "cores": 2,
                "algorithm": algorithm,
                "sizes": sizes,
                "started": 1.0,
            },
        )
    return folder


@pytest.fixture
def grading(monkeypatch):
    monkeypatch.setenv("COURSE_GRADING_CONFIG", str(ROOT / "grading.toml"))


# --- what the notebooks' report cells print ---------------------------------------------------


def report_lines(folder: Path, empty: Path) -> dict[str, str]:
    """{what: the text} of every report a student reads in a cell, on `folder` and on an `empty`
    one."""
    table = report.rows(folder)
    fitted = allreduce_report.fits(allreduce_report.measured_table(folder))
    setting = scaling_report.step_setting(folder)
    return {
        "check_runs": "\n".join(said(report.check_runs, stage, folder) for stage in stages.NAMES),
        "check_runs, no run": said(report.check_runs, stages.MULTI_GPU.name, empty),
        "check_comparison": said(report.check_comparison, folder),
        "check_accuracy": said(report.check_accuracy, folder),
        "check_accuracy, no run": said(report.check_accuracy, empty),
        "snapshot_cost": said(report.snapshot_cost, folder),
        "snapshot_cost, no run": said(report.snapshot_cost, empty),
        "notes": said(report.notes, table, report.target_of(folder))
        + "\n"
        + said(report.notes, []),
        "efficiency tiers": said(report.efficiency_tiers, folder),
        "course report, no run": said(report.main, [str(empty)]),
        "one node": said(one_node.why_empty, folder) + "\n" + said(one_node.why_empty, empty),
        "allreduce notes": said(
            allreduce_report.notes, allreduce_report.measured_table(folder), fitted
        ),
        "allreduce compare": said(
            allreduce_report.compare, allreduce_report.measured_table(folder)
        ),
        "allreduce summary": said(allreduce_report.summary, folder),
        "exchange": said(
            exchange_report.server_lines,
            exchange_report.server_table(folder),
            exchangemodel.parameter_server_seconds,
            folder,
        ),
        "overlap": said(exchange_report.show_overlap, exchangemodel.overlapped_seconds, folder),
        "half precision": said(
            exchange_report.show_half_precision, exchangemodel.half_precision_saving, folder
        ),
        "exchange summary, no run": said(exchange_report.summary, empty),
        "crossover": said(
            scaling_report.crossover_lines, exchangemodel.ring_crossover_bytes, fitted, {"g": 10**8}
        ),
        "crossover, no fit": said(
            scaling_report.crossover_lines, exchangemodel.ring_crossover_bytes, {}, {}
        ),
        "slowdown": said(
            scaling_report.slowdown_lines,
            exchangemodel.weak_scaling_speedup,
            exchangemodel.first_slower,
            setting,
        ),
        "share": said(scaling_report.share_lines, exchangemodel.exchange_share, setting),
        "share, no profile": said(scaling_report.show_share, exchangemodel.exchange_share, empty),
        "step shares": said(
            profile_report.shares_lines, scalingmodel.step_shares, profile_report.rows(folder)
        ),
        "step shares, no profile": said(profile_report.shares_lines, scalingmodel.step_shares, []),
    }


@PSEUDO
@pytest.mark.usefixtures("grading")
def test_every_line_of_the_reports_is_translated(folder, tmp_path):
    found = report_lines(folder, tmp_path)
    assert "WILL NOT COUNT" in found["check_runs"] and "NOT YET" in found["check_accuracy, no run"]
    assert found["check_accuracy"].splitlines()[-1].startswith("OK: ")  # a passing line too
    for what, text in found.items():
        assert text.strip() and not unmarked(text), (what, text)


@PSEUDO
@pytest.mark.usefixtures("grading")
def test_the_tables_headings_are_translated_and_their_rows_are_data(folder, tmp_path):
    table = report.table_text(report.rows(folder)).splitlines()
    assert table[0].count(i18n.MARK_OPEN) == len(report.COLUMNS) - 1  # img/s is a unit
    assert re.findall(r"⟦weak⟧", "\n".join(table))  # the scaling column in words
    html = report.table_html(report.rows(folder))
    assert html.count(i18n.MARK_OPEN) >= len(report.COLUMNS) - 1
    allreduce = allreduce_report.table_text(allreduce_report.measured_table(folder))
    assert allreduce.splitlines()[0].count(i18n.MARK_OPEN) == 3  # "size" and the two series
    traced_run(tmp_path)
    [run] = model_parallel_report.traced(tmp_path)
    lines = model_parallel_report.lines(run)
    assert not unmarked("\n".join(lines[:2] + lines[4:])), lines
    assert all(line.count(i18n.MARK_OPEN) == 2 for line in lines[2:4]), lines  # name, explanation
    out = said(model_parallel_report.show, tmp_path / "none")
    assert out and not unmarked(out), out


@PSEUDO
def test_every_label_of_the_plots_is_translated(folder, grading):
    import matplotlib.pyplot as plt

    table = report.rows(folder)
    fitted = allreduce_report.fits(allreduce_report.measured_table(folder))
    figures = [
        report.plot(table),
        allreduce_report.plot(allreduce_report.measured_table(folder), fitted, {16: 300_000}),
        exchange_report.plot_by_workers(exchangemodel.parameter_server_seconds, 5e-6, 4e-10, 2**20),
        profile_report.plot(folder),
        profile_report.plot(folder / "none"),
    ]
    try:
        texts = [
            text
            for figure in figures
            for ax in figure.axes
            for text in (
                ax.get_title(),
                ax.get_xlabel(),
                ax.get_ylabel(),
                *(t.get_text() for t in ax.texts),
            )
            if text
        ]
        # the legends: the report's name the runs and stages (data) beside the ideal line
        legends = [
            [
                t.get_text()
                for ax in figure.axes
                if ax.get_legend()
                for t in ax.get_legend().get_texts()
            ]
            for figure in figures[:3]
        ]
        ticks = [t.get_text() for t in figures[3].axes[0].get_xticklabels()]
    finally:
        plt.close("all")
    assert len(texts) >= 16 and not unmarked("\n".join(texts)), texts
    assert i18n.pseudo("ideal (linear, from the baseline)") in legends[0], legends[0]
    assert legends[1] and legends[2] and not unmarked("\n".join(legends[1] + legends[2])), legends
    assert ticks and all(tick.count(i18n.MARK_OPEN) == 3 for tick in ticks), ticks  # a line each


@PSEUDO
def test_the_setup_cell_says_where_it_runs(tmp_path, monkeypatch):
    import importlib

    setup = importlib.import_module("course.notebook.setup")  # the package's setup() shadows it
    monkeypatch.chdir(tmp_path)  # no jobs/ here
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    monkeypatch.setenv("COURSE_DATASET", "not-a-data-set")
    note, stage, data, *hint = said(setup.setup, stages.SINGLE_GPU.name).splitlines()
    assert not unmarked("\n".join((note, stage))), (note, stage)
    assert data.startswith(i18n.pseudo("Data: {data}")[:7]), data  # the error after it: data.py's


# --- the hand-in ------------------------------------------------------------------------------


@PSEUDO
def test_the_hand_in_says_everything_in_the_students_language(tmp_path):
    (tmp_path / "runs" / "multi_node-3.local").mkdir(parents=True)
    (tmp_path / "big.bin").write_bytes(b"x" * 3000)
    text = "\n".join(
        (
            said(handin.check, tmp_path),
            handin.refusal(tmp_path, 5000, 1000),
            said(handin.remove_snapshots, "nope", tmp_path),
            said(handin_command.main, ["--folder", str(tmp_path)]),
        )
    )
    data_rows = [line for line in text.splitlines() if line.endswith("big.bin")]  # size, name
    assert len(data_rows) == 1 and unmarked(text) == data_rows, text


# --- the job's script --------------------------------------------------------------------------


def test_every_comment_of_the_stages_mains_is_a_message():
    """The job's script holds main() of course.runtime.mains: each of its comments must be among
    the messages scripts.main_comments() translates, its English the same."""
    found = [
        text
        for stage in stages.STAGES.values()
        for *_, text in scripts.comments(inspect.getsource(getattr(mains, stage.name)))
    ]
    assert len(found) >= 10 and set(found) <= set(scripts.main_comments()), set(found) - set(
        scripts.main_comments()
    )


@PSEUDO
def test_the_job_script_speaks_the_students_language(tmp_path, capsys):
    for stage in stages.STAGES.values():
        text = scripts.script_text(stage.name, {})
        compile(text, stage.script, "exec")
        comments = [text for *_, text in scripts.comments(text)]
        assert comments and not unmarked("\n".join(comments)), comments
        docstring = ast.get_docstring(ast.parse(text))
        assert docstring and not unmarked(docstring), docstring
    namespace: dict = {}
    exec(scripts._missing("make_iterators"), namespace)  # a function not written yet, in the script
    with pytest.raises(NotImplementedError) as stub:
        namespace["make_iterators"]()
    assert not unmarked(str(stub.value)), stub.value
    assert {
        english: translated
        for english, translated in scripts.main_comments().items()
        if translated != i18n.pseudo(english)
    } == {}  # each message's English is its key
    scripts.write_script(stages.SINGLE_GPU.name, {}, tmp_path)
    out = capsys.readouterr().out
    assert out and not unmarked(out), out
    errors = [
        said(scripts.assemble_script, stages.SINGLE_GPU.name, [1, 2, 3]).splitlines()[0],
        said(
            scripts.assemble_script, stages.SINGLE_GPU.name, {"make_iterators": test_checks.planted}
        ),
        said(scripts.assemble_script, stages.SINGLE_GPU.name, {"make_iterators": uses_a_global}),
    ]
    assert not unmarked("\n".join(errors)), errors


def uses_a_global(train, test, batchsize):
    return an_undefined_name  # noqa: F821 (the script writer refuses it)


def test_the_job_script_is_utf_8_whatever_the_locale(tmp_path, monkeypatch):
    monkeypatch.setenv(i18n.VARIABLE, "ja")
    path = scripts.write_script(stages.SINGLE_GPU.name, {}, tmp_path)
    text = path.read_bytes().decode("utf-8")
    assert "まだ書かれていません" in text and "この" in text
    compile(text, path.name, "exec")


# --- the resource request and the launch line's placement -------------------------------------

# The stage-3 mistakes of tests/test_checks.py in resource_request, whose words are the directive
# check's (course/lessons/run_part/directives.py); "misspelt select" is the PBS parser's own words
# (course/cluster/pbs.py).
REQUEST_MISTAKES = [
    pytest.param(old, new, words, id=name)
    for name, ((function, old, new), check, words) in test_checks.STAGE_3_MISTAKES.items()
    if check == "check_resource_request" and name != "misspelt select"
]


def english(text: str) -> str:
    """`text` without the pseudo-locale's markers (a translated placeholder has its own)."""
    return text.replace(i18n.MARK_OPEN, "").replace(i18n.MARK_CLOSE, "")


def planted_request(old: str, new: str):
    source = replaced_once(solution_functions(stages.MULTI_NODE.name)["resource_request"], old, new)
    namespace = {"math": math}
    exec(compile(source, "<planted resource_request>", "exec"), namespace)
    return namespace["resource_request"]


def first_refusal(resource_request) -> CourseError:
    """What the check says of the first case of the run part check's other sites that the lines
    fail."""
    for (
        name,
        queue,
        group,
        gpus,
        cores,
        ranks,
        threads,
        seconds,
        epochs,
    ) in run_part_checks._OTHER_SITES:
        site = directives.Site(name, queue, group, gpus, cores)
        try:
            directives.check(
                resource_request(site, ranks, threads, seconds, epochs),
                site,
                ranks,
                threads,
                seconds,
                epochs,
            )
        except CourseError as e:
            return e
    raise AssertionError("every case passed")


def test_the_cases_are_the_resource_request_mistakes_of_test_checks():
    assert len(REQUEST_MISTAKES) == 6, len(REQUEST_MISTAKES)


@PSEUDO
@pytest.mark.parametrize("old,new,words", REQUEST_MISTAKES)
def test_every_line_of_a_refused_resource_request_is_translated(old, new, words):
    refused = first_refusal(planted_request(old, new))
    assert words in english(str(refused)), str(refused)  # the same failure as in English
    assert refused.hint and not unmarked(str(refused)), str(refused)


@PSEUDO
def test_every_refusal_of_the_directives_and_placement_is_translated(tmp_path):
    site = directives.Site("pbs-gpu", "h-regular", "gt00", 2, 36)
    ok = ["#PBS -q h-regular", "#PBS -W group_list=gt00", "#PBS -l select=2:mpiprocs=2"]
    refused = [
        said(directives.check, lines, site, 4, 1, 95.0, 10)
        for lines in (
            "text",
            ["qsub -q x"],
            [*ok[:2], "#PBS -l select=1:mpiprocs=2", "#PBS -l walltime=00:30:00"],
            [*ok[:2], "#PBS -l select=1:mpiprocs=4", "#PBS -l walltime=00:30:00"],
            ok,
            [*ok, "#PBS -l walltime=09:00:00"],
            ["#PBS -q other", *ok[1:], "#PBS -l walltime=00:30:00"],
        )
    ]
    refused.append(said(directives.measured_epochs, tmp_path))
    refused += [
        said(placement.mapping_words, argv)
        for argv in (["--rankfile", "x"], ["--map-by", "rankfile:file=x"], ["--frobnicate", "x"])
    ]
    assert all(text.count("\n  -> ") == 1 for text in refused), refused
    assert not unmarked("\n".join(refused)), refused


# --- what the lint cannot see -------------------------------------------------------------------


# doctor.py (not this branch's to change) has _("unknown") inside an f-string: the catalog lacks it.
@pytest.mark.parametrize("module", MARKED)
def test_no_message_is_marked_inside_an_f_string(module):
    """Babel's extractor does not look into an f-string: a `_()` there would never reach the
    catalog, and its words would stay English."""
    tree = ast.parse((ROOT / module).read_text())
    inside = [
        node.lineno
        for joined in ast.walk(tree)
        if isinstance(joined, ast.JoinedStr)
        for node in ast.walk(joined)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("_", "N_")
    ]
    assert not inside, f"{module}: _() inside an f-string at lines {inside}"


# --- Japanese in a terminal ---------------------------------------------------------------------


def starts(line: str, cells: list[str]) -> list[int]:
    """The terminal column where each of `cells` (in order) starts in `line`."""
    found, at = [], 0
    for cell in cells:
        at = line.index(cell, at)
        found.append(width(line[:at]))
        at += len(cell)
    return found


@pytest.mark.usefixtures("grading")
def test_in_japanese_the_terminal_tables_stay_aligned(folder, tmp_path, monkeypatch):
    monkeypatch.setenv(i18n.VARIABLE, "ja")
    table = report.rows(folder)
    headings = report.headings()
    assert headings["run"] != "run"  # translated, characters of two columns
    lines = report.table_text(table).splitlines()
    shown = report._shown(table)
    columns = [starts(lines[0], [headings[c] for c in report.COLUMNS])] + [
        starts(line, [report._cell(row[c]) for c in report.COLUMNS])
        for line, row in zip(lines[1:], shown, strict=True)
    ]
    assert all(found == columns[0] for found in columns), "\n".join(lines)
    traced_run(tmp_path)
    [run] = model_parallel_report.traced(tmp_path)
    header, data, split = model_parallel_report.lines(run)[1:4]
    ends = [width(line[: line.index("  （")]) for line in (data, split)]  # the numbers' end
    assert ends == [width(header)] * 2, (header, data, split)

"""The translation catalogs: what is marked for translation, how it is extracted, and how a
language's catalogs follow the English source.

Two catalogs per language, both gettext PO files under course/locale/<lang>/LC_MESSAGES/:
`course.po` holds the messages of the modules in MARKED (`_()` calls, found by Babel's Python
extractor), which course.i18n loads at run time; `notebooks.po` holds the markdown of the source
notebooks, split into segments (paragraphs; a fenced code block is never translated) each keyed by
its context "<notebook>:<cell id>:<segment index>", and the comments and echoed messages of the
job scripts, keyed "jobs/<script>:<index>" (course.instructor.i18n_jobs); i18n_release reads it.

`update` merges freshly extracted templates into a language's catalogs with msgmerge's semantics
(Babel's Catalog.update): an English text that changed keeps its old translation but turns fuzzy,
a new one comes empty, a removed one becomes obsolete. Fuzzy and empty entries are never shipped.
"""

from __future__ import annotations

import io
import json
import re
import string
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from babel.messages import extract, pofile
from babel.messages.catalog import Catalog

from course import i18n, paths
from course.cluster import sites
from course.contracts import stages
from course.fileio import atomic_file
from course.instructor import i18n_code, i18n_jobs

# The modules whose student-facing messages go through `_()` (tests/test_i18n_lint.py checks that
# every message of theirs does). The rest of the kit is marked as the edition grows (issue 23).
MARKED = (
    "course/notebook/checks/verdict.py",
    "course/notebook/checks/observe.py",
    "course/lessons/core/trainers.py",
    "course/lessons/core/single.py",
    "course/lessons/core/single_snapshots.py",
    "course/diagnostics/doctor.py",
    "course/instructor/bundle_texts.py",
    "course/lessons/exchange/exchange.py",
    "course/lessons/exchange/exchange_mistakes.py",
    "course/lessons/exchange/exchange_observers.py",
    "course/lessons/exchange/exchange_scaling.py",
    "course/lessons/exchange/exchange_scaling_mistakes.py",
    "course/lessons/accuracy/large_batch.py",
    "course/lessons/accuracy/large_batch_observers.py",
    "course/lessons/beyond/model_parallel.py",
    "course/lessons/beyond/model_parallel_observers.py",
    "course/lessons/run_part/checks.py",
    "course/lessons/run_part/observers.py",
    "course/notebook/checks/prediction_words.py",
    "course/notebook/checks/predictions.py",
    "course/lessons/step_time/scaling.py",
    "course/lessons/step_time/scaling_mistakes.py",
    "course/lessons/step_time/scaling_observers.py",
    "course/lessons/step_time/allreduce.py",
    "course/lessons/step_time/allreduce_mistakes.py",
    "course/lessons/step_time/allreduce_observers.py",
    "course/notebook/report.py",
    "course/notebook/report_plots.py",
    "course/lessons/step_time/allreduce_report.py",
    "course/lessons/exchange/exchange_report.py",
    "course/lessons/beyond/model_parallel_report.py",
    "course/lessons/accuracy/large_batch_reference.py",
    "course/lessons/exchange/scaling_report.py",
    "course/lessons/step_time/profile_report.py",
    "course/lessons/step_time/allreduce_judge.py",
    "course/lessons/run_part/placement.py",
    "course/lessons/run_part/one_node.py",
    "course/notebook/handin.py",
    "course/notebook/handin_command.py",
    "course/notebook/handin_submit.py",
    "course/notebook/scripts.py",
    "course/notebook/setup.py",
    "course/lessons/run_part/directives.py",
    "course/cluster/diagnosis.py",
    "course/cluster/pending.py",
    "course/cluster/submit.py",
    "course/cluster/submit_command.py",
    "course/cluster/job.py",
    "course/cluster/launch.py",
    "course/cluster/localsched.py",
    "course/cluster/usage.py",
    "course/evidence.py",
    "course/prediction_evidence.py",
    "course/comparison.py",
    "course/instructor/scoring.py",
    "course/instructor/scoring_accuracy.py",
    "course/instructor/scoring_runs.py",
    "course/runtime/harness.py",
    "course/runtime/checkpoint.py",
    "course/runtime/snapshot_integrity.py",
    "course/runtime/watchdog.py",
    "course/runtime/data.py",
    "course/lessons/core/multi_gpu.py",
    "course/lessons/core/multi_gpu_observers.py",
    "course/lessons/core/multi_node.py",
    "course/lessons/core/mn_local.py",
    "course/lessons/core/mn_ranks.py",
    "course/lessons/core/mn_observers.py",
    "course/notebook/checks/inputs.py",
    "course/cluster/pbs.py",
    "course/cluster/accounting.py",
    "course/cluster/mpi.py",
    "course/cluster/hosts.py",
    "course/cluster/plan.py",
    "course/cluster/staging.py",
    "course/cluster/supervisor.py",
    "course/cluster/sites.py",
    "course/cluster/siteenv.py",
    "course/cluster/profile_schema.py",
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
    "course/evidence_run.py",
    "course/notebook/report_rules.py",
    "course/notebook/report_checks.py",
    "course/lessons/step_time/allreduce_series.py",
    "course/lessons/step_time/allreduce_plot.py",
    "course/lessons/step_time/allreduce_model.py",
    "course/lessons/core/mn_training.py",
    "course/notebook/checks/prediction_counts.py",
    "course/instructor/verify.py",
    "course/instructor/submission_files.py",
    "course/instructor/verify_test.py",
    "course/instructor/verify_worker.py",
    "course/instructor/verify_protocol.py",
    "course/instructor/verify_functions.py",
    "course/instructor/nbgrader_hook.py",
    "course/instructor/always_hidden.py",
    "course/instructor/feedback_page.py",
    "course/contracts/benchmark.py",
    "course/contracts/grading_rules.py",
    "course/contracts/config_keys.py",
    "course/contracts/lessons.py",
    "course/lessons/step_time/costmodel.py",
    "course/lessons/exchange/exchangemodel.py",
)
# The notebooks whose markdown, docstrings and comments are in the catalogs: every lesson's.
NOTEBOOKS = stages.NOTEBOOKS
# The markdown files of the assignment (a student reads them beside the notebooks).
DOCUMENTS = ("README.md",)
# The stubs nbgrader leaves for a solution and a written answer (nbgrader_config.py), translated.
STUB_KEY, TEXT_STUB_KEY = "nbgrader:code_stub", "nbgrader:text_stub"
PYTHON_DOMAIN, NOTEBOOK_DOMAIN = i18n.DOMAIN, "notebooks"
# The marks Babel extracts: `_()`, translated at once, and `N_()`, translated later (i18n.N_).
KEYWORDS = {"_": None, "N_": None}
PROJECT = "chainer-course-kit"
_FENCE = re.compile(r"^\s*(```|~~~)")
_CODE_SPAN = re.compile(r"`[^`]+`")  # markdown lets a code span run over a line break
# Words a translation keeps as they are: the stub's token that messages and stubs refer to.
KEPT = ("PUT YOUR CODE HERE",)
# English code spans of what the kit prints translated: a translation quotes its edition's instead.
PRINTED = ("`course: profile rank R on HOST: data ... ms | forward ...`", "`setting`", "`scaling`")


@dataclass(frozen=True)
class Block:
    """A piece of a markdown cell: `text`, whether it is translated, and the blank lines after."""

    text: str
    translated: bool
    after: str


def blocks(markdown: str) -> list[Block]:
    """`markdown` cut at its blank lines (never inside a fenced code block); joined with their
    `after` separators, the blocks give `markdown` back exactly."""
    lines = markdown.split("\n")
    found: list[Block] = []
    current: list[str] = []
    fenced = in_fence = False
    i = 0
    while i < len(lines):
        line = lines[i]
        if _FENCE.match(line):
            in_fence = not in_fence
            fenced = True
        if not in_fence and not line.strip() and current:
            blank = []
            while i < len(lines) and not lines[i].strip():
                blank.append(lines[i])
                i += 1
            # the last content line's newline, then each blank line's (the text's last has none)
            after = "\n" + (
                "\n".join(blank) if i == len(lines) else "".join(b + "\n" for b in blank)
            )
            found.append(Block("\n".join(current), not (fenced or _indented(current)), after))
            current, fenced = [], False
            continue
        current.append(line)
        i += 1
    if current or not found:
        words = any(line.strip() for line in current) and not (fenced or _indented(current))
        found.append(Block("\n".join(current), words, ""))
    return found


def _indented(lines: list[str]) -> bool:
    """Whether `lines` are an indented code block (every line four spaces or a tab in)."""
    return all(line.startswith(("    ", "\t")) for line in lines)


def segment_key(notebook: str, cell_id: str, index: int) -> str:
    """The context that keys a notebook segment in the catalog."""
    return f"{notebook}:{cell_id}:{index}"


def prose_cell(cell: dict) -> bool:
    """Whether a translation covers the markdown cell `cell`: all but the answer cells (their source
    text is the instructor's model answer; students see nbgrader's placeholder)."""
    return cell["cell_type"] == "markdown" and not cell["metadata"].get("nbgrader", {}).get(
        "solution"
    )


def translated_cells(notebook: dict) -> Iterator[dict]:
    """The markdown cells of a source notebook that a translation covers."""
    return (cell for cell in notebook["cells"] if prose_cell(cell))


def code_key(notebook: str, cell_id: str, index: int) -> str:
    """The context that keys a docstring or comment of a code cell in the catalog."""
    return f"{notebook}:{cell_id}:code{index}"


def markdown_segments(
    name: str, text: str, cell_id: str | None = None
) -> Iterator[tuple[str, str]]:
    """(context, English text) of every translated segment of markdown `text` (a cell's, or a
    whole file's: then keyed by the file `name` alone)."""
    translatable = [b for b in blocks(text) if b.translated]
    for index, block in enumerate(translatable):
        key = segment_key(name, cell_id, index) if cell_id else f"{name}:{index}"
        yield key, block.text


def segments(name: str, notebook: dict) -> Iterator[tuple[str, str]]:
    """(context, English text) of every translated segment of the notebook `name`: its markdown,
    then the docstrings and comments of each code cell."""
    for cell in notebook["cells"]:
        if prose_cell(cell):
            yield from markdown_segments(name, "".join(cell["source"]), cell["id"])
        elif cell["cell_type"] == "code":
            for index, piece in enumerate(i18n_code.pieces("".join(cell["source"]))):
                yield code_key(name, cell["id"], index), piece.text


def _catalog(domain: str, lang: str | None = None) -> Catalog:
    return Catalog(locale=lang, domain=domain, project=PROJECT, charset="utf-8", fuzzy=False)


def python_template(root: Path) -> Catalog:
    """The template of `course.po`: every `_()` message of the MARKED modules, with where it is."""
    template = _catalog(PYTHON_DOMAIN)
    for module in MARKED:
        for lineno, message, comments, context in extract.extract_from_file(
            "python", root / module, keywords=KEYWORDS, comment_tags=("TRANSLATORS:",)
        ):
            template.add(
                message, locations=[(module, lineno)], auto_comments=comments, context=context
            )
    return template


def notebook_template(root: Path, names: tuple[str, ...] = NOTEBOOKS) -> Catalog:
    """The template of `notebooks.po`: every translated segment of the notebooks `names`, of
    the assignment's README and of the job scripts (course.instructor.i18n_jobs)."""
    template = _catalog(NOTEBOOK_DOMAIN)
    source = root / "solutions" / paths.ASSIGNMENT
    for name in names:
        notebook = json.loads((source / name).read_text())
        for context, text in segments(name, notebook):
            template.add(text, context=context, locations=[(f"solutions/{name}", 0)])
    for name in DOCUMENTS:
        for context, text in markdown_segments(name, (source / name).read_text()):
            template.add(text, context=context, locations=[(f"solutions/{name}", 0)])
    for script in sites.job_scripts(root / paths.JOBS_DIR):
        where = [(f"{paths.JOBS_DIR}/{script.name}", 0)]
        for segment in i18n_jobs.segments(script.name, script.read_text(encoding="utf-8")):
            shown = [f"then the command: {segment.command}"] if segment.command else []
            template.add(
                segment.piece.text, context=segment.context, locations=where, auto_comments=shown
            )
    template.add(i18n_code.STUB, context=STUB_KEY, locations=[("nbgrader_config.py", 0)])
    template.add(i18n_code.TEXT_STUB, context=TEXT_STUB_KEY, locations=[("nbgrader_config.py", 0)])
    return template


def locale_dir(root: Path) -> Path:
    """The locale folder of the kit checkout at `root`."""
    return root / "course" / "locale"


def read(path: Path) -> Catalog:
    with open(path, "rb") as f:
        return pofile.read_po(f)


def write(catalog: Catalog, path: Path) -> None:
    """Write a PO file atomically (a translator's work is never left half written)."""
    buffer = io.BytesIO()
    pofile.write_po(buffer, catalog, width=100, include_previous=True, include_lineno=False)
    with atomic_file(path) as f:
        f.write(buffer.getvalue())


def merged(existing: Catalog | None, template: Catalog, lang: str) -> Catalog:
    """`template` merged into `existing` (msgmerge's semantics; obsolete entries dropped)."""
    catalog = existing if existing is not None else _catalog(template.domain or "", lang)
    catalog.update(template, update_creation_date=False)
    catalog.obsolete.clear()
    return catalog


def update(root: Path, lang: str) -> dict[str, Path]:
    """Re-extract both templates and merge them into `lang`'s catalogs; {domain: path}."""
    written = {}
    for template in (python_template(root), notebook_template(root)):
        domain = template.domain or ""
        path = i18n.catalog_path(lang, domain, locale_dir(root))
        existing = read(path) if path.is_file() else None
        write(merged(existing, template, lang), path)
        written[domain] = path
    return written


@dataclass(frozen=True)
class Count:
    entries: int
    translated: int
    fuzzy: int
    empty: int


def entries(catalog: Catalog) -> list:
    """The catalog's messages, without the header."""
    return [m for m in catalog if m.id]


def count(catalog: Catalog) -> Count:
    found = entries(catalog)
    fuzzy = sum(1 for m in found if m.fuzzy)
    empty = sum(1 for m in found if not m.string)
    return Count(len(found), len(found) - fuzzy - empty, fuzzy, empty)


def fields(text: str) -> list[str]:
    """The named placeholders of a message, sorted (str.format's own parser reads them)."""
    return sorted(name for _, name, _, _ in string.Formatter().parse(text) if name is not None)


def kept_parts(text: str) -> list[str]:
    """What a translation must keep as it is (it may repeat them): code spans and the stub's
    token, sorted."""
    return sorted({*_CODE_SPAN.findall(text), *(k for k in KEPT if k in text)})


def problems(catalog: Catalog) -> list[str]:
    """Translated entries whose placeholders or kept parts differ from their English."""
    found = []
    for message in entries(catalog):
        if not message.string or message.fuzzy:
            continue
        where = message.context or message.id[:50]
        english_fields, said_fields = fields(message.id), fields(message.string)
        if catalog.domain == PYTHON_DOMAIN and english_fields != said_fields:
            found.append(f"{where}: placeholders {said_fields}, not {english_fields}")
        english, said = kept_parts(message.id), kept_parts(message.string)
        kept = [part for part in said if part in english and part not in PRINTED]
        if [p for p in english if p not in PRINTED] != kept or len(said) > len(english):
            found.append(f"{where}: code spans differ from the English")
        if str(message.context).startswith(f"{paths.JOBS_DIR}/"):
            found += i18n_jobs.problems(message.context, message.id, message.string)
    return found

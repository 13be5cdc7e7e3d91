"""The Japanese edition's machinery (issue 23): the language setting, the catalogs (in step with
the English, complete, their placeholders and code intact, the glossary's terms used), msgmerge's
semantics on an English edit, and the Japanese notebooks built from solutions/ and the catalog."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from babel.messages.catalog import Catalog
from wcwidth import width

from course import i18n, paths
from course.cluster import sites
from course.diagnostics import doctor
from course.errors import CourseError
from course.instructor import i18n_catalog as cat
from course.instructor import i18n_code, i18n_jobs, i18n_release

ROOT = Path(__file__).resolve().parent.parent
JA = ROOT / "course" / "locale" / "ja"
SOURCE = ROOT / "solutions" / paths.ASSIGNMENT


def po(domain: str) -> Catalog:
    return cat.read(JA / "LC_MESSAGES" / f"{domain}.po")


def test_the_language_is_one_setting(monkeypatch):
    monkeypatch.delenv(i18n.VARIABLE, raising=False)
    assert i18n.language() == "en" and i18n._("needs CuPy") == "needs CuPy"
    monkeypatch.setenv(i18n.VARIABLE, "ja")
    assert i18n._("needs CuPy") == "CuPy が必要です"
    assert i18n._("a message nobody marked") == "a message nobody marked"
    monkeypatch.setenv(i18n.VARIABLE, "fr")
    with pytest.raises(CourseError, match="COURSE_LANG='fr' is not a language of the course"):
        i18n._("needs CuPy")


def test_fuzzy_and_empty_entries_are_never_shipped(tmp_path):
    catalog = Catalog(locale="ja", charset="utf-8")
    catalog.add("done", "済み")
    catalog.add("changed", "古い訳", flags=["fuzzy"])
    catalog.add("new")
    cat.write(catalog, tmp_path / "course.po")
    compiled = i18n.compiled(tmp_path / "course.po")
    assert [compiled.gettext(m) for m in ("done", "changed", "new")] == ["済み", "changed", "new"]


def test_an_english_edit_turns_its_translation_fuzzy():
    existing = Catalog(locale="ja", charset="utf-8")
    existing.add(
        "the trainer stops after {period} epochs", "トレーナは {period} エポックで止まります"
    )
    existing.add("kept as it was", "そのまま")
    existing.add("removed from the English", "消えた文")
    template = Catalog(charset="utf-8")
    template.add("the trainer stops after {period} epochs, not {epochs}")
    template.add("kept as it was")
    template.add("a brand new message")
    merged = cat.merged(existing, template, "ja")
    edited = merged.get("the trainer stops after {period} epochs, not {epochs}")
    assert edited.fuzzy and edited.string == "トレーナは {period} エポックで止まります"
    assert edited.previous_id == ["the trainer stops after {period} epochs"]
    assert not merged.get("kept as it was").fuzzy
    assert not merged.get("a brand new message").string
    assert merged.get("removed from the English") is None
    assert cat.count(merged) == cat.Count(entries=3, translated=1, fuzzy=1, empty=1)


def test_the_catalogs_follow_the_english_source():
    """`make i18n-update` was run after the last English edit of a marked message or notebook."""
    for template, domain in (
        (cat.python_template(ROOT), cat.PYTHON_DOMAIN),
        (cat.notebook_template(ROOT), cat.NOTEBOOK_DOMAIN),
    ):
        wanted = {(m.id, m.context) for m in cat.entries(template)}
        found = {(m.id, m.context) for m in cat.entries(po(domain))}
        assert wanted == found, (
            f"{domain}.po is not in step with the English: run  make i18n-update  "
            f"(missing {sorted(wanted - found)[:3]}, gone {sorted(found - wanted)[:3]})"
        )


@pytest.mark.parametrize("domain", [cat.PYTHON_DOMAIN, cat.NOTEBOOK_DOMAIN])
def test_the_japanese_catalogs_are_complete_and_keep_placeholders_and_code(domain):
    catalog = po(domain)
    counted = cat.count(catalog)
    assert counted.entries > 40 and counted.translated == counted.entries, counted
    assert not cat.problems(catalog), cat.problems(catalog)


def test_a_translation_that_drops_a_placeholder_or_code_is_found():
    catalog = Catalog(locale="ja", domain=cat.PYTHON_DOMAIN, charset="utf-8")
    catalog.add("{count} visible ({names})", "{count} 基")
    catalog.add("run `make venv` first", "まず make venv を実行")
    assert len(cat.problems(catalog)) == 2


def glossary() -> list[tuple[str, str, list[str]]]:
    """(English, Japanese, forms to avoid) of course/locale/ja/glossary.md's table."""
    rows = []
    for line in (JA / "glossary.md").read_text().splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0] not in ("English", "---"):
            avoid = [form.strip() for form in cells[2].split(",") if form.strip()]
            rows.append((cells[0], cells[1], avoid))
    return rows


# Code in an English text: spans in backticks, placeholders, and words with code's punctuation.
_CODE = re.compile(r"`[^`]*`|\{[^}]*\}|\S*[./_()<>=\[\]*]\S*")


def _english_term(term: str) -> re.Pattern:
    words = r"[ -]".join(map(re.escape, term.split()))
    # lower case as a word (plural too), or capitalised at the start of a markdown heading
    return re.compile(rf"(?<![\w-])(?:{words}|(?<=# ){words.capitalize()})(?:e?s)?(?![\w-])")


def test_the_glossary_is_followed():
    terms = glossary()
    assert len(terms) >= 30 and ("learning rate", "学習率", ["ラーニングレート"]) in terms
    broken = []
    for domain in (cat.PYTHON_DOMAIN, cat.NOTEBOOK_DOMAIN):
        for message in cat.entries(po(domain)):
            english = _CODE.sub(" ", message.id)
            for term, japanese, avoid in terms:
                if _english_term(term).search(english) and japanese not in message.string:
                    broken.append(f"{message.context or message.id[:40]}: {term} -> {japanese}")
                # a gloss at first use, in parentheses after the term, is no avoided form
                said = re.sub(rf"{japanese}（[^（）]*）", japanese, message.string)
                broken += [f"{message.id[:40]}: {form}" for form in avoid if form in said]
    assert not broken, "\n".join(broken)


@pytest.mark.parametrize("name", sorted(p.name for p in SOURCE.glob("*.ipynb")))
def test_markdown_segments_give_the_cell_back(name):
    for cell in json.loads((SOURCE / name).read_text())["cells"]:
        text = "".join(cell["source"])
        assert "".join(b.text + b.after for b in cat.blocks(text)) == text
    fenced = cat.blocks("Run:\n\n```\nqsub job.sh\n\nqstat\n```\n\n    make venv\n\nDone.")
    assert [(b.text[:3], b.translated) for b in fenced] == [
        ("Run", True),
        ("```", False),
        ("   ", False),
        ("Don", True),
    ]


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, Path]:
    """The Japanese source of the assignment, built from solutions/ and the catalog."""
    out = tmp_path_factory.mktemp("ja")
    return {path.name: path for path in i18n_release.build(ROOT, "ja", out)}


def english_back(notebook: dict, english: dict) -> dict:
    """The Japanese `notebook` with the English of each code cell's docstrings and comments put
    back, and its markdown cells left out: what must equal the English notebook's."""
    result = []
    for cell, source in zip(notebook["cells"], english["cells"], strict=True):
        if cat.prose_cell(cell):
            continue
        text = "".join(cell["source"])
        if cell["cell_type"] == "code":
            back = [p.text for p in i18n_code.pieces("".join(source["source"]))]
            text = i18n_code.translated(text, back)
        result.append((cell["id"], cell["cell_type"], cell["metadata"], text))
    return {"metadata": notebook["metadata"], "cells": result}


@pytest.mark.parametrize("name", cat.NOTEBOOKS)
def test_each_japanese_notebook_is_the_english_one_with_its_prose_translated(built, name):
    english = json.loads((SOURCE / name).read_text())
    japanese = json.loads(built[name].read_text(encoding="utf-8"))
    assert built[name].parent.name == "distributed_training_ja"
    # the code, cell ids, metadata (grade ids, points, hidden tests) and answer cells: the English
    assert english_back(japanese, english) == english_back(english, english)
    markdown = "".join("".join(c["source"]) for c in cat.translated_cells(japanese))
    prose = [p.text for c in japanese["cells"] for p in i18n_code.pieces("".join(c["source"]))]
    sentences = [s for s in re.split(r"(?<=[.:;])\s", markdown + " ".join(prose)) if s.strip()]
    english_left = [s for s in sentences if re.fullmatch(r"[A-Z][a-z]+( [a-z]+){5,}[.:;]", s)]
    assert not english_left, english_left[:3]
    assert re.search("[\u3040-\u30ff]", " ".join(prose) or "あ"), prose[:3]  # kana in the prose


def test_the_japanese_readme_and_stub(built, tmp_path):
    readme = built["README.md"].read_text(encoding="utf-8")
    assert "ノートブック" in readme and "`01_single_gpu.ipynb`" in readme
    config = i18n_release.nbgrader_config(ROOT, "ja")
    assert config.startswith((ROOT / "nbgrader_config.py").read_text())
    stub = config.rsplit("code_stub = ", 1)[1]
    assert "# PUT YOUR CODE HERE（" in stub and "raise NotImplementedError()" in stub
    assert "c.ClearSolutions.text_stub = 'ここに解答を書いてください。'" in config


def test_the_builder_refuses_while_an_entry_is_fuzzy_or_empty(tmp_path):
    root = tmp_path / "kit"
    shutil.copytree(SOURCE, root / "solutions" / paths.ASSIGNMENT)
    catalog = po(cat.NOTEBOOK_DOMAIN)
    first, second = cat.entries(catalog)[:2]
    first.flags.add("fuzzy")
    second.string = ""
    cat.write(catalog, root / "course" / "locale" / "ja" / "LC_MESSAGES" / "notebooks.po")
    with pytest.raises(i18n_release.CatalogIncomplete) as refused:
        i18n_release.build(root, "ja", tmp_path / "out")
    said = str(refused.value)
    assert "2 segments" in said and f"{first.context} (fuzzy)" in said
    assert f"{second.context} (empty)" in said
    assert not (tmp_path / "out").exists()


def test_the_builder_refuses_a_job_script_comment_that_is_fuzzy_empty_or_drops_code(tmp_path):
    root = tmp_path / "kit"
    shutil.copytree(SOURCE, root / "solutions" / paths.ASSIGNMENT)
    shutil.copytree(ROOT / paths.JOBS_DIR, root / paths.JOBS_DIR)
    catalog = po(cat.NOTEBOOK_DOMAIN)
    found = {m.context: m for m in cat.entries(catalog)}
    fuzzy, empty, broken = (
        found[f"jobs/{key}"]
        for key in (
            "run_single_gpu_training.sh:3",
            "run_model_parallel.sh:echo0",
            "run_multi_node_training.sh:3",
        )
    )
    fuzzy.flags.add("fuzzy")
    empty.string = ""
    broken.string = broken.string.replace("$COURSE_MPIEXEC", "MPI のランチャ")
    cat.write(catalog, root / "course" / "locale" / "ja" / "LC_MESSAGES" / "notebooks.po")
    with pytest.raises(i18n_release.CatalogIncomplete) as refused:
        i18n_release.build(root, "ja", tmp_path / "out", jobs=tmp_path / "jobs")
    said = str(refused.value)
    assert "3 segments" in said and f"{fuzzy.context} (fuzzy)" in said
    assert f"{empty.context} (empty)" in said
    assert f"{broken.context}: code words missing ($COURSE_MPIEXEC)" in said
    assert not (tmp_path / "out").exists() and not (tmp_path / "jobs").exists()


def test_the_prose_of_a_job_script_is_its_comments_and_fixed_messages():
    script = (
        "#!/bin/bash\n# What the job does:\n# on two lines.\n# Submit:  qsub -j oe jobs/x.sh\n"
        f"{sites.BEGIN}\n#PBS -l walltime=00:10:00\n# the site's\n{sites.END}\n"
        '[ -f x ] || { echo "submit from here"; exit 2; }\necho "not $fixed"\n'
        "if true; then\n    # indented\n    :\nfi\n# qsub -j oe jobs/x.sh\n"
        "# shellcheck disable=SC2086 # SIZES: one each\n"
    )
    found = i18n_jobs.segments("x.sh", script)
    assert [(s.context, s.piece.text) for s in found] == [
        ("jobs/x.sh:0", "What the job does:\non two lines."),
        ("jobs/x.sh:1", "Submit:"),
        ("jobs/x.sh:echo0", "submit from here"),
        ("jobs/x.sh:2", "indented"),
        ("jobs/x.sh:3", "SIZES: one each"),
    ]
    assert found[1].command == "qsub -j oe jobs/x.sh"
    japanese = [
        "ジョブの説明:\n2 行で。",
        "投入:",
        "ここから投入してください",
        "字下げ\nした行",
        "SIZES: 1 つずつ",
    ]
    text = i18n_jobs.translated("x.sh", script, japanese)
    assert text.startswith(
        "#!/bin/bash\n# ジョブの説明:\n# 2 行で。\n# 投入:    qsub -j oe jobs/x.sh\n"
    )
    assert (
        "    # 字下げ\n    # した行\n" in text and '{ echo "ここから投入してください"; exit' in text
    )
    assert text.endswith("# shellcheck disable=SC2086 # SIZES: 1 つずつ\n")
    assert i18n_jobs.translated("x.sh", script, [None] * len(found)) == script
    assert i18n_jobs.problems("jobs/x.sh:echo0", "from here", "「$HOME」から") == [
        "jobs/x.sh:echo0: an echoed message may not hold quotes, $, `, \\ or a line break"
    ]
    assert i18n_jobs.problems("jobs/x.sh:0", "SIZES (bytes) in runs/x/", "サイズ（バイト数）") == [
        "jobs/x.sh:0: code words missing (SIZES, runs/x/)"
    ]


def test_doctor_aligns_japanese_in_terminal_columns(monkeypatch):
    monkeypatch.setenv(i18n.VARIABLE, "ja")
    checks = [
        doctor.Check(doctor.OK, "MPI", "DETAIL1"),
        doctor.Check(doctor.NOT_HERE, i18n._("scheduler"), "DETAIL2", "fix"),
    ]
    lines = doctor.render(checks).splitlines()
    assert lines[0] == "course doctor: このマシンで動くもの"
    starts = [width(line[: line.index("DETAIL")]) for line in lines if "DETAIL" in line]
    assert starts == [len("  [ok] ") + width("スケジューラ") + 2] * 2, lines


def test_a_japanese_plot_draws_every_glyph(monkeypatch):
    """The report's plots in Japanese draw with the pinned IPAexGothic: matplotlib warns of no
    missing glyph (its own DejaVu Sans would show boxes)."""
    import warnings

    import matplotlib

    matplotlib.use("Agg")
    from course.lessons.exchange import exchange_report

    monkeypatch.setenv(i18n.VARIABLE, "ja")
    monkeypatch.setitem(matplotlib.rcParams, "font.family", ["DejaVu Sans"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "Glyph ... missing from font(s)" is a UserWarning
        figure = exchange_report.plot_by_workers(lambda p, n, a, b: a * p + b * n, 1e-5, 1e-9, 4096)
        figure.canvas.draw()
    assert re.search("[\u3040-\u30ff\u4e00-\u9fff]", figure.axes[0].get_xlabel())
    assert matplotlib.rcParams["font.family"] == ["IPAexGothic"]


def test_lists_in_a_sentence_are_joined_in_the_students_language(monkeypatch):
    monkeypatch.delenv(i18n.VARIABLE, raising=False)
    assert i18n.listed(["ring", "naive"]) == "ring, naive"
    assert i18n.listed(["a, b", "c"], "; ") == "a, b; c"
    monkeypatch.setenv(i18n.VARIABLE, "ja")
    assert i18n.listed(["ring", "naive"]) == "ring、naive"
    assert i18n.listed(["a、b", 3], "; ") == "a、b；3"
    from course.contracts import stages

    with pytest.raises(ValueError) as raised:  # a message that lists names, in Japanese
        stages.get("nope")
    assert "、".join(stages.NAMES) in str(raised.value) and ", " not in str(raised.value)

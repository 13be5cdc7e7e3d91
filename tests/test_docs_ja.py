"""The Japanese documents (README.ja.md, docs/grading.ja.md, docs/reference-logs/README.ja.md)
stay in step with the English ones they translate: the same commands, tables of the same shape, the
same numbers of points, and links that lead somewhere. Where the English names what the English
edition has or prints, the Japanese names what the Japanese edition has or prints (EDITION)."""

from __future__ import annotations

import re

import pytest

from tests.helpers import ROOT

# (Japanese document, the English one, the parts of it translated: (from, to) its lines)
DOCUMENTS = [
    ("README.ja.md", "README.md", [("# ", "## What is where")]),
    ("docs/reference-logs/README.ja.md", "docs/reference-logs/README.md", [("# ", None)]),
    (
        "docs/grading.ja.md",
        "docs/instructors.md",
        [
            ("## What is graded", "### Ideas of the sources, and where the course teaches them"),
            ("**Written answers (stages 1 and 3, notebooks 04 and 05), rubric.**", "## Grading"),
        ],
    ),
]
# (document, what its English says, what the Japanese edition has or prints instead)
EDITION = [
    ("README.ja.md", "`distributed_training`", "`distributed_training_ja`"),
    ("README.ja.md", "`notebooks/distributed_training/`", "`notebooks/distributed_training_ja/`"),
    (
        "README.ja.md",
        "cd notebooks/distributed_training\n",
        "cd notebooks/distributed_training_ja\n",
    ),
    (
        "docs/reference-logs/README.ja.md",
        "`NOT SUBMITTED: this machine has no GPU ...`",
        "`投入しませんでした: このマシンには GPU がなく、...`",
    ),
]
_FENCED = re.compile(r"^```.*?^```", re.M | re.S)
_SHELL_COMMENT = re.compile(r" {2,}# .*$", re.M)  # a comment after a command, in either language


def commands(text: str) -> list[str]:
    return [_SHELL_COMMENT.sub("", block) for block in _FENCED.findall(text)]


_LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def part(text: str, start: str, end: str | None) -> str:
    begin = text.index(start)
    return text[begin : text.index(end, begin) if end else len(text)]


def table_rows(text: str) -> list[int]:
    """The columns of each table row: what a translation keeps."""
    rows = []
    for line in text.splitlines():
        if line.startswith("|") and not set(line) <= set("|-: "):
            cells = line.strip().strip("|").split("|")
            rows.append(len(cells))
    return rows


@pytest.mark.parametrize("japanese,english,parts", DOCUMENTS)
def test_a_japanese_document_keeps_the_commands_tables_and_code_of_its_english(
    japanese, english, parts
):
    ja = (ROOT / japanese).read_text(encoding="utf-8")
    text = (ROOT / english).read_text()
    en = "".join(part(text, start, end) for start, end in parts)
    for document, english_says, edition_has in EDITION:
        if document == japanese:
            assert english_says in en, f"{english} no longer says {english_says}: update EDITION"
            assert english_says not in ja and edition_has in ja, (japanese, edition_has)
            en = en.replace(english_says, edition_has)
    assert re.search("[\u3040-\u30ff]", ja), f"{japanese} is not Japanese"
    assert commands(ja) == commands(en), "the commands must be the English ones"
    assert table_rows(ja) == table_rows(en), "the tables must keep their rows and columns"
    code = set(re.findall(r"`[^`\n]+`", en))
    missing = sorted(span for span in code if span not in ja)
    assert not missing, missing[:10]


@pytest.mark.parametrize("japanese", [d[0] for d in DOCUMENTS])
def test_every_link_of_a_japanese_document_leads_somewhere(japanese):
    path = ROOT / japanese
    broken = [
        target
        for target in _LINK.findall(path.read_text(encoding="utf-8"))
        if "://" not in target and not (path.parent / target).exists()
    ]
    assert not broken, broken

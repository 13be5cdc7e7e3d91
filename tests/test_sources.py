"""The documents the course is built from are cited by author and title (docs/sources.md), never as
"the seeds": in this kit a seed is a random seed."""

from __future__ import annotations

import re

from tests.helpers import ROOT

# What a reader sees: the notebooks, the docs, the kit's messages and settings.
READ = ("solutions", "notebooks", "docs", "course", "sites", "datasets", "jobs", "tools")
FILES = ("README.md", "grading.toml", "nbgrader_config.py")
CALLED_SEEDS = re.compile(
    r"\bseed (hands-on|paper|study|document)|\bseed's\b|\bseeds' (papers?|hands-on|slides)|"
    r"\b(in|of|from) the seeds\b|\(the seeds\)",
    re.IGNORECASE,
)
SHORT_NAMES = (
    "the 2018 Reedbush-H hands-on",
    "ChainerMN's announcement",
    "Hanawa's report",
    "the Fujitsu study",
    "the Nagoya study",
)


def read_files():
    for top in READ:
        for path in sorted((ROOT / top).rglob("*")):
            if path.suffix in {".md", ".py", ".ipynb", ".toml", ".sh", ".txt"} and path.is_file():
                yield path
    for name in FILES:
        yield ROOT / name


def test_no_reader_sees_the_sources_called_seeds():
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()[:100]}"
        for path in read_files()
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
        if CALLED_SEEDS.search(line)
    ]
    assert not found, "cite the source by its short name in docs/sources.md:\n" + "\n".join(found)


def test_sources_name_every_document_with_its_authors_and_title():
    text = (ROOT / "docs" / "sources.md").read_text()
    rows = [line for line in text.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert [row.split(" | ")[0].removeprefix("| ") for row in rows] == list(SHORT_NAMES)
    for row in rows:
        authors_and_title = row.split(" | ")[1]
        assert '"' in authors_and_title, f"no title in quotes: {row[:80]}"
    assert "docs/sources.md" in (ROOT / "README.md").read_text()

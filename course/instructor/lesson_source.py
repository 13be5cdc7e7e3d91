"""The nbgrader source of the lessons an instructor chose (course.toml): each edition's source
notebooks of the chosen lessons only, and its README listing only them. The release and grading
both generate the assignment from it, so what students get and what is graded are the same
notebooks (nbgrader's gradebook holds the notebooks of the source it was generated from).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from course import i18n, paths
from course.contracts import lessons
from course.instructor import i18n_catalog, i18n_release

# A README's list item that opens a notebook: "3. `03_multi_node.ipynb`: ..." (both editions)
_ITEM = re.compile(r"^(\d+)\. `([^`]+\.ipynb)`")


def readme_of(text: str, notebooks: tuple[str, ...]) -> str:
    """A release README's text with the numbered items of notebooks not in `notebooks` left out
    (each item with its indented lines) and the others numbered again. Markdown by hand: the
    README's list is plain lines, and a Markdown library would rewrite the rest of the file."""
    kept: list[str] = []
    dropping, number = False, 0
    for line in text.splitlines(keepends=True):
        item = _ITEM.match(line)
        if item:
            dropping = item.group(2) not in notebooks
            if not dropping:
                number += 1
                line = f"{number}." + line[item.end(1) + 1 :]
        elif not line.startswith((" ", "\t")) or not line.strip():
            dropping = False
        if not dropping:
            kept.append(line)
    return "".join(kept)


def build(
    root: Path, lang: str, out: Path, choice: lessons.Choice, jobs: Path | None = None
) -> Path:
    """Write the edition `lang`'s source of the `choice` to `out`/<its assignment> (the
    translated edition built from root's English source and catalogs, with `jobs` its job
    scripts too); its folder."""
    folder = out / i18n_release.assignment(lang)
    if lang == i18n.DEFAULT:
        english = root / "solutions" / paths.ASSIGNMENT
        folder.mkdir(parents=True, exist_ok=True)
        for name in (*choice.notebooks, *i18n_catalog.DOCUMENTS):
            shutil.copy2(english / name, folder / name)
    else:
        i18n_release.build(root, lang, out, names=choice.notebooks, jobs=jobs)
    for name in i18n_catalog.DOCUMENTS:
        path = folder / name
        path.write_text(readme_of(path.read_text(encoding="utf-8"), choice.notebooks), "utf-8")
    return folder

"""The source notebooks of another language's edition, built from the English solutions/ and the
language's `notebooks.po`: each translated markdown segment replaced by its translation, every
other part of the notebook (code cells, cell ids, nbgrader metadata: grade ids, points, hidden
tests; the answer cells' model answers) kept byte for byte. The result is its own nbgrader
assignment (`distributed_training_ja`): nbgrader restores locked cells from the gradebook of the
assignment they were released in, so the two editions cannot share one.

The builder refuses while an entry it needs is fuzzy (its English changed since it was translated)
or empty, and names them: a Japanese notebook never shows a stale or missing paragraph.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

from babel.messages.catalog import Catalog

from course import paths
from course.errors import CourseError
from course.fileio import atomic_file
from course.instructor import i18n_catalog as cat


def assignment(lang: str) -> str:
    """The nbgrader assignment of an edition: the English one's name, then `_<lang>`."""
    return paths.ASSIGNMENT if lang == "en" else f"{paths.ASSIGNMENT}_{lang}"


class CatalogIncomplete(CourseError):
    """An edition cannot be built: entries it needs are untranslated or fuzzy."""


def _split_source(text: str) -> list[str]:
    """A notebook cell's source as nbformat stores it on disk: lines, each with its newline."""
    return text.splitlines(keepends=True)


def translate_notebook(name: str, notebook: dict, catalog: Catalog) -> tuple[dict, list[str]]:
    """(the notebook with its markdown translated, the contexts of the segments that could not
    be: missing, empty or fuzzy)."""
    result = copy.deepcopy(notebook)
    wanting: list[str] = []
    by_id = {cell["id"]: cell for cell in cat.translated_cells(result)}
    for cell_id, cell in by_id.items():
        pieces = []
        index = 0
        for block in cat.blocks("".join(cell["source"])):
            text = block.text
            if block.translated:
                key = cat.segment_key(name, cell_id, index)
                index += 1
                message = catalog.get(block.text, context=key)
                if message is None or not message.string or message.fuzzy:
                    state = "missing" if message is None else "fuzzy" if message.fuzzy else "empty"
                    wanting.append(f"{key} ({state}): {block.text[:60]!r}")
                else:
                    text = str(message.string)
            pieces.append(text + block.after)
        cell["source"] = _split_source("".join(pieces))
    return result, wanting


def build(root: Path, lang: str, out: Path, names: tuple[str, ...] = cat.NOTEBOOKS) -> list[Path]:
    """Write the edition `lang` of the notebooks `names` to `out`/<assignment>/; the paths
    written. CatalogIncomplete, naming every entry that is wanting, before anything is written."""
    catalog_path = root / "course" / "locale" / lang / "LC_MESSAGES" / f"{cat.NOTEBOOK_DOMAIN}.po"
    if not catalog_path.is_file():
        raise CourseError(
            f"no notebook catalog for {lang}: {catalog_path} is missing",
            f"run  python -m course i18n update --lang {lang}  and translate it",
        )
    catalog = cat.read(catalog_path)
    built, wanting = [], []
    for name in names:
        source = root / "solutions" / paths.ASSIGNMENT / name
        notebook = json.loads(source.read_text(encoding="utf-8"))
        translated, missing = translate_notebook(name, notebook, catalog)
        built.append((name, translated))
        wanting += missing
    if wanting:
        shown = "\n  ".join(wanting[:20])
        more = f"\n  ... and {len(wanting) - 20} more" if len(wanting) > 20 else ""
        raise CatalogIncomplete(
            f"the {lang} edition cannot be built: {len(wanting)} segments are not translated "
            f"or are fuzzy in {catalog_path}:\n  {shown}{more}",
            "translate them (a fuzzy entry's English changed: check the translation, then "
            "remove its fuzzy flag), then build again",
        )
    folder = out / assignment(lang)
    written = []
    for name, notebook in built:
        path = folder / name
        with atomic_file(path) as f:
            f.write((json.dumps(notebook, indent=1, ensure_ascii=False) + "\n").encode())
        written.append(path)
    return written

"""The source notebooks of another language's edition, built from the English solutions/ and the
language's `notebooks.po`: each translated markdown segment replaced by its translation, every
other part of the notebook (code cells, cell ids, nbgrader metadata: grade ids, points, hidden
tests; the answer cells' model answers) kept byte for byte. The result is its own nbgrader
assignment (`distributed_training_ja`): nbgrader restores locked cells from the gradebook of the
assignment they were released in, so the two editions cannot share one. For its release, the job
scripts too: their comments translated (course.instructor.i18n_jobs), every command kept as it is.

The builder refuses while an entry it needs is fuzzy (its English changed since it was translated)
or empty, and names them: a Japanese notebook or job script never shows a stale or missing
paragraph.
"""

from __future__ import annotations

import copy
import json
import shutil
from dataclasses import replace
from pathlib import Path

from babel.messages.catalog import Catalog

from course import i18n, paths
from course.cluster import siteenv, sites
from course.errors import CourseError
from course.fileio import atomic_file
from course.i18n import assignment  # the editions' names, for the release's callers
from course.instructor import i18n_catalog as cat
from course.instructor import i18n_code, i18n_jobs

_HOW = (
    "translate them (a fuzzy entry's English changed: check the translation, then remove its "
    "fuzzy flag), then build again"
)


def _catalog_path(root: Path, lang: str) -> Path:
    """The notebook catalog of `lang` in the kit checkout at `root`; in a course folder that is
    not a checkout (no course/locale there), the installed kit's."""
    here = cat.locale_dir(root)
    return i18n.catalog_path(lang, cat.NOTEBOOK_DOMAIN, here if here.is_dir() else i18n.LOCALE_DIR)


class CatalogIncomplete(CourseError):
    """An edition cannot be built: entries it needs are untranslated or fuzzy."""


def _split_source(text: str) -> list[str]:
    """A notebook cell's source as nbformat stores it on disk: lines, each with its newline."""
    return text.splitlines(keepends=True)


def _translation(catalog: Catalog, key: str, english: str, wanting: list[str]) -> str | None:
    """The shippable translation of `english` keyed `key`; None (told to `wanting`) if none."""
    message = catalog.get(english, context=key)
    if message is None or not message.string or message.fuzzy:
        state = "missing" if message is None else "fuzzy" if message.fuzzy else "empty"
        wanting.append(f"{key} ({state}): {english[:60]!r}")
        return None
    return str(message.string)


def translate_markdown(
    name: str, text: str, catalog: Catalog, wanting: list[str], cell_id: str | None = None
) -> str:
    """Markdown `text` with each translated segment replaced (keys as in i18n_catalog)."""
    keys = iter(key for key, _ in cat.markdown_segments(name, text, cell_id))
    pieces = []
    for block in cat.blocks(text):
        translation = None
        if block.translated:
            translation = _translation(catalog, next(keys), block.text, wanting)
        pieces.append((translation or block.text) + block.after)
    return "".join(pieces)


def translate_notebook(name: str, notebook: dict, catalog: Catalog) -> tuple[dict, list[str]]:
    """(the notebook with its markdown, docstrings and comments translated, the contexts of the
    segments that could not be: missing, empty or fuzzy)."""
    result = copy.deepcopy(notebook)
    wanting: list[str] = []
    for cell in result["cells"]:
        source = "".join(cell["source"])
        if cat.prose_cell(cell):
            source = translate_markdown(name, source, catalog, wanting, cell["id"])
        elif cell["cell_type"] == "code":
            translations = [
                _translation(catalog, cat.code_key(name, cell["id"], index), piece.text, wanting)
                for index, piece in enumerate(i18n_code.pieces(source))
            ]
            source = i18n_code.translated(source, translations)
        cell["source"] = _split_source(source)
    return result, wanting


def translate_script(name: str, script: str, catalog: Catalog, wanting: list[str]) -> str:
    """The job script `name` (its text `script`) with its comments and echoed messages translated;
    a translation that drops code or that the shell would expand is wanting too."""
    translations = []
    for segment in i18n_jobs.segments(name, script):
        english = segment.piece.text
        translation = _translation(catalog, segment.context, english, wanting)
        found = i18n_jobs.problems(segment.context, english, translation) if translation else []
        wanting += found
        translations.append(None if found else translation)
    return i18n_jobs.translated(name, script, translations)


def code_stub(catalog: Catalog, wanting: list[str]) -> str:
    """nbgrader's code_stub in the edition's language (nbgrader_config.py's, its comment
    translated)."""
    comment = _translation(catalog, cat.STUB_KEY, i18n_code.STUB, wanting) or i18n_code.STUB
    return f"# {comment}\nraise NotImplementedError()"


def text_stub(catalog: Catalog, wanting: list[str]) -> str:
    """nbgrader's text_stub (a written answer's cell in the release) in the edition's language."""
    return (
        _translation(catalog, cat.TEXT_STUB_KEY, i18n_code.TEXT_STUB, wanting)
        or i18n_code.TEXT_STUB
    )


def build(
    root: Path,
    lang: str,
    out: Path,
    names: tuple[str, ...] = cat.NOTEBOOKS,
    jobs: Path | None = None,
) -> list[Path]:
    """Write the edition `lang` of the notebooks `names` to `out`/<assignment>/, and with `jobs`
    root's jobs/ there, its scripts translated (site_env.sh too); the paths written.
    CatalogIncomplete, naming every entry that is wanting, before anything is written."""
    catalog_path = _catalog_path(root, lang)
    if not catalog_path.is_file():
        raise CourseError(
            f"no notebook catalog for {lang}: {catalog_path} is missing",
            f"run  python -m course i18n update --lang {lang}  and translate it",
        )
    catalog = cat.read(catalog_path)
    source = root / "solutions" / paths.ASSIGNMENT
    built: list[tuple[str, str]] = []
    wanting: list[str] = []
    for name in names:
        notebook = json.loads((source / name).read_text(encoding="utf-8"))
        translated, missing = translate_notebook(name, notebook, catalog)
        built.append((name, json.dumps(translated, indent=1, ensure_ascii=False) + "\n"))
        wanting += missing
    for name in cat.DOCUMENTS:
        text = (source / name).read_text(encoding="utf-8")
        built.append((name, translate_markdown(name, text, catalog, wanting)))
    scripts = []
    for script in sites.job_scripts(root / paths.JOBS_DIR) if jobs is not None else []:
        text = translate_script(script.name, script.read_text(encoding="utf-8"), catalog, wanting)
        scripts.append((script, text))
    code_stub(catalog, wanting)  # nbgrader_config() writes them: they must be translated too
    text_stub(catalog, wanting)
    if wanting:
        shown = "\n  ".join(wanting[:20])
        more = f"\n  ... and {len(wanting) - 20} more" if len(wanting) > 20 else ""
        raise CatalogIncomplete(
            f"the {lang} edition cannot be built: {len(wanting)} segments are not translated, "
            f"are fuzzy or drop code in {catalog_path}:\n  {shown}{more}",
            _HOW,
        )
    folder = out / assignment(lang)
    written = []
    for name, text in built:
        path = folder / name
        with atomic_file(path) as f:
            f.write(text.encode())
        written.append(path)
    if jobs is not None:
        jobs.mkdir(parents=True, exist_ok=True)
        for script, text in scripts:
            with atomic_file(jobs / script.name) as f:
                f.write(text.encode())
            shutil.copymode(script, jobs / script.name)  # executable, as the English
            written.append(jobs / script.name)
        with atomic_file(jobs / siteenv.FILE) as f:
            f.write(site_env(root, lang).encode())
        written.append(jobs / siteenv.FILE)
    return written


def site_env(root: Path, lang: str) -> str:
    """root's jobs/site_env.sh for the edition `lang`: its comments in that language, and its
    jobs' COURSE_LANG; CourseError if the file holds more than `course site apply` writes (what
    this rewrites would lose it)."""
    path = root / paths.JOBS_DIR / siteenv.FILE
    english = path.read_text(encoding="utf-8")
    settings = siteenv.SiteSettings.from_shell(english)
    if siteenv.without_comments(settings.to_shell()) != siteenv.without_comments(english):
        raise CourseError(
            f"{path} is not what `course site apply` writes: the {lang} edition cannot carry it",
            "apply the site's profile again (python -m course site apply NAME)",
        )
    return replace(settings, language=lang).to_shell()


def nbgrader_config(root: Path, lang: str) -> str:
    """The nbgrader_config.py of the edition `lang`: the kit's own, whose stubs (a code cell's
    comment, a written answer's text) speak the edition's language (a student's `# PUT YOUR
    CODE HERE` keeps its English words beside it)."""
    wanting: list[str] = []
    catalog = cat.read(_catalog_path(root, lang))
    stub, text = code_stub(catalog, wanting), text_stub(catalog, wanting)
    if wanting:
        raise CatalogIncomplete(f"the {lang} stub is not translated: {wanting[0]}", _HOW)
    english = (root / "nbgrader_config.py").read_text(encoding="utf-8")
    override = (
        f"c.ClearSolutions.code_stub = {{'python': {stub!r}}}\n"
        f"c.ClearSolutions.text_stub = {text!r}"
    )
    return f"{english}\n# The {lang} edition's stubs.\n{override}\n"

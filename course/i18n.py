"""The language a student reads: one setting, COURSE_LANG (`en`, the default, or `ja`), read here
only, and `_()`, which translates a message through the gettext catalog of that language. Where
COURSE_LANG is unset, a student bundle's own edition speaks (the file EDITION_FILE, which `course
bundle` writes into the bundle's copy of this package): the Japanese bundle's kernels, terminal
commands and jobs are Japanese without the student setting anything.

Messages are marked `_("... {ranks} ranks ...").format(ranks=n)`: named placeholders, filled after
translation (a translator may reorder them; an f-string inside `_()` could never be looked up).
The catalog `course/locale/<lang>/LC_MESSAGES/course.po` is the only form committed: it is compiled
in memory the first time a language is used (Babel's own compiler, a few milliseconds), so no
binary `.mo` can go stale beside its source or need a build step on a student's machine. Fuzzy and
untranslated entries are dropped then: English shows instead of a guess.

The lines the kit writes for machines (course/contracts/joblog.py's protocol lines) never go
through `_()`: they stay English whatever the language.
"""

from __future__ import annotations

import functools
import gettext
import importlib.util
import io
import os
import string
from collections.abc import Iterable
from pathlib import Path

from course import paths
from course.contracts.message import Message, Record, catalog_message, joined
from course.errors import CourseError

VARIABLE = "COURSE_LANG"
DEFAULT = "en"
LANGUAGES = ("en", "ja")
# A test-only locale: every translated line wrapped in markers, so that a line without them is one
# that never went through `_()` (tests/test_i18n_pseudo.py).
PSEUDO = "qps"
MARK_OPEN, MARK_CLOSE = "\u27e6", "\u27e7"  # ⟦ ⟧: no message of the kit uses them
LOCALE_DIR = Path(__file__).resolve().parent / "locale"
DOMAIN = "course"
# In a student bundle's copy of the package: the language of its edition (absent in the kit).
EDITION_FILE = Path(__file__).resolve().parent / "edition_language"


def edition() -> str:
    """The language of the student bundle this package belongs to; `` in the kit itself."""
    try:
        return EDITION_FILE.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return ""


def language() -> str:
    """The language of COURSE_LANG, else of the bundle's edition, else `en`; CourseError for a
    language the course does not have."""
    lang = os.environ.get(VARIABLE, "").strip() or edition() or DEFAULT
    if lang not in (*LANGUAGES, PSEUDO):
        raise CourseError(
            f"{VARIABLE}={lang!r} is not a language of the course",
            f"set {VARIABLE} to one of {', '.join(LANGUAGES)} (or unset it for English)",
        )
    return lang


def assignment(lang: str) -> str:
    """The nbgrader assignment of the edition in `lang`: the English one's name, then `_<lang>`
    (each edition is its own assignment; the release, grading and `course site apply` find it by
    this name)."""
    return paths.ASSIGNMENT if lang == DEFAULT else f"{paths.ASSIGNMENT}_{lang}"


def catalog_path(lang: str, domain: str = DOMAIN, locale_dir: Path = LOCALE_DIR) -> Path:
    """Where the catalog of `lang` for `domain` lives (its .po file), in the kit's locale folder
    or another kit checkout's (`locale_dir`)."""
    return locale_dir / lang / "LC_MESSAGES" / f"{domain}.po"


class PseudoTranslations(gettext.NullTranslations):
    """Every message as it is, each of its non-blank lines between the markers."""

    def gettext(self, message: str) -> str:
        return pseudo(message)


def pseudo(message: str) -> str:
    """`message` with each non-blank line wrapped in the pseudo-locale's markers (indentation and
    an arrow prefix stay outside, as a student's terminal shows them)."""
    return "\n".join(
        f"{line[: len(line) - len(line.lstrip())]}{MARK_OPEN}{line.strip()}{MARK_CLOSE}"
        if line.strip()
        else line
        for line in message.split("\n")
    )


def compiled(po_path: Path) -> gettext.GNUTranslations:
    """The catalog at `po_path` compiled in memory, without its fuzzy and empty entries."""
    from babel.messages import mofile, pofile

    with open(po_path, "rb") as f:
        catalog = pofile.read_po(f)
    buffer = io.BytesIO()
    mofile.write_mo(buffer, catalog, use_fuzzy=False)  # leaves out fuzzy and empty entries
    buffer.seek(0)
    return gettext.GNUTranslations(buffer)


@functools.cache
def translations(lang: str) -> gettext.NullTranslations:
    """The translator of `lang`: English as written, the pseudo-locale, or a compiled catalog."""
    if lang == DEFAULT:
        return gettext.NullTranslations()
    if lang == PSEUDO:
        return PseudoTranslations()
    path = catalog_path(lang)
    if not path.is_file():
        raise CourseError(
            f"no catalog for {VARIABLE}={lang}: {path} is missing",
            "reinstall the kit, or unset COURSE_LANG for English",
        )
    return compiled(path)


def _(message: str) -> str:
    """`message` in the student's language (COURSE_LANG); English when it has no translation. It
    is a course.contracts.message.Message (typed `str`, as every caller uses it): it keeps its
    catalog id and,
    once formatted, its parameters, so that it can be rendered in English again."""
    return catalog_message(message, translations(language()).gettext(message))


# Fonts for the languages whose script matplotlib's own font (DejaVu Sans) lacks: (package, the
# font file inside it). IPAexGothic ships inside japanize-matplotlib, pinned with the kit: found
# without importing the package, which would import distutils and restyle every plot.
PLOT_FONTS = {"ja": ("japanize_matplotlib", "fonts/ipaexg.ttf")}


def plot_font() -> None:
    """Make matplotlib draw the student's language: its font registered and chosen (no change for
    a language DejaVu Sans covers). Call it before drawing a figure with translated labels."""
    found = PLOT_FONTS.get(language())
    spec = importlib.util.find_spec(found[0]) if found else None
    if found is None or spec is None or not spec.submodule_search_locations:
        return  # English, or the pinned font package is missing: matplotlib's own font
    from matplotlib import font_manager, rcParams

    path = str(Path(list(spec.submodule_search_locations)[0]) / found[1])
    font_manager.fontManager.addfont(path)
    rcParams["font.family"] = font_manager.FontProperties(fname=path).get_name()


def N_(message: str) -> str:  # noqa: N802 (gettext's own name for it)
    """`message` as it is, marked for the catalog: for a text translated later, into a language
    chosen then (`in_language`), not the one of the process that defines it."""
    return message


def in_language(lang: str, message: str) -> str:
    """`message` in the language `lang` (a student bundle's, say), whatever COURSE_LANG is."""
    return catalog_message(message, translations(lang).gettext(message))


# How the items of a list are joined inside a sentence: English's separators, and each language's
# own (Japanese joins with the ideographic comma, and with the full-width semicolon where items hold
# commas of their own).
SEPARATORS = {"ja": {", ": "\u3001", "; ": "\uff1b"}}


def listed(items: Iterable[object], separator: str = ", ", lang: str | None = None) -> str:
    """`items` joined for a sentence in the student's language (or `lang`): `separator` (", " or
    "; ") in English, its Japanese form (、 or ；) in Japanese."""
    joiner = SEPARATORS.get(lang or language(), {}).get(separator, separator)
    return joined(separator, items, joiner)


def render(record: Record, lang: str) -> str:
    """The text `record` says, in `lang`: each catalog message through that language's catalog,
    each joint in its form. Raises ValueError for a record that is none of the three forms."""
    if isinstance(record, str):
        return record
    if isinstance(record.get("id"), str) and isinstance(record.get("params"), dict):
        params = record["params"]
        shown = []
        for literal, field, _spec, _conversion in string.Formatter().parse(
            in_language(lang, record["id"])
        ):
            shown.append(literal)
            if field is not None:
                if field not in params:
                    raise ValueError(f"the record has no parameter {field!r}: {record!r:.200}")
                shown.append(render(params[field], lang))
        return "".join(shown)
    if isinstance(record.get("parts"), list) and "join" in record:
        joint = record["join"]  # English's separator, or a message of the catalog
        separator = (
            SEPARATORS.get(lang, {}).get(joint, joint)
            if isinstance(joint, str)
            else render(joint, lang)
        )
        return separator.join(render(part, lang) for part in record["parts"])
    raise ValueError(f"not a message's record: {record!r:.200}")


def english(text: str) -> str:
    """`text` in English: a Message rendered from its record, any other text as it is."""
    return render(text.record, DEFAULT) if isinstance(text, Message) else text

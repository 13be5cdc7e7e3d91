"""The English of a line a student read in another language, for the instructor's column of
grades-details.csv.

The checks run once, in the sandbox, speaking the student's language: running them again in English
would run the student's code twice. So the English is read back from the catalog the line was
translated with. Each translation becomes a pattern in which its placeholders match any text; what a
placeholder matched is itself read back where it is a message (a hint inside a sentence), and kept
as it is where it is data (a number, a function's name). A line that was put together outside
`_()` (two messages joined by "; " or ": ") is split where the joint is and read back in parts.
Babel reads the catalog; no gettext tool runs a catalog backwards, hence this module.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from dataclasses import dataclass

from babel.messages.pofile import read_po

from course import i18n

_PLACEHOLDER = re.compile(r"\{(\w+)(?:[:!][^{}]*)?\}")
# Where lines are joined outside `_()`: the separators the kit's messages are put together with.
_LEAD = re.compile(r"\s*(?:->\s*)?")  # a hint's "  -> ", which the kit writes outside `_()`
_JOINTS = ("; ", ": ", " ", "；", "：")


@dataclass(frozen=True)
class _Pattern:
    regex: re.Pattern[str]
    english: str
    names: tuple[str, ...]  # the placeholders, in the order of the pattern's groups
    anchor: str  # its longest fixed text: a line without it cannot match


def _pattern(translated: str, english: str) -> _Pattern:
    parts, names, seen = [], [], set()
    last = 0
    for found in _PLACEHOLDER.finditer(translated):
        parts.append(re.escape(translated[last : found.start()]))
        name = found.group(1)
        if name in seen:
            parts.append(f"(?P={name})")
        else:
            parts.append(f"(?P<{name}>.+?)")
            seen.add(name)
            names.append(name)
        last = found.end()
    parts.append(re.escape(translated[last:]))
    fixed = _PLACEHOLDER.split(translated)[::2]
    return _Pattern(
        re.compile("".join(parts), re.DOTALL), english, tuple(names), max(fixed, key=len)
    )


@functools.cache
def _catalog(lang: str) -> tuple[dict[str, str], tuple[_Pattern, ...]]:
    """{translation: English} of the messages without placeholders, and the patterns of those with,
    the most specific (most fixed text) first."""
    with open(i18n.catalog_path(lang), "rb") as f:
        catalog = read_po(f, locale=lang)
    exact: dict[str, str] = {}
    patterns = []
    for message in catalog:
        if not message.id or not message.string or message.fuzzy:
            continue
        english, translated = str(message.id), str(message.string)
        if _PLACEHOLDER.search(translated):
            patterns.append(_pattern(translated, english))
        else:
            exact.setdefault(translated, english)  # the first of the same words wins
    patterns.sort(key=lambda p: -len(_PLACEHOLDER.sub("", p.regex.pattern)))
    return exact, tuple(patterns)


def _foreign(text: str) -> bool:
    """Whether `text` has a character no English message has (kana, kanji, full-width forms)."""
    return any(ord(c) > 0x2FFF or unicodedata.east_asian_width(c) in "WF" for c in text)


def _fill(english: str, values: dict[str, str | None]) -> str:
    """`english` with each placeholder replaced by the text it matched, as that text is (already
    formatted: its format spec has nothing left to do)."""
    return _PLACEHOLDER.sub(lambda m: str(values[m.group(1)]), english)


@functools.lru_cache(maxsize=4096)
def _back(lang: str, text: str) -> str | None:
    if not _foreign(text):
        return text
    exact, patterns = _catalog(lang)
    if text in exact:
        return exact[text]
    for pattern in patterns:
        if pattern.anchor not in text:
            continue
        match = pattern.regex.fullmatch(text)
        if not match:
            continue
        filled = {name: _back(lang, match.group(name)) for name in pattern.names}
        if all(value is not None for value in filled.values()):
            return _fill(pattern.english, filled)
    for joint in _JOINTS:
        start = text.find(joint)
        while start > 0:
            head, tail = _back(lang, text[:start]), _back(lang, text[start + len(joint) :])
            if head is not None and tail is not None:
                return head + {"；": "; ", "：": ": "}.get(joint, joint) + tail
            start = text.find(joint, start + 1)
    return None


def english(text: str, lang: str) -> str:
    """`text`, which the kit said in `lang`, in English, line by line (a line that cannot be read
    back stays as it was). English text comes back as it is."""
    if lang == i18n.DEFAULT or not _foreign(text):
        return text
    lines = []
    for line in text.split("\n"):
        lead = _LEAD.match(line).group()  # type: ignore[union-attr]  # it matches "" at least
        found = _back(lang, line[len(lead) :])
        lines.append(lead + (found if found is not None else line[len(lead) :]))
    return "\n".join(lines)

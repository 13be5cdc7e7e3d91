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


# A line longer, or with more joints, is not split: the search over split points grows fast, and a
# student's own exception (a long list in its message) reaches grades-details.csv too.
_LONGEST = 400
_MOST_JOINTS = 30


@dataclass(frozen=True)
class _Pattern:
    regex: re.Pattern[str]
    english: tuple[str, ...]  # every English message with this translation (singular, plural)
    names: tuple[str, ...]  # the placeholders, in the order of the pattern's groups
    anchor: str  # its longest fixed text: a line without it cannot match
    fixed: int  # how much fixed text it has: the more, the more specific


def _pattern(translated: str, english: tuple[str, ...]) -> _Pattern:
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
        re.compile("".join(parts), re.DOTALL),
        english,
        tuple(names),
        max(fixed, key=len),
        sum(map(len, fixed)),
    )


@functools.cache
def _catalog(lang: str) -> tuple[dict[str, str], tuple[_Pattern, ...]]:
    """{translation: English} of the messages without placeholders, and the patterns of those with,
    the most specific (most fixed text) first."""
    with open(i18n.catalog_path(lang), "rb") as f:
        catalog = read_po(f, locale=lang)
    sources: dict[str, list[str]] = {}
    for message in catalog:
        if message.id and message.string and not message.fuzzy:
            sources.setdefault(str(message.string), []).append(str(message.id))
    # Where one translation serves several English messages, the English says so: "none / nothing".
    exact = {
        translated: " / ".join(english)
        for translated, english in sources.items()
        if not _PLACEHOLDER.search(translated)
    }
    patterns = [
        _pattern(translated, tuple(english))
        for translated, english in sources.items()
        if _PLACEHOLDER.search(translated)
    ]
    patterns.sort(key=lambda p: -p.fixed)
    return exact, tuple(patterns)


def _foreign(text: str) -> bool:
    """Whether `text` has a character no English message has (kana, kanji, full-width forms)."""
    return any(ord(c) > 0x2FFF or unicodedata.east_asian_width(c) in "WF" for c in text)


def _fill(pattern: _Pattern, values: dict[str, str]) -> str:
    """The pattern's English with each placeholder replaced by the text it matched, as that text is
    (already formatted: its format spec has nothing left to do). Of a singular and a plural message
    with one translation, the singular where the number before their first difference is 1."""
    english = sorted(pattern.english, key=len)
    chosen = english[-1]
    if len(english) > 1:
        short, long = english[0], english[-1]
        differs = next((i for i, (a, b) in enumerate(zip(short, long)) if a != b), len(short))
        counted = _PLACEHOLDER.findall(short[:differs])
        if counted and values.get(counted[-1]) == "1":
            chosen = short
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], chosen)


class _Reader:
    """Reads one line back, remembering each piece it tried (the split points share them)."""

    def __init__(self, lang: str) -> None:
        self.exact, self.patterns = _catalog(lang)
        self.known: dict[str, str | None] = {}

    def back(self, text: str) -> str | None:
        if not _foreign(text):
            return text
        if text not in self.known:
            self.known[text] = self._read(text)
        return self.known[text]

    def _read(self, text: str) -> str | None:
        if text in self.exact:
            return self.exact[text]
        for pattern in self.patterns:
            if pattern.anchor not in text:
                continue
            match = pattern.regex.fullmatch(text)
            if not match:
                continue
            filled = {name: self.back(match.group(name)) for name in pattern.names}
            if all(value is not None for value in filled.values()):
                return _fill(pattern, filled)  # type: ignore[arg-type]  # none is None
        if len(text) > _LONGEST:
            return None
        for joint in _JOINTS:
            starts = [m.start() for m in re.finditer(re.escape(joint), text) if m.start() > 0]
            for start in starts[:_MOST_JOINTS]:
                head, tail = self.back(text[:start]), self.back(text[start + len(joint) :])
                if head is not None and tail is not None:
                    return head + {"；": "; ", "：": ": "}.get(joint, joint) + tail
        return None


def english(text: str, lang: str) -> str:
    """`text`, which the kit said in `lang`, in English, line by line (a line that cannot be read
    back stays as it was). English text comes back as it is."""
    if lang == i18n.DEFAULT or not _foreign(text):
        return text
    lines = []
    for line in text.split("\n"):
        lead = _LEAD.match(line).group()  # type: ignore[union-attr]  # it matches "" at least
        found = _Reader(lang).back(line[len(lead) :])
        lines.append(lead + (found if found is not None else line[len(lead) :]))
    return "\n".join(lines)

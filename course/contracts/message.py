"""A message of the kit's catalog that keeps its catalog id and named parameters with it, so that
what one student read in their language can be rendered again in another from the same catalog:
the instructor's English column of grades-details.csv beside a Japanese student's feedback.

`course.i18n._()` returns a `Message`: a `str` (the text in the student's language, so every
caller uses it as the text it always was) whose `record` holds how it was made, as JSON:

- plain text (a student's own words, a number formatted by the kit): the string itself;
- `{"id": msgid, "params": {field: record}}`: a catalog message, each of its placeholders filled
  with the record of what filled it (data already formatted as the msgid's field says: the
  translation fills in the very same text);
- `{"join": separator, "parts": [record, ...]}`: messages put together outside `_()` (a hint
  after its message, a list in a sentence, "PASS: " before a verdict); `i18n.SEPARATORS` gives the
  separator's form in each language, and a separator may be a record itself (a translated
  "; or ").

A record crosses between processes as JSON (the verifier's protocol, the autograded notebook's
cell metadata) and is rendered by `course.i18n.render(record, lang)`, or made a `Message` again by
`rebuilt`.
"""

from __future__ import annotations

import string
from collections.abc import Iterable
from typing import Any

Record = str | dict[str, Any]

_FIELDS = string.Formatter()


class Message(str):
    """The text in the student's language, with the record it renders from in any language."""

    record: Record

    def __new__(cls, text: str, record: Record) -> Message:
        made = super().__new__(cls, text)
        made.record = record
        return made

    def __reduce__(self) -> tuple[Any, ...]:
        return (Message, (str(self), self.record))

    def format(self, *args: Any, **kwargs: Any) -> Message:
        text = str.format(self, *args, **kwargs)
        if args or not (isinstance(self.record, dict) and self.record.get("params") == {}):
            return Message(text, text)  # positional fields, or formatted twice: no parameters
        msgid = self.record["id"]
        params: dict[str, Record] = {}
        for _literal, field, spec, conversion in _FIELDS.parse(msgid):
            if field is None or field in params:
                continue
            value, _key = _FIELDS.get_field(field, (), kwargs)
            params[field] = (
                value.record
                if isinstance(value, Message) and not spec and not conversion
                else _FIELDS.format_field(_FIELDS.convert_field(value, conversion), spec or "")
            )
        return Message(text, {"id": msgid, "params": params})

    def __add__(self, other: str) -> Message:
        if not isinstance(other, str):
            return NotImplemented
        return joined("", (self, other))

    def __radd__(self, other: str) -> Message:
        if not isinstance(other, str):
            return NotImplemented
        return joined("", (other, self))

    def join(self, parts: Iterable[object]) -> Message:
        """`parts` joined by this message (a translated "; or ")."""
        parts = list(parts)
        text = str.join(self, map(str, parts))
        return Message(text, {"join": self.record, "parts": [record_of(part) for part in parts]})


def catalog_message(msgid: str, translated: str) -> Message:
    """`translated`, the text of the catalog's `msgid` in some language, with its record."""
    return Message(translated, {"id": msgid, "params": {}})


def record_of(text: object) -> Record:
    """How `text` was made: a Message's record, any other text as it is."""
    return text.record if isinstance(text, Message) else str(text)


def joined(separator: str, parts: Iterable[object], shown_separator: str | None = None) -> Message:
    """`parts` joined by `separator` (English's; the text shows `shown_separator`, its form in the
    student's language, when given), keeping each part's record."""
    parts = list(parts)
    text = (separator if shown_separator is None else shown_separator).join(map(str, parts))
    return Message(text, {"join": separator, "parts": [record_of(part) for part in parts]})


def rebuilt(text: str, record: Record | None) -> str:
    """`text` as a Message again, from the record that crossed with it (as it is without one)."""
    return text if record is None or record == text else Message(text, record)


def of_exception(error: BaseException) -> Record:
    """The record of what `str(error)` says: its message's, when the kit made it."""
    text = str(error)
    if isinstance(text, Message):
        return text.record
    args: tuple[Any, ...] = getattr(error, "args", ())
    first = args[0] if len(args) == 1 else None
    if isinstance(first, Message) and str(first) == text:
        return first.record
    return text

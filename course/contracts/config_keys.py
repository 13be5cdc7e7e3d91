"""A configuration file's mistake (grading.toml, a site profile) as a message its author can act
on: the key, the line it is on, the nearest valid key, what kind of value it takes."""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from types import UnionType
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from course import i18n
from course.i18n import _


def did_you_mean(word: str, choices: Sequence[str], form: str = "`{}`") -> str:
    """'did you mean `queue`?' for the choice nearest `word`; '' when none is near (a sentence of
    its own, which `sentences` puts before the hint's next one)."""
    nearest = difflib.get_close_matches(word, choices, n=1)
    if not nearest:
        return ""
    return _("did you mean {nearest}?").format(nearest=form.format(nearest[0]))


def sentences(*said: str) -> str:
    """Whole sentences (each one message) one after the other; empty ones left out."""
    return " ".join(sentence for sentence in said if sentence)


def dotted(path: Sequence[str | int]) -> str:
    """A key's place in the file, as TOML writes it: environment.threads_per_rank,
    scaling.runs[0]."""
    return "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in path).lstrip(
        "."
    )


def line_of(text: str, key: str) -> str:
    """':N', the line where `key` is set or its table begins, for the error message ('' if not
    found)."""
    found = re.search(
        rf"^[ \t]*(?:{re.escape(key)}\s*=|\[+[^\]]*\b{re.escape(key)}\s*\]+)", text, re.MULTILINE
    )
    return f":{text.count(chr(10), 0, found.start()) + 1}" if found else ""


def kind(name: str) -> str:
    """A kind of value as a file's author knows it, in their language."""
    kinds = {
        "string": _("text in quotes"),
        "integer": _("a whole number"),
        "number": _("a number"),
        "boolean": _("true or false"),
        "array": _("a list [...]"),
        "object": _("a table"),
    }
    return kinds.get(name, name)


# pydantic's error types, by the kind of value that was expected
_EXPECTED = {
    "float": "number",
    "int": "integer",
    "bool": "boolean",
    "string": "string",
    "dict": "object",
    "model": "object",
    "list": "array",
    "tuple": "array",
}


def first_of(error: ValidationError) -> Any:
    """The problem to tell first: an unknown key, then a missing one (they explain the rest), then
    the first in the file's order."""
    return min(
        error.errors(),
        key=lambda p: (
            p["type"] != "extra_forbidden",
            p["type"] != "missing",
            [str(part) for part in p["loc"]],
        ),
    )


def first_problem(error: ValidationError, model: type[BaseModel], text: str) -> tuple[str, str]:
    """(message, hint) for the first problem pydantic found validating a file against `model`; an
    unknown key first, as it explains the rest. The message starts with ':N' where the line is
    found, to follow the file's name; the hint is '' where the message says it all."""
    problem = first_of(error)
    loc = list(problem["loc"])
    union = len(loc) > 1 and loc[-1] in _UNION_TAGS and problem["type"] == f"{loc[-1]}_type"
    path, expected = (loc[:-1], "number") if union else (loc, _expected(problem["type"]))
    name = dotted(path)
    keys = [part for part in path if isinstance(part, str)]
    where = line_of(text, keys[-1]) if keys else ""
    if problem["type"] == "extra_forbidden":
        allowed = _keys(model, path[:-1])
        table = dotted(path[:-1])
        fields = dict(table=f"[{table}]", keys=i18n.listed(allowed))
        takes = (
            _("{table} takes {keys}").format(**fields)
            if table
            else _("the top level takes {keys}").format(**fields)
        )
        return (
            f"{where}: " + _("unknown key `{key}`").format(key=name),
            sentences(did_you_mean(str(path[-1]), allowed), takes),
        )
    if problem["type"] == "missing":
        return f"{where}: " + _("`{key}` is missing").format(key=name), ""
    if expected:
        return (
            f"{where}: "
            # TRANSLATORS: {kind} is a kind of value: "a whole number", "text in quotes"
            + _("`{key}` should be {kind}, not {value}").format(
                key=name, kind=kind(expected), value=repr(problem.get("input"))
            ),
            "",
        )
    return (
        f"{where}: "
        # TRANSLATORS: {problem} is the validator's own words (English)
        + _("`{key}`: {problem}").format(key=name, problem=problem["msg"]),
        "",
    )


_UNION_TAGS = ("int", "float")  # where pydantic names the member of int | float that refused


def _expected(error_type: str) -> str | None:
    """The kind of value a refused one should have been, from pydantic's error type."""
    if error_type == "finite_number":
        return "number"
    if not error_type.endswith(("_type", "_parsing")):
        return None
    return next((k for t, k in _EXPECTED.items() if error_type.startswith(t)), None)


def _keys(model: type[BaseModel], path: Sequence[str | int]) -> list[str]:
    """The keys the table at `path` of `model` takes (through tables of tables, e.g. [jobs.<name>],
    and lists)."""
    annotation: Any = model
    for part in path:
        annotation = _table(annotation)
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            field = annotation.model_fields.get(str(part))
            annotation = field.annotation if field else None
        elif get_origin(annotation) in (dict, list):  # a table's value, a list's item
            annotation = get_args(annotation)[-1]
        else:
            return []
    annotation = _table(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return list(annotation.model_fields)
    return []


def _table(annotation: Any) -> Any:
    """`annotation` without Annotated's extras, and an optional one without its None."""
    while True:
        if get_origin(annotation) is Annotated:
            annotation = get_args(annotation)[0]
            continue
        members = [a for a in get_args(annotation) if a is not type(None)]
        if get_origin(annotation) in (Union, UnionType) and len(members) == 1:
            annotation = members[0]
            continue
        return annotation

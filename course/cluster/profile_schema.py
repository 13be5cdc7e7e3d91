"""What a site profile (sites/*.toml) may hold, as a JSON schema, and its errors as messages a
profile's author can act on: the key, its line, the nearest valid key (course.cluster.sites)."""

from __future__ import annotations

import difflib
import re
from typing import TYPE_CHECKING

from course.errors import SiteError

if TYPE_CHECKING:
    import jsonschema

SCHEDULERS = ("local", "pbs", "slurm")
_STRINGS = {"type": "array", "items": {"type": "string"}}
_COUNT = {"type": "integer", "minimum": 1}
# What a profile may hold. Every table refuses keys it does not name, so that a misspelt key is an
# error and not a setting silently left at its default.
PROFILE_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "additionalProperties": False,
    "required": ["scheduler", "directives", "environment", "jobs", "scaling"],
    "properties": {
        "description": {"type": "string"},
        "scheduler": {"enum": list(SCHEDULERS)},
        "queue": {"type": "string"},
        "other_queues": _STRINGS,
        "group": {"type": "string"},
        "gpus_per_node": {"type": "integer", "minimum": 0},
        "resources": {
            "type": "array",
            "items": {
                "type": "string",
                "pattern": r"^[A-Za-z_]\w*$",
                "description": 'a resource name, e.g. "lscratch"',
            },
        },
        "directives": _STRINGS,
        "environment": {
            "type": "object",
            "additionalProperties": False,
            "required": ["setup", "dataset", "train_args", "mpiexec"],
            "properties": {
                "setup": _STRINGS,
                "dataset": {"type": "string"},
                "dataset_root": {"type": "string"},
                "train_args": {"type": "string"},
                "threads_per_rank": _COUNT,
                "mpiexec": {"type": "string"},
            },
        },
        "jobs": {
            "type": "object",
            "additionalProperties": {
                "type": "object",
                "additionalProperties": False,
                "required": ["nodes", "ranks_per_node", "walltime"],
                "properties": {
                    "nodes": _COUNT,
                    "ranks_per_node": _COUNT,
                    "gpus": {"type": "integer", "minimum": 0},
                    "walltime": {
                        "type": "string",
                        "pattern": r"^\d+(:\d+){0,2}$",
                        "description": 'HH:MM:SS, e.g. "00:30:00"',
                    },
                },
            },
        },
        "scaling": {
            "type": "object",
            "additionalProperties": False,
            "required": ["runs", "communication"],
            "properties": {
                "runs": {
                    "type": "array",
                    "minItems": 1,
                    "description": '["1x1", "1x2"]',
                    "items": {
                        "type": "string",
                        "pattern": r"^\d+x\d+$",
                        "description": 'NODESxRANKS per node, e.g. "1x2"',
                    },
                },
                "communication": {
                    "type": "array",
                    "minItems": 1,
                    "items": {"type": "string"},
                    "description": '["naive", "naive/ring"]',
                },
            },
        },
    },
}
_KINDS = {
    "string": "text in quotes",
    "integer": "a whole number",
    "array": "a list [...]",
    "object": "a table",
}


def _dotted(path: list[str | int]) -> str:
    """A key's place in the profile, as TOML writes it: environment.threads_per_rank,
    scaling.runs[0]."""
    return "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in path).lstrip(
        "."
    )


def _line_of(text: str, key: str) -> str:
    """':N', the line where `key` is set or its table begins, for the error message ('' if not
    found)."""
    found = re.search(
        rf"^\s*(?:{re.escape(key)}\s*=|\[+[^\]]*\b{re.escape(key)}\s*\]+)", text, re.MULTILINE
    )
    return f":{text.count(chr(10), 0, found.start()) + 1}" if found else ""


def _schema_error(error: jsonschema.ValidationError, where: str, text: str) -> SiteError:
    """One schema error as a message a profile's author can act on."""
    path, kind, value = list(error.absolute_path), error.validator, error.instance
    if kind == "additionalProperties":
        allowed = list(error.schema["properties"])
        key = sorted(set(value) - set(allowed))[0]
        nearest = difflib.get_close_matches(key, allowed, n=1)
        table = f"[{_dotted(path)}]" if path else "the top level"
        guess = f"did you mean `{nearest[0]}`? " if nearest else ""
        return SiteError(
            f"{where}{_line_of(text, key)}: unknown key `{_dotted([*path, key])}`",
            f"{guess}{table} takes {', '.join(allowed)}",
        )
    name = _dotted(path)
    if kind == "required":
        missing = next(key for key in error.validator_value if key not in value)
        return SiteError(
            f"{where}: `{_dotted([*path, missing])}` is missing",
            "see sites/local.toml for a complete profile",
        )
    if kind == "enum":
        return SiteError(
            f"{where}: {name} {value!r} is not one of {', '.join(error.validator_value)}",
            "fix the profile",
        )
    if kind == "type":
        return SiteError(
            f"{where}: `{name}` should be "
            f"{_KINDS.get(error.validator_value, error.validator_value)}, "
            f"not {value!r}",
            "fix the profile",
        )
    example = error.schema.get("description")
    if kind == "minItems":
        return SiteError(f"{where}: `{name}` needs at least one entry", f"e.g. {name} = {example}")
    if kind == "pattern":
        return SiteError(f"{where}: `{name}` = {value!r} is not {example}", "fix the profile")
    return SiteError(f"{where}: `{name}`: {error.message}", "fix the profile")


def validate(data: dict, where: str, text: str) -> None:
    """SiteError for the first problem PROFILE_SCHEMA finds; unknown keys first, as they explain the
    rest."""
    # here, not at the top: it takes a second to import, and only profiles need it
    import jsonschema

    errors = jsonschema.Draft202012Validator(PROFILE_SCHEMA).iter_errors(data)
    first = min(
        errors,
        key=lambda e: (
            e.validator != "additionalProperties",
            e.validator != "required",
            [str(p) for p in e.absolute_path],
        ),
        default=None,
    )
    if first is not None:
        raise _schema_error(first, where, text)

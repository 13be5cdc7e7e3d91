"""What a site profile (sites/*.toml) may hold, as a JSON schema, and its errors as messages a
profile's author can act on: the key, its line, the nearest valid key (course.cluster.sites)."""

from __future__ import annotations

import math
import string
from collections.abc import Sequence
from typing import TYPE_CHECKING

from course import i18n
from course.contracts.config_keys import did_you_mean, dotted, line_of, sentences
from course.contracts.config_keys import kind as kind_of
from course.errors import SiteError
from course.i18n import _

if TYPE_CHECKING:
    import jsonschema

SCHEDULERS = ("local", "pbs", "slurm")
_STRINGS = {"type": "array", "items": {"type": "string"}}
_COUNT = {"type": "integer", "minimum": 1}
# Hours always: PBS reads [[hours:]minutes:]seconds, so "1:00" would be one minute.
_WALLTIME = {"type": "string", "pattern": r"^\d+:\d\d:\d\d$", "example": "walltime"}
# A per-student budget in hours: more than 0 (leave the key out for no budget).
_HOURS = {"type": "number", "exclusiveMinimum": 0, "example": "hours"}
# What a profile may hold. Every table refuses keys it does not name, so that a misspelt key is an
# error and not a setting silently left at its default. "example" (a keyword JSON Schema leaves to
# its users) names what a valid value looks like, which _example says in the author's language.
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
        # One limit for every queue, or a table of limits per queue (a queue left out: none).
        "max_walltime": {
            "type": ["string", "object"],
            "pattern": _WALLTIME["pattern"],
            "additionalProperties": _WALLTIME,
            "example": _WALLTIME["example"],
        },
        "resources": {
            "type": "array",
            "items": {
                "type": "string",
                "pattern": r"^[A-Za-z_]\w*$",
                "example": "resource",
            },
        },
        "directives": _STRINGS,
        # What each student's jobs may use in all (course submit checks; course plan shows it).
        "budget": {
            "type": "object",
            "additionalProperties": False,
            "minProperties": 1,
            "properties": {
                "node_hours_per_student": _HOURS,
                "gpu_hours_per_student": _HOURS,
            },
            "example": "budget",
        },
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
                    "walltime": _WALLTIME,
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
                    "example": "runs",
                    "items": {
                        "type": "string",
                        "pattern": r"^\d+x\d+$",
                        "example": "run",
                    },
                },
                "communication": {
                    "type": "array",
                    "minItems": 1,
                    "items": {"type": "string"},
                    "example": "communication",
                },
            },
        },
    },
}


def _example(schema: dict) -> str:
    """What a valid value of `schema` looks like (its "example"), in the author's language."""
    name = schema.get("example", "")
    examples = {
        "walltime": _('HH:MM:SS, e.g. "00:30:00" (PBS reads "1:00" as one minute)'),
        "hours": _("a number of hours above 0, e.g. 12.5"),
        "resource": _('a resource name, e.g. "lscratch"'),
        "budget": _("node_hours_per_student = 12.5 and/or gpu_hours_per_student = 25"),
        "runs": '["1x1", "1x2"]',
        "run": _('NODESxRANKS per node, e.g. "1x2"'),
        "communication": '["naive", "naive/ring"]',
    }
    return examples.get(name, name)


def _schema_error(error: jsonschema.ValidationError, where: str, text: str) -> SiteError:
    """One schema error as a message a profile's author can act on."""
    path, kind, value = list(error.absolute_path), error.validator, error.instance
    if kind == "additionalProperties":
        allowed = list(error.schema["properties"])
        key = sorted(set(value) - set(allowed))[0]
        fields = dict(table=f"[{dotted(path)}]", keys=i18n.listed(allowed))
        takes = (
            _("{table} takes {keys}").format(**fields)
            if path
            else _("the top level takes {keys}").format(**fields)
        )
        return SiteError(
            f"{where}{line_of(text, key)}: "
            + _("unknown key `{key}`").format(key=dotted([*path, key])),
            sentences(did_you_mean(key, allowed), takes),
        )
    name = dotted(path)
    if kind == "required":
        missing = next(key for key in error.validator_value if key not in value)
        return SiteError(
            f"{where}: " + _("`{key}` is missing").format(key=dotted([*path, missing])),
            _("see sites/local.toml for a complete profile"),
        )
    if kind == "enum":
        return SiteError(
            f"{where}: "
            + _("{key} {value} is not one of {choices}").format(
                key=name, value=repr(value), choices=i18n.listed(error.validator_value)
            ),
            _("fix the profile"),
        )
    if kind == "type":
        expected = error.validator_value
        kinds = expected if isinstance(expected, list) else [expected]
        should = (
            # TRANSLATORS: {kind} is a kind of value: "a whole number", "text in quotes"
            _("`{key}` should be {kind}, not {value}").format(
                key=name, kind=kind_of(kinds[0]), value=repr(value)
            )
            if len(kinds) == 1
            # TRANSLATORS: {kind} and {other} are kinds of value: "text in quotes", "a table"
            else _("`{key}` should be {kind} or {other}, not {value}").format(
                key=name,
                kind=i18n.listed(map(kind_of, kinds[:-1])),
                other=kind_of(kinds[-1]),
                value=repr(value),
            )
        )
        return SiteError(f"{where}: {should}", _("fix the profile"))
    example = _example(error.schema)
    if kind == "minItems":
        return SiteError(
            f"{where}: " + _("`{key}` needs at least one entry").format(key=name),
            _("e.g. {key} = {example}").format(key=name, example=example),
        )
    if kind == "minProperties":
        return SiteError(
            f"{where}{line_of(text, name)}: " + _("[{table}] sets nothing").format(table=name),
            _("e.g. {example}, or leave the table out").format(example=example),
        )
    if kind == "exclusiveMinimum":  # a budget: 0 would refuse every job
        return SiteError(
            f"{where}{line_of(text, str(path[-1]))}: "
            + _("`{key}` = {value} is not {example}").format(
                key=name, value=repr(value), example=example
            ),
            _("fix the profile, or leave the key out for no budget"),
        )
    if kind == "pattern":
        return SiteError(
            f"{where}: "
            + _("`{key}` = {value} is not {example}").format(
                key=name, value=repr(value), example=example
            ),
            _("fix the profile"),
        )
    return SiteError(
        f"{where}: "
        # TRANSLATORS: {problem} is the schema validator's own words (English)
        + _("`{key}`: {problem}").format(key=name, problem=error.message),
        _("fix the profile"),
    )


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
    for key, hours in data.get("budget", {}).items():
        if not math.isfinite(hours):  # TOML has inf and nan; JSON Schema lets both through
            raise SiteError(
                f"{where}{line_of(text, key)}: "
                + _("`{key}` = {value} is not {example}").format(
                    key=f"budget.{key}", value=hours, example=_example(_HOURS)
                ),
                _("fix the profile, or leave the key out for no budget"),
            )


def check_template(template: str, fields: Sequence[str], key: str, where: str, text: str) -> None:
    """SiteError unless every {field} of `template` (the profile's `key`) is one of `fields`: a
    template is filled in later, in every job, where an unknown field would fail each of them."""
    where = f"{where}{line_of(text, key.rpartition('.')[2])}"
    valid = ", ".join("{" + field + "}" for field in fields)
    try:
        used = [
            field
            for _text, field, _spec, _conversion in string.Formatter().parse(template)
            if field is not None
        ]
    except ValueError as e:  # an unmatched brace
        raise SiteError(
            f"{where}: "
            # TRANSLATORS: {problem} is Python's own words on the template's braces (English)
            + _("`{key}` {template}: {problem}").format(
                key=key, template=repr(template), problem=e
            ),
            # TRANSLATORS: {{ and }} are written as they are: how a brace itself is written
            _("braces hold a field, one of {valid}; write {{{{ and }}}} for a brace itself").format(
                valid=valid
            ),
        ) from None
    for field in used:
        if field not in fields:
            raise SiteError(
                f"{where}: "
                + _("`{key}` {template} has an unknown field {field}").format(
                    key=key, template=repr(template), field="{" + field + "}"
                ),
                sentences(
                    did_you_mean(field, fields, "{{{}}}"),
                    _("its fields are {valid}").format(valid=valid),
                ),
            )

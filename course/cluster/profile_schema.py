"""What a site profile (sites/*.toml) may hold, as typed pydantic models, and its errors as messages
a profile's author can act on: the key, its line, the nearest valid key (course.cluster.sites).

The same library and the same error wording as grading.toml's rules (course.contracts.grading_rules,
course.contracts.config_keys). A value with a shape of its own (a walltime, a run, a budget) refuses
itself with an `example` naming what a valid one looks like, which _example says in the author's
language."""

from __future__ import annotations

import math
import re
import string
from collections.abc import Sequence
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictFloat,
    StrictInt,
    StrictStr,
    ValidationError,
)
from pydantic_core import PydanticCustomError

from course import i18n
from course.contracts import config_keys
from course.contracts.config_keys import did_you_mean, dotted, line_of, sentences
from course.errors import SiteError
from course.i18n import _

SCHEDULERS = ("local", "pbs", "slurm")
# Hours always: PBS reads [[hours:]minutes:]seconds, so "1:00" would be one minute.
_WALLTIME = re.compile(r"\d+:\d\d:\d\d")
_NO_BUDGET = "budget"  # the example of a [budget] table that sets nothing


def _not(example: str) -> PydanticCustomError:
    """The refusal of a value that does not look like `example` (a key of _example)."""
    return PydanticCustomError("not_example", "{example}", {"example": example})


def _matching(pattern: str, example: str) -> AfterValidator:
    compiled = re.compile(pattern)

    def check(value: str) -> str:
        if not compiled.fullmatch(value):
            raise _not(example)
        return value

    return AfterValidator(check)


def _some(example: str) -> AfterValidator:
    """A list or table that must hold at least one entry."""

    def check(value: Any) -> Any:
        if not value:
            raise PydanticCustomError("none_given", "{example}", {"example": example})
        return value

    return AfterValidator(check)


def _above_zero(hours: float) -> float:
    if not (math.isfinite(hours) and hours > 0):  # TOML has inf and nan; 0 would refuse every job
        raise _not("hours")
    return hours


def _walltime_or_table(value: Any) -> Any:
    """max_walltime: one limit for every queue, or a table of limits per queue."""
    if not isinstance(value, str | dict):
        raise PydanticCustomError("kinds", "{kinds}", {"kinds": ("string", "object")})
    for limit in [value] if isinstance(value, str) else value.values():
        if not (isinstance(limit, str) and _WALLTIME.fullmatch(limit)):
            raise _not("walltime")
    return value


def _nonempty_budget(table: Any) -> Any:
    if isinstance(table, dict) and not table:
        raise PydanticCustomError("none_given", "{example}", {"example": _NO_BUDGET})
    return table


Walltime = Annotated[StrictStr, _matching(_WALLTIME.pattern, "walltime")]
Count = Annotated[StrictInt, Field(ge=1)]
Hours = Annotated[StrictInt | StrictFloat, AfterValidator(_above_zero)]


class _Table(BaseModel):
    # A key the model does not name is refused: a misspelt key would otherwise leave a setting at
    # its default without a word.
    model_config = ConfigDict(extra="forbid", frozen=True)


class Budget(_Table):
    """What each student's jobs may use in all (course submit checks; course plan shows it)."""

    node_hours_per_student: Hours | None = None
    gpu_hours_per_student: Hours | None = None


class Environment(_Table):
    setup: list[StrictStr]
    dataset: StrictStr
    dataset_root: StrictStr = ""
    train_args: StrictStr
    threads_per_rank: Count = 1
    mpiexec: StrictStr


class Job(_Table):
    nodes: Count
    ranks_per_node: Count
    gpus: Annotated[StrictInt, Field(ge=0)] = 0
    walltime: Walltime


class Scaling(_Table):
    runs: Annotated[list[Annotated[StrictStr, _matching(r"\d+x\d+", "run")]], _some("runs")]
    communication: Annotated[list[StrictStr], _some("communication")]


class SiteFile(_Table):
    """Every table and key a site profile may hold, with its type and default."""

    description: StrictStr = ""
    scheduler: Literal["local", "pbs", "slurm"]
    queue: StrictStr = ""
    other_queues: list[StrictStr] = []
    group: StrictStr = ""
    gpus_per_node: Annotated[StrictInt, Field(ge=0)] = 0
    max_walltime: Annotated[str | dict[str, str], BeforeValidator(_walltime_or_table)] = {}
    resources: list[Annotated[StrictStr, _matching(r"[A-Za-z_]\w*", "resource")]] = []
    directives: list[StrictStr]
    budget: Annotated[Budget, BeforeValidator(_nonempty_budget)] | None = None
    environment: Environment
    jobs: dict[str, Job]
    scaling: Scaling


def _example(name: str) -> str:
    """What a valid value looks like, in the author's language."""
    examples = {
        "walltime": _('HH:MM:SS, e.g. "00:30:00" (PBS reads "1:00" as one minute)'),
        "hours": _("a number of hours above 0, e.g. 12.5"),
        "resource": _('a resource name, e.g. "lscratch"'),
        _NO_BUDGET: _("node_hours_per_student = 12.5 and/or gpu_hours_per_student = 25"),
        "runs": '["1x1", "1x2"]',
        "run": _('NODESxRANKS per node, e.g. "1x2"'),
        "communication": '["naive", "naive/ring"]',
    }
    return examples.get(name, name)


def validate(data: dict, where: str, text: str) -> SiteFile:
    """The profile's `data` as a SiteFile; SiteError for the first problem, unknown keys first, as
    they explain the rest."""
    try:
        return SiteFile.model_validate(data)
    except ValidationError as e:
        raise _site_error(e, where, text) from None


def _site_error(error: ValidationError, where: str, text: str) -> SiteError:
    """The first problem pydantic found, as a message a profile's author can act on."""
    first = config_keys.first_of(error)
    path = list(first["loc"])
    name, ctx, value = dotted(path), first.get("ctx", {}), first.get("input")
    keys = [str(part) for part in path if isinstance(part, str)]
    line = line_of(text, keys[-1]) if keys else ""
    if first["type"] == "not_example":
        example = ctx["example"]
        said = _("`{key}` = {value} is not {example}").format(
            key=name, value=repr(value), example=_example(example)
        )
        if example == "hours":  # a budget: 0 would refuse every job
            return SiteError(
                f"{where}{line}: {said}", _("fix the profile, or leave the key out for no budget")
            )
        return SiteError(f"{where}: {said}", _("fix the profile"))
    if first["type"] == "none_given":
        example = _example(ctx["example"])
        if ctx["example"] == _NO_BUDGET:
            return SiteError(
                f"{where}{line}: " + _("[{table}] sets nothing").format(table=name),
                _("e.g. {example}, or leave the table out").format(example=example),
            )
        return SiteError(
            f"{where}: " + _("`{key}` needs at least one entry").format(key=name),
            _("e.g. {key} = {example}").format(key=name, example=example),
        )
    if first["type"] == "literal_error":
        return SiteError(
            f"{where}: "
            + _("{key} {value} is not one of {choices}").format(
                key=name, value=repr(value), choices=i18n.listed(SCHEDULERS)
            ),
            _("fix the profile"),
        )
    if first["type"] == "kinds":
        kinds = [config_keys.kind(kind) for kind in ctx["kinds"]]
        return SiteError(
            f"{where}: "
            # TRANSLATORS: {kind} and {other} are kinds of value: "text in quotes", "a table"
            + _("`{key}` should be {kind} or {other}, not {value}").format(
                key=name, kind=i18n.listed(kinds[:-1]), other=kinds[-1], value=repr(value)
            ),
            _("fix the profile"),
        )
    message, hint = config_keys.first_problem(error, SiteFile, text)
    if first["type"] == "missing":
        hint = _("see sites/local.toml for a complete profile")
    return SiteError(f"{where}{message}", hint or _("fix the profile"))


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

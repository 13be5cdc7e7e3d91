"""A prediction made before its job ran: what a notebook submits with a job, and how it travels.

`course.submit(..., prediction=answers)` checks the answers (`check`: plain JSON of the stage's
KEYS), stamps them with the submission time and hands them to the job in the ENV variable
(`encode`; qsub's -v takes no commas, hence base64). The job's reporting worker reads them back
(`decode`), prints them into its log (course.contracts.joblog's prediction line) and keeps them in
its results file's `prediction` field (FIELD, declared in course.contracts.results), which the seal
and the log's digest of the file cover. course.evidence traces both against each other; the
prediction checks (course.notebook.checks.predictions) grade what a traced run recorded, never what
the function answers now.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import json
import math
import os
from typing import Any

from course import i18n
from course.contracts import stages
from course.errors import JobError
from course.i18n import _

ENV = "COURSE_PREDICTION"
KEYS: dict[str, tuple[str, ...]] = {
    stages.SINGLE_GPU.name: (
        "updates_per_epoch",
        "iterations",
        "snapshots_written",
        "snapshots_kept",
    ),
    stages.MULTI_GPU.name: ("updates_per_epoch", "iterations"),
    stages.MULTI_NODE.name: (
        "updates_per_epoch",
        "iterations",
        "faster_setting",
        "more_accurate_rule",
    ),
}
LONGEST_ANSWER = 100  # characters of a predicted choice: a setting or a rule's name

# The results field: None for a job submitted without a prediction.
FIELD: dict[str, Any] = {
    "type": ["object", "null"],
    "properties": {
        "made_at": {"type": "string"},  # ISO 8601: when course.submit handed it to the job
        "answers": {"type": "object", "additionalProperties": {"type": ["number", "string"]}},
    },
    "required": ["made_at", "answers"],
    "additionalProperties": False,
}


def check(stage: str, answers: Any) -> dict[str, int | float | str]:
    """`answers` as plain JSON (a new dict of int, float and str), checked to hold exactly the
    stage's KEYS; JobError saying what is wrong and how to fix it otherwise."""
    keys = KEYS.get(stage)
    if keys is None:
        raise JobError(
            _("the {stage} job takes no prediction").format(stage=stage),
            _("submit it without prediction=; only the jobs of stages 1 to 3 are predicted"),
        )
    fix = _(
        "pass the dict your prediction function returns for this job, e.g. prediction=predicted"
    )
    if type(answers) is not dict:
        raise JobError(
            # TRANSLATORS: {type} is a Python type's name, e.g. list
            _("the prediction is a {type}, not a dict").format(type=type(answers).__name__),
            fix,
        )
    missing = [key for key in keys if key not in answers]
    extra = [str(key) for key in answers if key not in keys]
    if missing or extra:
        raise JobError(
            # TRANSLATORS: {keys} and {expected} are lists of the dict's keys, e.g.
            # "updates_per_epoch, iterations"; {stage} a stage's name, e.g. single_gpu
            _(
                "the prediction has the keys {keys}; the {stage} job's prediction has exactly "
                "{expected}"
            ).format(
                keys=i18n.listed(map(str, answers)) or _("none"),
                stage=stage,
                expected=i18n.listed(keys),
            ),
            fix,
        )
    plain: dict[str, int | float | str] = {}
    for key in keys:
        value = answers[key]
        if type(value) is str and len(value) <= LONGEST_ANSWER:
            plain[key] = str(value)
        elif type(value) in (int, float) and math.isfinite(value):
            plain[key] = value
        else:
            raise JobError(
                _(
                    "the prediction's {key} is {value}: a prediction holds plain numbers and names "
                    "(at most {longest} characters)"
                ).format(key=key, value=repr(value), longest=LONGEST_ANSWER),
                _("return int, float or str values from your prediction function"),
            )
    return plain


def stamped(answers: dict[str, int | float | str]) -> dict[str, Any]:
    """The recorded prediction: the checked answers and when they were submitted."""
    made = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    return {"made_at": made, "answers": answers}


def canonical(prediction: dict[str, Any]) -> str:
    """The one text of a recorded prediction: in the log line, and in ENV before base64."""
    return json.dumps(prediction, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def encode(prediction: dict[str, Any]) -> str:
    """ENV's value: the canonical text in URL-safe base64 without padding (no comma, no =)."""
    return base64.urlsafe_b64encode(canonical(prediction).encode()).decode().rstrip("=")


def decode(value: str) -> dict[str, Any]:
    """A recorded prediction from ENV's value; ValueError saying why it is not one."""
    try:
        text = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)).decode()
        prediction = json.loads(text)
    except (binascii.Error, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(
            _("{variable} is not what course.submit writes ({error})").format(variable=ENV, error=e)
        ) from None
    answers = prediction.get("answers") if isinstance(prediction, dict) else None
    if set(prediction or ()) != {"made_at", "answers"} or not isinstance(answers, dict):
        raise ValueError(_("{variable} holds no made_at and answers").format(variable=ENV))
    if not all(type(v) in (int, float, str) for v in answers.values()):
        raise ValueError(
            _("{variable} holds answers that are not plain numbers or names").format(variable=ENV)
        )
    return prediction


def submitted() -> tuple[dict[str, Any] | None, str | None]:
    """In a job: (the prediction course.submit gave it, None without one; why one given could not
    be read, for its log)."""
    given = os.environ.get(ENV)
    if not given:
        return None, None
    try:
        return decode(given), None
    except ValueError as e:
        return None, "course: " + _(
            "warning: the prediction given to this job is not recorded: {why}"
        ).format(why=e)

"""The prediction recorded with the first run a question is about, as the prediction checks read it.

A job records the prediction course.submit gave it (course.contracts.prediction); course.evidence
says whether that record counts (course.prediction_evidence). A question about several runs is
answered by the prediction of the earliest of them: it was made before any of their results
existed. A judge: it reads traced runs, never the student's function.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import course.notebook.checks.prediction_words as words
from course import evidence, i18n

_NEVER = datetime.max.replace(tzinfo=UTC)  # a record without its start: after the others


def _started(run: evidence.Run) -> datetime:
    try:
        when = datetime.fromisoformat(run.started)
    except ValueError:
        return _NEVER
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def earliest(runs: Sequence[evidence.Run]) -> evidence.Run:
    """The run of `runs` (not empty) that started first (in their order, where they tie)."""
    return min(runs, key=_started)


def answers(run: evidence.Run) -> tuple[dict[str, Any] | None, tuple[str, str]]:
    """(the answers recorded with `run`, None where none counts; (why not, what to do))."""
    if run.prediction is not None:
        return run.prediction["answers"], ("", "")
    if run.prediction_problem:
        why = words.NOT_COUNTED.format(run=run.describe(), why=run.prediction_problem)
        return None, (why, words.ASK_AGAIN)
    return None, (words.NOT_SUBMITTED.format(run=run.describe()), words.SUBMIT_PREDICTED)


def changed(run: evidence.Run, key: str, now: Any, then: Any, said: str | None = None) -> None:
    """Say (`said`, by default that the recorded one is graded) that the function's answer `now`
    differs from the recorded `then`."""
    if now != then and run.prediction is not None:
        made = run.prediction["made_at"]
        said = said or words.GRADED_RECORDED  # looked up now, in the student's language
        print(said.format(key=key, now=now, then=then, run=run.describe(), made=made))


def show(runs: Sequence[evidence.Run], returned: dict[str, Any]) -> None:
    """Print what the first of `runs` recorded beside what the function returns now (stages 1
    and 2: their derivations are graded from the function)."""
    if not runs:
        return
    first = earliest(runs)
    recorded, (why, _) = answers(first)
    if recorded is None:
        print(why if first.prediction_problem else words.NONE_RECORDED.format(run=first.describe()))
        return
    said = i18n.listed(words.PREDICTED_ITEM.format(key=k, value=v) for k, v in recorded.items())
    made = first.prediction["made_at"] if first.prediction else ""
    print(words.RECORDED_WITH.format(run=first.describe(), made=made, said=said))
    for key, then in recorded.items():
        changed(first, key, returned.get(key), then, words.CHANGED_SINCE)
    print(words.DERIVATION_FROM_FUNCTION)

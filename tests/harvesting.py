"""A scripted student who harvests a check's messages instead of reasoning (test_harvesting.py):
it answers an exercise wrongly, reads what the real check says, and retries with every number the
message names (for the case the message echoes back, and for every call) and with the correction
the message states, if it states one; then the exercise's graded cell, visible and hidden tests,
runs on whatever it ended with.

What the harvester measures by value, not by words: a number a message names is compared with
the answer of the case it echoes (calls, a prediction's case, the ratio's case, a site and its run),
minus what the student already knew (the inputs, a site's settings, its own answer); numbers
within lines of text (a job line's nodes, walltime fields, threads) are retried as numbers.

A "correction" is recognised by its words only, as a student would act on it (a fix stated in
other words is not caught: telling that text dictates the fix needs reading it, and no rule over
its characters does that soundly; a report of a measurement worded "X, not Y" is a false alarm,
which is why such reports are worded otherwise): a formula over the
exercise's symbols (2(p - 1), log2(p), x n, sqrt(...)), or a phrase that names the fix ("swapped",
"upside down", "the wrong way round", "X, not Y", "instead of", "do not", "should be"). A message
that holds one hands the student the corrected function (the solution): the harvester then earns
what the solution earns."""

from __future__ import annotations

import ast
import copy
import dataclasses
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from course.notebook.checks import CheckFailed

_NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?(?![\w(])")
_CALL = re.compile(r"^(?P<name>\w+)\((?P<args>.*?)\)(?: returned|:| =)")
_CASE = re.compile(r"\bfor \((?P<args>[^()]*)\):")
_RATIO_CASE = re.compile(r"for compute ([\d.]+) ms, exchange ([\d.]+) ms, batch (\d+):")
_SYMBOL = r"(?:p|n|k|alpha|beta|α|β|ranks|n_ranks|message_bytes|batch|base_batch|base_lr)"
_CORRECTIONS = (
    re.compile(rf"\d*\s*\(\s*{_SYMBOL}\s*[-−+]\s*1\s*\)"),  # 2(p - 1), (p-1)
    re.compile(rf"\b{_SYMBOL}\s*[-−+]\s*1\b"),  # p - 1
    re.compile(r"log2\s*\(|sqrt\s*\(|√"),
    re.compile(rf"(?:[x×*/]\s*{_SYMBOL}\b)|(?:\b{_SYMBOL}\s*[×*/])"),  # x n, n / p
    re.compile(r"\bswapped\b|upside down|wrong way round|the other way round"),
    re.compile(
        r", not (?:a |an |the )?\w+|\binstead of\b|\bshould be\b|\brather than\b"
        r"|\bdo not (?:multiply|divide|count|add|use|take)\b"
    ),
)
# What each exercise's harvest found, a row per test (tests/test_harvesting.py), for the table
# tests/conftest.py writes at the end of the session.
ROWS: list[tuple] = []
HEADER = (
    "graded cell",
    "function",
    "points",
    "wrong starts",
    "retries",
    "failures moved on",
    "answers named",
    "corrections stated",
    "earned",
)
RELATIVE = 1e-3  # the echoed arguments are shown to 6 digits; the answer named would agree this far


def corrections(message: str) -> list[str]:
    """The words of `message` that state a correction (see the module's docstring)."""
    return [found.group(0) for pattern in _CORRECTIONS for found in pattern.finditer(message)]


def numbers(message: str) -> list[float]:
    """Every number `message` names, once each, in order."""
    seen: list[float] = []
    for found in _NUMBER.finditer(message):
        value = float(found.group(0))
        if math.isfinite(value) and value not in seen:
            seen.append(value)
    return seen


def _norm(value: Any) -> Any:
    """A case's argument as a key: numbers to the 6 digits a message shows them with."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return float(f"{float(value):.6g}")
    if isinstance(value, dict):
        return tuple(sorted((key, _norm(item)) for key, item in value.items()))
    if isinstance(value, tuple | list):
        return tuple(_norm(item) for item in value)
    return repr(value)  # a site's settings: its repr, as the messages show it


def echoed(message: str) -> tuple[Any, ...] | None:
    """The arguments of the case the message's first line echoes back, or None: a call
    (`name(args) returned`), a prediction's case (`for (args):`) or the ratio's
    (`for compute X ms, exchange Y ms, batch Z:`)."""
    first = message.splitlines()[0]
    if found := _RATIO_CASE.search(first):
        return tuple(float(x) if "." in x else int(x) for x in found.groups())
    found = _CALL.match(first) or _CASE.search(first)
    if not found:
        return None
    try:
        return tuple(ast.literal_eval(f"({found.group('args')},)"))
    except (ValueError, SyntaxError):
        return None


class _InText(tuple):
    """A slot's last step into a line of text: its k-th number (a job line's node count, walltime
    field or thread count is a number a harvester would change)."""


def _slots(answer: Any, path: tuple = ()) -> list[tuple]:
    """Where a number sits in an answer: () for a number, keys and indices within, and _InText
    for the numbers within a string (a string without one holds none)."""
    if isinstance(answer, dict):
        return [slot for key, item in answer.items() for slot in _slots(item, (*path, key))]
    if isinstance(answer, tuple | list):
        return [slot for at, item in enumerate(answer) for slot in _slots(item, (*path, at))]
    if isinstance(answer, str):
        return [(*path, _InText((k,))) for k in range(len(_NUMBER.findall(answer)))]
    return [path]


def _number_text(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(value)


def _put(answer: Any, slot: tuple, value: float) -> Any:
    if not slot:
        return value
    if isinstance(slot[0], _InText):
        found = list(_NUMBER.finditer(answer))[slot[0][0]]
        return answer[: found.start()] + _number_text(value) + answer[found.end() :]
    if isinstance(answer, tuple):
        return tuple(
            _put(item, slot[1:], value) if at == slot[0] else item for at, item in enumerate(answer)
        )
    answer = copy.copy(answer)
    answer[slot[0]] = _put(answer[slot[0]], slot[1:], value)
    return answer


@dataclass
class Harvest:
    """What one scripted student did on one exercise."""

    retries: int = 0
    moved_on: int = 0  # retries after which the check failed elsewhere (another case or part)
    leaked: list[str] = field(default_factory=list)  # messages that named the case's answer
    corrected: list[str] = field(default_factory=list)  # corrections messages stated


class Student:
    """A function named `name` that answers as `wrong`, except where the harvest overrode it:
    (case, slot) -> number; slot -> number for every call; or the solution, once corrected."""

    def __init__(
        self,
        name: str,
        wrong: Callable[..., Any],
        right: Callable[..., Any],
        echo: Callable[[str], tuple | None] = echoed,
    ):
        self.wrong, self.right = wrong, right
        self.echo = echo  # how the student reads the case a message echoes back
        self.by_case: dict[tuple, dict[tuple, float]] = {}
        self.everywhere: dict[tuple, float] = {}
        self.corrected = False
        self.last: tuple = ()  # the arguments of its last call
        student = self

        def answer(*args: Any) -> Any:
            student.last = args
            if student.corrected:
                return student.right(*args)
            found = student.wrong(*args)
            for slot, value in {
                **student.everywhere,
                **student.by_case.get(_norm(args), {}),
            }.items():
                try:
                    found = _put(found, slot, value)
                except (IndexError, KeyError, TypeError):
                    pass  # another call's answer has no such slot (fewer lines, no number there)
            return found

        answer.__name__ = answer.__qualname__ = name
        self.function = answer

    def trials(self, message: str) -> list[tuple[str, Any, tuple, float]]:
        """Every retry the message suggests: (how, the case or None, slot, number)."""
        args = self.echo(message)
        slots = _slots(self.wrong(*(self.last if args is None else args)))
        found = (
            [("case", args, slot, x) for slot in slots for x in numbers(message)] if args else []
        )
        return found + [("everywhere", None, slot, x) for slot in slots for x in numbers(message)]


def _failure(run: Callable[[], None]) -> str | None:
    try:
        run()
    except CheckFailed as failed:
        return str(failed)
    return None


def _answers(right: Any, named: list[float]) -> bool:
    """Whether a number the message named is the right answer (or one of its numbers), beyond the
    limits a student works out by hand (0 and 1: one rank exchanges nothing, a share of all)."""
    return any(
        not math.isclose(value, 0.0, abs_tol=1e-12)
        and not math.isclose(value, 1.0)
        and any(math.isclose(value, x, rel_tol=RELATIVE) for x in named)
        for value in (_at(right, slot) for slot in _slots(right))
        if isinstance(value, int | float) and not isinstance(value, bool)
    )


def _moved(before: str, after: str | None, echo: Callable[[str], tuple | None] = echoed) -> bool:
    """Whether a retry got the check past the case `before` failed on."""
    if after is None:
        return True
    if echo(before) is not None:
        return echo(after) != echo(before)
    return _NUMBER.sub("#", after.splitlines()[0]) != _NUMBER.sub("#", before.splitlines()[0])


def _flat(value: Any) -> list[float]:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _flat(dataclasses.asdict(value))  # a site's settings: the student has them all
    if isinstance(value, dict):
        return [x for item in value.values() for x in _flat(item)]
    if isinstance(value, tuple | list):
        return [x for item in value for x in _flat(item)]
    if isinstance(value, int | float) and not isinstance(value, bool):
        return [float(value)]
    if isinstance(value, str):
        return [float(x) for x in _NUMBER.findall(value)]
    return []


def _among(value: float, known: list[float]) -> bool:
    return any(math.isclose(value, x, rel_tol=RELATIVE) for x in known)


def _at(answer: Any, slot: tuple) -> Any:
    for part in slot:
        answer = (
            float(_NUMBER.findall(answer)[part[0]]) if isinstance(part, _InText) else answer[part]
        )
    return answer


def harvest(
    student: Student, visible: Callable[[Callable[..., Any]], None], rounds: int = 20
) -> Harvest:
    """Run the visible check on `student`, read each failure and retry with what it names, until
    it passes, a correction is stated, or nothing it names moves the check on."""
    done = Harvest()
    message = _failure(lambda: visible(student.function))
    for _ in range(rounds):
        if message is None:
            return done
        if stated := corrections(message):
            done.corrected += stated
            student.corrected = True
            message = _failure(lambda: visible(student.function))
            continue
        args = student.echo(message)
        if args is not None:
            try:
                right = student.right(*args)
                known = _flat(args) + _flat(student.function(*args))  # what the student knew
            except Exception:  # the shown arguments lost a digit the solution needs
                right, known = None, []
            named = [x for x in numbers(message) if not _among(x, known)]
            if right is not None and _answers(right, named):
                done.leaked.append(message.splitlines()[0])
        moved = None
        for how, case, slot, value in student.trials(message):
            done.retries += 1
            table = (
                student.by_case.setdefault(_norm(case), {}) if how == "case" else student.everywhere
            )
            before = table.get(slot)
            table[slot] = value
            after = _failure(lambda: visible(student.function))
            if _moved(message, after, student.echo):
                moved = after
                done.moved_on += 1
                break
            if before is None:
                del table[slot]
            else:
                table[slot] = before
        if moved is None:
            return done  # nothing the message named moves the check on: the student is stuck
        message = moved
    return done


def table() -> list[str]:
    """ROWS as the lines of a table, under HEADER."""
    rows = [HEADER, *ROWS]
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(HEADER))]
    return ["  ".join(str(value).ljust(width) for value, width in zip(row, widths)) for row in rows]

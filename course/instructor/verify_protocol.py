"""What the verifier's parent and its sandboxed worker say to each other, as typed records.

The parent (course.instructor.verify) sends a `Request` on the worker's stdin; the worker
(course.instructor.verify_worker) answers with a `Reply` as the last line of its stdout, and each
test's trusted process sends the worker a `TestReply` on a pipe, after asking the test's child for
`Observation`s, each answered with an `Observed`. `course grade` also leaves each
student's `Reply` in a file for nbgrader's step (course.instructor.nbgrader_hook). Every record's
`from_json` refuses a missing or unknown field, or a value of the wrong type, with a ProtocolError
that names it: a reply that does not parse is a grader's fault, never a grade.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar, Self

from course.contracts import message
from course.contracts.message import Record
from course.errors import CourseError

Output = dict[str, Any]  # one nbformat output of a test cell (stream, execute_result, error)


# Set by the parent when the worker runs in its own sandbox (its own process ids): every process a
# test leaves behind there is then the test's, and is ended before the next test starts.
SANDBOXED = "COURSE_VERIFY_SANDBOXED"

# Each test's hidden part reaches only that test's trusted process: the worker asks the grader for
# it once that process exists (a line: the JSON list [ASK, notebook, test id]); the grader answers
# with one line on the worker's stdin (the part as a JSON string), which that process reads after it
# has forked the child that runs the student's functions. The worker never holds a hidden part, so
# no process forked from it finds another test's in its memory, and the grader gives each part
# once; the child gets only the inputs of the observations it is asked for.
ASK = "hidden part of"


class VerificationError(CourseError):
    """A submission the verifier could not grade (its process was killed, or ran past its time)."""


class ProtocolError(VerificationError):
    """A message between the verifier's processes that is not what its record says."""


# --- checking a decoded JSON value against a record's fields --------------------------------------

Check = tuple[str, Callable[[Any], bool]]  # (what the value should be, whether it is)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _list_of(what: str, ok: Callable[[Any], bool]) -> Check:
    return f"a list of {what}", lambda value: isinstance(value, list) and all(map(ok, value))


def _map_of(what: str, ok: Callable[[Any], bool]) -> Check:
    return (
        f"an object of {what}",
        lambda value: (
            isinstance(value, dict)
            and all(isinstance(key, str) and ok(item) for key, item in value.items())
        ),
    )


STRING: Check = ("a string", lambda value: isinstance(value, str))
NUMBER: Check = ("a number", _is_number)
BOOLEAN: Check = ("true or false", lambda value: isinstance(value, bool))
OBJECT: Check = ("an object", lambda value: isinstance(value, dict))
LIST: Check = ("a list", lambda value: isinstance(value, list))
STRINGS = _list_of("strings", STRING[1])
# The cell metadata key under which nbgrader's step (course.instructor.nbgrader_hook) leaves the
# record of a test cell's error message, which the grade report renders in English.
SAID_KEY = "course_said"
# A message's record (course.contracts.message): rendered later, where a record that is not one
# raises.
SAID: Check = ("a message's record", lambda value: isinstance(value, (str, dict)))
SAID_OR_NONE: Check = ("a message's record or null", lambda value: value is None or SAID[1](value))
OUTPUTS = _list_of(
    "outputs (objects with an output_type)",
    lambda value: isinstance(value, dict) and isinstance(value.get("output_type"), str),
)


def _fields(record: str, data: Any, checks: dict[str, Check]) -> dict[str, Any]:
    """`data` as the fields of `record`; ProtocolError naming what is missing, unknown, mistyped."""
    if not isinstance(data, dict):
        raise ProtocolError(f"{record}: expected a JSON object, got {type(data).__name__}")
    missing, unknown = sorted(checks.keys() - data.keys()), sorted(data.keys() - checks.keys())
    if missing or unknown:
        raise ProtocolError(
            f"{record}: "
            + "; ".join(
                part
                for part in (
                    missing and f"missing field(s) {', '.join(missing)}",
                    unknown and f"unknown field(s) {', '.join(unknown)}",
                )
                if part
            )
        )
    for name, (what, ok) in checks.items():
        if not ok(data[name]):
            raise ProtocolError(f"{record}.{name}: {data[name]!r:.80} is not {what}")
    return data


def _decode(record: str, text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as e:
        raise ProtocolError(f"{record}: not JSON ({e}): {text[:80]!r}") from None


# --- the records ----------------------------------------------------------------------------------


class _Record:
    """A record that crosses as a JSON object: its dataclass fields are its CHECKS' keys."""

    CHECKS: ClassVar[dict[str, Check]]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)  # type: ignore[call-overload]  # every subclass is a dataclass

    @classmethod
    def from_dict(cls, data: Any) -> Self:
        return cls(**_fields(cls.__name__, data, cls.CHECKS))


@dataclass
class TestCell(_Record):
    """One test cell of the instructor's source notebook."""

    id: str  # its nbgrader grade_id
    visible: str  # what the student's notebook shows
    hidden: str  # between the hidden-test markers (what nbgrader adds when it grades)
    points: float

    CHECKS: ClassVar[dict[str, Check]] = {
        "id": STRING,
        "visible": STRING,
        "hidden": STRING,
        "points": NUMBER,
    }


@dataclass
class Plan(_Record):
    """What the instructor's source notebook says about one notebook: how to set up, what to
    test."""

    notebook: str  # file name, e.g. 01_single_gpu.ipynb
    setup: str
    solution_ids: list[str]
    tests: list[TestCell]

    CHECKS: ClassVar[dict[str, Check]] = {
        "notebook": STRING,
        "setup": STRING,
        "solution_ids": STRINGS,
        "tests": LIST,
    }

    @classmethod
    def from_dict(cls, data: Any) -> Plan:
        fields = _fields("Plan", data, cls.CHECKS)
        return cls(**{**fields, "tests": [TestCell.from_dict(test) for test in fields["tests"]]})


@dataclass
class Request:
    """What the parent asks of its worker: verify the submission in `folder` by these plans."""

    folder: str
    timeout: float  # seconds a test cell may run
    plans: list[Plan]

    CHECKS: ClassVar[dict[str, Check]] = {"folder": STRING, "timeout": NUMBER, "plans": LIST}

    def to_json(self) -> str:
        return json.dumps(
            {
                "folder": self.folder,
                "timeout": self.timeout,
                "plans": [plan.to_dict() for plan in self.plans],
            }
        )

    @classmethod
    def from_json(cls, text: str) -> Request:
        fields = _fields("Request", _decode("Request", text), cls.CHECKS)
        return cls(**{**fields, "plans": [Plan.from_dict(plan) for plan in fields["plans"]]})


@dataclass
class TestReply:
    """What one test's trusted process found: its outputs, whether the visible part failed, and
    the stage-3 probe's facts it gathered (course.lessons.core.mn_ranks), which the worker keeps
    for the notebook's next tests."""

    outputs: list[Output]
    visible_failed: bool
    probes: dict[str, Any]
    said: Record | None = None  # how its error's message was made, for the instructor's English

    CHECKS: ClassVar[dict[str, Check]] = {
        "outputs": OUTPUTS,
        "visible_failed": BOOLEAN,
        "probes": _map_of("probe facts", lambda value: isinstance(value, dict)),
        "said": SAID_OR_NONE,
    }

    def to_json(self) -> str:
        return json.dumps(
            {
                "outputs": self.outputs,
                "visible_failed": self.visible_failed,
                "probes": self.probes,
                "said": self.said,
            }
        )

    @classmethod
    def from_json(cls, text: str) -> TestReply:
        return cls(**_fields("TestReply", _decode("TestReply", text), cls.CHECKS))


# Between a test's trusted process and its child, which holds the student's functions: the child
# runs an observer (course.notebook.checks.observe) on them and sends back plain facts, or what the
# student's code raised. One line of JSON each way per observation.
# the only modules an observer may come from: the checks' engine and the lessons' observers
OBSERVERS = ("course.notebook.checks.", "course.lessons.")


@dataclass
class Observation(_Record):
    """What the trusted process asks of the child: observer(*functions, **inputs)."""

    observer: str  # "module:name", the module under OBSERVERS
    functions: list[str]  # the student's functions, by name
    inputs: dict[str, Any]
    token: str  # drawn for this observation; the answer must carry it

    CHECKS: ClassVar[dict[str, Check]] = {
        "observer": (
            f"an observer's module:name under {' or '.join(OBSERVERS)}",
            lambda value: (
                isinstance(value, str) and value.startswith(OBSERVERS) and value.count(":") == 1
            ),
        ),
        "functions": STRINGS,
        "inputs": OBJECT,
        "token": STRING,
    }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), allow_nan=True)

    @classmethod
    def from_json(cls, text: str) -> Observation:
        return cls.from_dict(_decode("Observation", text))


@dataclass
class Observed(_Record):
    """The child's answer: the facts, or the exception the student's code raised (its class name,
    message and notes)."""

    facts: Any
    raised: dict[str, Any] | None
    token: str  # the observation's

    CHECKS: ClassVar[dict[str, Check]] = {
        "facts": ("JSON data", lambda value: True),
        "token": STRING,
        "raised": (
            "null or an object with a name, a message, notes and a message's record",
            lambda value: (
                value is None
                or (
                    isinstance(value, dict)
                    and set(value) == {"name", "message", "notes", "said"}
                    and isinstance(value["name"], str)
                    and isinstance(value["message"], str)
                    and STRINGS[1](value["notes"])
                    and SAID[1](value["said"])
                )
            ),
        ),
    }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), allow_nan=True)

    @classmethod
    def from_json(cls, text: str) -> Observed:
        return cls.from_dict(_decode("Observed", text))


@dataclass
class Verdict(_Record):
    """What one notebook of one submission got: outputs per test cell, and what the instructor
    should know."""

    notebook: str
    digest: str  # of the solution cells verified: nbgrader's copy must have the same
    outputs: dict[str, list[Output]] = field(default_factory=dict)
    flags: dict[str, list[str]] = field(default_factory=dict)  # grade_id ("": notebook) -> notes
    missing: bool = False
    visible_failed: list[str] = field(default_factory=list)  # tests whose visible part failed
    seconds: dict[str, float] = field(default_factory=dict)  # per test cell, "" for setting up
    said: dict[str, Record] = field(default_factory=dict)  # grade_id -> its first error's record

    CHECKS: ClassVar[dict[str, Check]] = {
        "notebook": STRING,
        "digest": STRING,
        "outputs": _map_of("lists of outputs", OUTPUTS[1]),
        "flags": _map_of("lists of strings", STRINGS[1]),
        "missing": BOOLEAN,
        "visible_failed": STRINGS,
        "seconds": _map_of("numbers", _is_number),
        "said": _map_of("messages' records", SAID[1]),
    }


@dataclass
class Reply:
    """The worker's answer for a submission: a verdict per notebook, or why there is none."""

    verdicts: list[Verdict] | None  # None: the submission could not be verified
    failure: str = ""  # a Message (course.contracts.message) keeps its record across

    def to_json(self) -> str:
        if self.verdicts is None:
            return json.dumps({"failure": self.failure, "said": message.record_of(self.failure)})
        return json.dumps({"verdicts": [verdict.to_dict() for verdict in self.verdicts]})

    @classmethod
    def from_json(cls, text: str) -> Reply:
        data = _decode("Reply", text)
        if isinstance(data, dict) and "failure" in data:
            fields = _fields("Reply", data, {"failure": STRING, "said": SAID})
            return cls(None, message.rebuilt(fields["failure"], fields["said"]))
        fields = _fields("Reply", data, {"verdicts": LIST})
        return cls([Verdict.from_dict(verdict) for verdict in fields["verdicts"]])

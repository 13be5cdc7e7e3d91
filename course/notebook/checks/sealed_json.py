"""JSON made and read by CPython's C accelerator alone, for the processes where a student's code
runs beside the kit's (the grader's test child, the stage-3 probe's ranks): the facts those
processes send are written with an encoder made before any student code runs.

`json.dumps` looks up `JSONEncoder`, its methods and its module's `_default_encoder` each time it is
called, all of which any code in the process can replace; `json.loads` likewise. The objects made
here are instances of `_json`'s C types, whose settings are read-only and whose work calls no
Python-level name: a patch of json, of a class, or of a function's closure made afterwards does not
change what they write or read. (Only what they are given can: facts that are a student's own
objects, such as a dict subclass, speak for themselves, as any fact of the student's does.)
"""

from __future__ import annotations

import _json
from collections.abc import Callable
from typing import Any

# encode(obj, 0): the JSON text of obj as a list of pieces (join them with "".join); TypeError for
# what is not JSON data, ValueError for a structure nested in itself.
Encode = Callable[[Any, int], list[str]]
# scan(text, 0): (the value at the start of text, where it ends); StopIteration when none is there.
Scan = Callable[[str, int], tuple[Any, int]]


class _NotData:
    """What the encoder calls on an object that is not JSON data: it refuses it."""

    __slots__ = ()


def encoder() -> Encode:
    """A C encoder of compact JSON, NaN and the infinities written as Python's json writes them.
    (Its `default` is an object that cannot be called: anything not JSON data is a TypeError.)"""
    return _json.make_encoder(
        None,  # no check for cycles: a cycle is a RecursionError
        _NotData(),  # type: ignore[arg-type]  # not callable on purpose
        _json.encode_basestring_ascii,
        None,  # no indent
        ":",
        ",",
        False,  # keys in their order
        False,  # a key of another type is refused, not skipped
        True,  # NaN and the infinities allowed
    )


class _Settings:
    """What the C scanner reads once, when it is made: plain types only (no hook)."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = float  # NaN, Infinity, -Infinity


def scanner() -> Scan:
    """A C scanner of one JSON value."""
    return _json.make_scanner(_Settings())  # type: ignore[arg-type]

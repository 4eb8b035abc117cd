"""A JSON body from outside, read once, with a nesting limit: Python's parser recurses
per ``[`` or ``{`` (a few kilobytes of brackets are a ``RecursionError``), so
:func:`parse` counts the nesting first, in one linear pass.
"""

from __future__ import annotations

import json
import re
from itertools import accumulate
from typing import Any

# The API's objects nest two deep, Graph's notifications four; well above both.
MAX_DEPTH = 32

# A JSON string, escapes included (unrolled, so linear on any input).
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_A_BRACKET = re.compile(r"[^\[\]{}]+")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


class JsonInputError(ValueError):
    """The body is not JSON this service reads; the message is safe to show."""


def nesting_depth(text: str) -> int:
    """How deep the arrays and objects of ``text`` nest (brackets inside strings
    do not count). Malformed text gets a number too; the parser refuses it later."""
    brackets = _NOT_A_BRACKET.sub("", _STRING.sub("", text))
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0)


def parse(body: bytes | str) -> Any:
    """The value ``body`` holds; :class:`JsonInputError` past ``MAX_DEPTH`` levels, or for
    anything that is not JSON (bad text, bad encoding)."""
    if isinstance(body, bytes | bytearray):
        try:
            # As json.loads itself decodes bytes: UTF-8, -16 or -32 by their first bytes.
            text = bytes(body).decode(json.detect_encoding(body), "surrogatepass")
        except UnicodeDecodeError:
            raise JsonInputError("the body is not valid JSON") from None
    else:
        text = body
    if nesting_depth(text) > MAX_DEPTH:
        raise JsonInputError("the body is nested too deeply")
    try:
        return json.loads(text)
    except ValueError:
        raise JsonInputError("the body is not valid JSON") from None

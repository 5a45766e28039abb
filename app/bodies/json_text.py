"""What the JSON readers share: the 422 that names where a body is wrong, its blanks and its
strings.

:mod:`app.bodies.json_object` walks an object and hands its large members to
:mod:`app.bodies.json_arrays`; both report errors as FastAPI reports a body's and step over
the same blanks and strings, so those live below both.
"""

from __future__ import annotations

import re

from fastapi.exceptions import RequestValidationError

# What may become Python values: the members other than the arrays, together, and a 1-D array
# given as a string of comma-separated numbers.
SMALL_MEMBERS_BYTES = 2**20

_WS = re.compile(rb"[ \t\r\n]*")
BLANK = re.compile(rb"[ \t\r\n]*\Z")
# Possessive: a long string is matched without a backtracking stack.
STRING = re.compile(rb'"(?:[^"\\]++|\\.)*+"')
QUOTE = ord('"')


def invalid(
    loc: tuple[str | int, ...], msg: str, kind: str = "value_error"
) -> RequestValidationError:
    """A 422 naming ``body`` and the path to what is wrong, as FastAPI's own body errors do;
    ``kind="inconsistent"`` for a rule no schema states (rows of equal length)."""
    return RequestValidationError(
        [{"type": kind, "loc": ("body", *loc), "msg": msg, "input": None}]
    )


def skip(body: bytes | bytearray, i: int) -> int:
    match = _WS.match(body, i)
    return match.end() if match else i

"""A JSON object split into its small members (Python values, for pydantic) and its numeric
arrays (NumPy, by :mod:`app.bodies.json_arrays`).

Only the members the caller names as arrays may be large. Each other member's end is found
within what is left of ``SMALL_MEMBERS_BYTES`` before it is parsed, so a long string or a deep
nesting is refused at that size instead of becoming Python objects.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt
import orjson

from app.bodies.json_arrays import read_array
from app.bodies.json_text import BLANK, QUOTE, SMALL_MEMBERS_BYTES, STRING, invalid, skip

_STRUCTURE = re.compile(rb'["\[\]{}]')


def read_object(
    body: bytes | bytearray,
    arrays: Mapping[str, int],
    *,
    max_items: Mapping[str, int] | None = None,
    dtypes: Mapping[str, np.dtype[Any]] | None = None,
) -> tuple[dict[str, Any], dict[str, npt.NDArray[Any] | None]]:
    """Split a JSON object into its small members (Python values) and its numeric arrays.

    ``arrays`` maps a member name to its number of dimensions (1: a list of numbers, or a
    string of comma-separated numbers; 2: a list of equally long lists of numbers); such a
    member becomes a float64 array (or ``dtypes[name]``), ``None`` for ``null``. A 1-D member
    longer than ``max_items[name]`` is refused before it is parsed.

    >>> small, big = read_object(b'{"d_model": 2, "positions": [0, 5.0, 17]}', {"positions": 1})
    >>> small, big["positions"].tolist()
    ({'d_model': 2}, [0.0, 5.0, 17.0])
    """
    small: dict[str, Any] = {}
    found: dict[str, npt.NDArray[Any] | None] = {}
    small_left = SMALL_MEMBERS_BYTES
    i = skip(body, 0)
    if i >= len(body) or body[i] != ord("{"):
        raise invalid((), "the body must be a JSON object")
    i = skip(body, i + 1)
    if i < len(body) and body[i] == ord("}"):
        i += 1
    else:
        while True:
            name = STRING.match(body, i, i + 256)
            if name is None:
                raise invalid((), f"expected a member name at byte {i}")
            key = _loads(name.group(), ())
            i = skip(body, name.end())
            if i >= len(body) or body[i] != ord(":"):
                raise invalid((key,), f"expected ':' at byte {i}")
            i = skip(body, i + 1)
            if key in arrays:
                limit = (max_items or {}).get(key)
                dtype = (dtypes or {}).get(key, np.dtype(np.float64))
                i, found[key] = read_array(body, i, key, arrays[key], limit, dtype)
            else:
                end = _small_end(body, i, i + small_left, key)
                small_left -= end - i
                small[key] = _loads(bytes(body[i:end]), (key,))
                i = end
            i = skip(body, i)
            if i < len(body) and body[i] == ord(","):
                i = skip(body, i + 1)
            elif i < len(body) and body[i] == ord("}"):
                i += 1
                break
            else:
                raise invalid((), f"expected ',' or '}}' at byte {i}")
    if BLANK.match(body, i) is None:
        raise invalid((), f"unexpected data after the object at byte {i}")
    return small, found


def _loads(text: bytes, loc: tuple[str | int, ...]) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as e:
        raise invalid(loc, f"not valid JSON: {e}") from None


def _small_end(body: bytes | bytearray, i: int, stop: int, key: str) -> int:
    """Where the value at ``i`` ends, found within ``stop``: strings, scalars, small arrays."""
    too_long = invalid(
        (key,), f"must end within {SMALL_MEMBERS_BYTES} bytes of members other than arrays"
    )
    if i >= len(body):
        raise invalid((key,), "a value is missing")
    if body[i] == QUOTE:
        string = STRING.match(body, i, stop)
        if string is None:
            raise too_long
        return string.end()
    if body[i] not in b"[{":
        token = re.compile(rb"[^ \t\r\n,\]}]+").match(body, i, stop)
        if token is None:
            raise invalid((key,), f"a value is missing at byte {i}")
        if token.end() == stop and stop < len(body):
            raise too_long
        return token.end()
    depth, pos = 0, i
    while True:
        mark = _STRUCTURE.search(body, pos, stop)
        if mark is None:
            raise too_long
        if body[mark.start()] == QUOTE:
            string = STRING.match(body, mark.start(), stop)
            if string is None:
                raise too_long
            pos = string.end()
            continue
        depth += 1 if body[mark.start()] in b"[{" else -1
        pos = mark.end()
        if depth == 0:
            return pos

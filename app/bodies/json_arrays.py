"""Numeric arrays inside a JSON body, parsed straight into one NumPy array each.

No Python object is made per number: an array's end and its characters are found by a
vectorised scan of the bytes, ``_SCAN_BYTES`` at a time, and its numbers are parsed by orjson
in slices of at most ``_CHUNK_BYTES`` (whole rows, for a table) written into the array as they
come. One slice's Python numbers at a time is what ``PARSE_FIXED_BYTES`` in
:mod:`app.bodies.cost` allows for.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import numpy.typing as npt
import orjson
from fastapi.exceptions import RequestValidationError

from app.admission import check_size
from app.bodies.json_text import BLANK, QUOTE, SMALL_MEMBERS_BYTES, STRING, invalid, skip
from posenc.numerics.exact import MAX_POSITION

_CHUNK_BYTES = 2**18
_SCAN_BYTES = 2**18
# One row of a JSON table: 65536 values (the widest d_model) of up to 25 characters.
_ROW_BYTES = 2 * 2**20

_TOKEN = re.compile(rb"[^ \t\r\n,\]}]{1,40}")
_NUMERIC = np.zeros(256, dtype=bool)
_NUMERIC[np.frombuffer(b"0123456789+-.eE,[] \t\r\n", dtype=np.uint8)] = True
_OPEN, _CLOSE, _COMMA = ord("["), ord("]"), ord(",")


def read_array(
    body: bytes | bytearray,
    i: int,
    key: str,
    ndim: int,
    max_items: int | None,
    dtype: np.dtype[Any],
) -> tuple[int, npt.NDArray[Any] | None]:
    """The member ``key``'s array whose value starts at ``i``, and where that value ends."""
    if body[i : i + 4] == b"null":
        return i + 4, None
    what = "a list of numbers" if ndim == 1 else "a list of lists of numbers"
    if ndim == 1 and i < len(body) and body[i] == QUOTE:
        # "0,5,17": the query's comma-separated form, accepted in a body too.
        string = STRING.match(body, i, i + SMALL_MEMBERS_BYTES)
        if string is None:
            raise invalid((key,), f"must be {what}, or a string of at most {SMALL_MEMBERS_BYTES}")
        lo, hi = i + 1, string.end() - 1
        bad = _first_non_numeric(body, lo, hi)
        if bad is not None or body.find(b"[", lo, hi) >= 0 or body.find(b"]", lo, hi) >= 0:
            raise invalid((key,), f"must be comma-separated numbers, got {_shown(body, lo)}")
        count = _count_items(body, lo, hi, key, max_items)
        return string.end(), _parse_flat(body, lo, hi, count, key, dtype)
    if i >= len(body) or body[i] != _OPEN:
        raise invalid((key,), f"must be {what}, got {_shown(body, i)}")
    end = _scan_array(body, i, ndim, key)
    if ndim == 1:
        count = _count_items(body, i + 1, end - 1, key, max_items)
        return end, _parse_flat(body, i + 1, end - 1, count, key, dtype)
    rows = body.count(b"[", i + 1, end)
    return end, _parse_rows(body, i + 1, end - 1, rows, key, dtype)


def _shown(body: bytes | bytearray, i: int) -> str:
    token = _TOKEN.match(body, i)
    return token.group().decode("utf-8", "replace") if token else "nothing"


def _first_non_numeric(body: bytes | bytearray, lo: int, hi: int) -> int | None:
    for start in range(lo, hi, _SCAN_BYTES):
        block = np.frombuffer(body, np.uint8, min(_SCAN_BYTES, hi - start), start)
        bad = ~_NUMERIC[block]
        if bad.any():
            return start + int(bad.argmax())
    return None


def _scan_array(body: bytes | bytearray, i: int, ndim: int, key: str) -> int:
    """The end of the array opening at ``i``, scanned block by block without Python objects.

    Only number characters, brackets, commas and blanks may come before its end; the first
    other byte (a quote, a letter, a brace) is named with its index in the array.
    """
    depth = 0
    for start in range(i, len(body), _SCAN_BYTES):
        block = np.frombuffer(body, np.uint8, min(_SCAN_BYTES, len(body) - start), start)
        steps = (block == _OPEN).view(np.int8) - (block == _CLOSE).view(np.int8)
        depths = np.cumsum(steps, dtype=np.int32)
        depths += depth
        closed = depths <= 0
        n = int(closed.argmax()) + 1 if closed.any() else len(block)
        bad = ~_NUMERIC[block[:n]]
        if bad.any():
            raise _not_a_number(body, i, start + int(bad.argmax()), key)
        if int(depths[:n].max()) > ndim:
            kind = "a list of numbers" if ndim == 1 else "a list of lists of numbers"
            raise invalid((key,), f"must be {kind}: it nests deeper")
        if n < len(block) or closed[-1]:
            return start + n
        depth = int(depths[-1])
    raise invalid((key,), "the list is not closed")


def _not_a_number(body: bytes | bytearray, i: int, at: int, key: str) -> RequestValidationError:
    done = body.count(b"]", i, at)
    opened = body.rfind(b"[", i + 1, at)
    loc: tuple[str | int, ...]
    if opened > body.rfind(b"]", i, at):
        loc = (key, done, body.count(b",", opened, at))
    else:
        # Between rows (or in a flat list, where no row has closed): the element's index.
        loc = (key, done if done else body.count(b",", i, at))
    return invalid(loc, f"must be a number, got {_shown(body, at)}")


def _count_items(body: bytes | bytearray, lo: int, hi: int, key: str, limit: int | None) -> int:
    if BLANK.match(body, lo, hi):
        return 0
    count = body.count(b",", lo, hi) + 1
    if limit is not None and count > limit:
        setting = f"POSENC_MAX_{key.upper()}"
        check_size(key, f"the {key} list", count, limit, setting)
    return count


def _parse_flat(
    body: bytes | bytearray, lo: int, hi: int, count: int, key: str, dtype: np.dtype[Any]
) -> npt.NDArray[Any]:
    """``count`` comma-separated numbers in ``body[lo:hi]``, parsed a slice at a time."""
    out = np.empty(count, dtype=dtype)
    done = 0
    while done < count:
        cut = hi if hi - lo <= _CHUNK_BYTES else body.rfind(b",", lo, lo + _CHUNK_BYTES)
        if cut < lo:
            raise invalid((key, done), f"a number longer than {_CHUNK_BYTES} bytes")
        values = _numbers(body[lo:cut], (key, done))
        if done + len(values) > count or not values:
            raise invalid((key, done), "two commas with no number between them")
        with np.errstate(over="ignore"):
            out[done : done + len(values)] = values
        done += len(values)
        lo = cut + 1
    if lo <= hi and count:
        raise invalid((key, count), "a comma after the last number")
    return out


def _numbers(text: bytes | bytearray, loc: tuple[str | int, ...]) -> list[Any]:
    """The comma-separated numbers of ``text`` as one list (a bounded slice of the body)."""
    try:
        values = orjson.loads(b"[" + text + b"]")
    except orjson.JSONDecodeError as e:
        # orjson's position counts the opening bracket added here.
        before = text.count(b",", 0, max(e.pos - 1, 0))
        where = (*loc[:-1], int(loc[-1]) + before) if len(loc) == 2 else loc
        raise invalid(where, f"not a number: {e.msg}") from None
    assert isinstance(values, list)
    return values


# Rows are parsed as one flat list: brackets become blanks once the commas inside each row
# have been counted, so no Python list is made per row.
_UNBRACKET = bytes.maketrans(b"[]", b"  ")


def _parse_rows(
    body: bytes | bytearray, lo: int, hi: int, rows: int, key: str, dtype: np.dtype[Any]
) -> npt.NDArray[Any]:
    """``rows`` equally long lists of numbers in ``body[lo:hi]``, parsed whole rows at a time."""
    what = "must be a rectangular list of lists of numbers"
    out: npt.NDArray[Any] = np.empty((0, 0), dtype=dtype)
    done, width = 0, -1
    lo = skip(body, lo)
    while done < rows:
        if lo >= hi or body[lo] != _OPEN:
            raise invalid((key, done), what)
        cut = body.rfind(b"]", lo, min(hi, lo + _CHUNK_BYTES))
        if cut < lo:
            cut = body.find(b"]", lo, hi)
            if cut < 0 or cut - lo > _ROW_BYTES:
                raise invalid((key, done), f"a row longer than {_ROW_BYTES} bytes")
        chunk = body[lo : cut + 1]
        marks = np.frombuffer(chunk, np.uint8)
        opens, closes = np.flatnonzero(marks == _OPEN), np.flatnonzero(marks == _CLOSE)
        if len(opens) != len(closes) or done + len(opens) > rows:
            raise invalid((key, done), what)
        commas = np.cumsum(marks == _COMMA, dtype=np.int32)
        lengths = commas[closes] - commas[opens] + 1
        del marks, commas
        if width < 0:
            width = int(lengths[0])
            out = np.empty((rows, width), dtype=dtype)
        ragged = lengths != width
        if ragged.any():
            raise invalid((key, done + int(ragged.argmax())), what, "inconsistent")
        values = _numbers(chunk.translate(_UNBRACKET), (key, done))
        del chunk
        if len(values) != len(opens) * width:
            raise invalid((key, done), what)
        with np.errstate(over="ignore"):
            out[done : done + len(opens)] = np.array(values, dtype=np.float64).reshape(-1, width)
        del values
        done += len(opens)
        lo = skip(body, cut + 1)
        if done < rows:
            if lo >= hi or body[lo] != _COMMA:
                raise invalid((key, done), what)
            lo = skip(body, lo + 1)
    if lo < hi:
        raise invalid((key, done), what)
    return out


def positions_of(
    values: npt.NDArray[np.float64], loc: tuple[str | int, ...] = ("positions",)
) -> npt.NDArray[np.int64]:
    """Positions as int64: every value an integer in 0 … 2^31 − 1 (``3.0`` is 3); an error
    names ``loc`` and the value's index.

    >>> positions_of(np.array([0.0, 5.0, 17.0])).tolist()
    [0, 5, 17]
    """
    if len(values) == 0:
        raise invalid(loc, "must list at least one position")
    with np.errstate(invalid="ignore"):
        good = (values >= 0) & (values <= MAX_POSITION) & (np.floor(values) == values)
    if not good.all():
        k = int(np.argmin(good))
        raise invalid(
            (*loc, k), f"must be an integer between 0 and {MAX_POSITION}, got {values[k]:g}"
        )
    return values.astype(np.int64)

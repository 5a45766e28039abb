"""Request bodies read at a known cost: .npy, raw bytes with shape/dtype headers, or JSON.

Nothing in a body is trusted: the header's shape must match the byte count, the dtype must be
one we compare in, and the table must be finite and two-dimensional.

What reading costs is a property of the body's size alone (:func:`body_cost`), so it can be
reserved before the first byte is read:

- binary bodies (``.npy``, raw) are the received bytes viewed by ``np.frombuffer``; a byte-order
  or Fortran-order conversion is the one copy. Peak: ``2·B`` plus a fixed slack.
- JSON bodies never become a Python object per number. The large numeric arrays (``positions``,
  ``embeddings``, ``vectors``, ``data``) are found by a vectorised scan of the bytes and parsed
  in slices of at most ``_CHUNK_BYTES`` straight into one NumPy array; only the small members
  (``d_model``, ``scheme`` …, at most ``SMALL_MEMBERS_BYTES`` together) become Python values for
  pydantic. Every number takes at least two bytes of JSON (a digit and a separator) and at most
  eight bytes of array, so the arrays hold at most ``4·B``; with the body itself, ``5·B``.
"""

from __future__ import annotations

import io
import re
from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt
import orjson
from fastapi import HTTPException, Request
from fastapi.exceptions import RequestValidationError

from app.admission import check_size
from app.models import SHAPE_PATTERN
from posenc.cost import Cost
from posenc.errors import InconsistentError, ParameterError
from posenc.numerics.exact import MAX_POSITION

# int32 for integer arrays (relative buckets), compared for equality.
DTYPES = ("float16", "float32", "float64", "int32")
MEDIA_TYPES = ("application/x-npy", "application/octet-stream", "application/json")

# Peak bytes held while a JSON body of B bytes is read and parsed: the body, plus arrays of at
# most 8 bytes per number at 2 bytes of JSON per number. Measured (tracemalloc, 16 MiB bodies):
# 5.34·B for "0,0,…" positions, 5.23·B for embeddings or float64 data of zeros, 3.3·B for
# float32 data of zeros, 1.7–1.9·B for realistic random floats; tests/api/test_bodies.py holds
# every kind under the model.
JSON_PARSE_BYTES_PER_BODY_BYTE = 5
# The received bytes and the one copy a byte-order or Fortran-order conversion makes.
BINARY_READ_BYTES_PER_BODY_BYTE = 2
# Working memory whatever the body's size: one parsed slice as Python numbers and one scan
# block (≈ 6 MiB measured), and the small members as Python values (≤ 1 MiB of JSON, ≤ 18 MiB
# of objects in the worst nesting).
PARSE_FIXED_BYTES = 24 * 2**20
# Work units (≈ ns on one core) per body byte; measured CPU time: ≤ 13 ns/B for JSON (worst:
# one-digit positions), ≈ 1 ns/B for a binary body's view and finite check.
JSON_PARSE_WORK_PER_BODY_BYTE = 20
BINARY_READ_WORK_PER_BODY_BYTE = 2

SMALL_MEMBERS_BYTES = 2**20
_CHUNK_BYTES = 2**18
_SCAN_BYTES = 2**18
# One row of a JSON table: 65536 values (the widest d_model) of up to 25 characters.
_ROW_BYTES = 2 * 2**20
_FINITE_BLOCK_BYTES = 2**20


def _bytes_per_body_byte(media_type: str) -> tuple[int, int]:
    if media_type.split(";")[0].strip().lower() == "application/json":
        return JSON_PARSE_BYTES_PER_BODY_BYTE, JSON_PARSE_WORK_PER_BODY_BYTE
    return BINARY_READ_BYTES_PER_BODY_BYTE, BINARY_READ_WORK_PER_BODY_BYTE


def body_cost(content_length: int, media_type: str) -> Cost:
    """Peak bytes and work of reading and parsing a body of ``content_length`` bytes.

    >>> body_cost(1000, "application/json; charset=utf-8")
    Cost(bytes=25170824, work=20000)
    >>> body_cost(1000, "application/x-npy").bytes - PARSE_FIXED_BYTES
    2000
    """
    per_byte, work = _bytes_per_body_byte(media_type)
    return Cost(per_byte * content_length + PARSE_FIXED_BYTES, work * content_length)


def chunked_limit(max_body_bytes: int, memory_bytes: int, media_type: str) -> int:
    """The most a body sent without Content-Length may hold: its size is unknown when it is
    admitted, so it reserves the cost of this many bytes — at most a quarter of the memory
    budget — while it streams, is refused past it, and keeps only what its real size costs
    once it has arrived (``app.handlers._read_body``).

    >>> chunked_limit(64 * 2**20, 256 * 2**20, "application/json")
    8388608
    """
    per_byte, _ = _bytes_per_body_byte(media_type)
    fits = (memory_bytes // 4 - PARSE_FIXED_BYTES) // per_byte
    return max(0, min(max_body_bytes, fits))


async def receive(request: Request, limit: int) -> bytearray:
    """The body in one buffer, sized by Content-Length when it is given (no join, no regrowth).

    ``app.middleware.BodyLimitMiddleware`` enforces POSENC_MAX_BODY_BYTES as the body streams;
    a body without Content-Length is refused here too past ``limit``, what it reserved.
    """
    declared = request.headers.get("content-length", "")
    buffer = bytearray(int(declared)) if declared.isdigit() else bytearray()
    filled = 0
    async for chunk in request.stream():
        if filled + len(chunk) <= len(buffer):
            buffer[filled : filled + len(chunk)] = chunk
        else:
            if filled + len(chunk) > limit:
                raise HTTPException(
                    413,
                    f"a body sent without Content-Length may hold at most {limit} bytes here "
                    "(a quarter of POSENC_MEMORY_BYTES); send its Content-Length for up to "
                    "POSENC_MAX_BODY_BYTES",
                )
            del buffer[filled:]
            buffer += chunk
        filled += len(chunk)
    del buffer[filled:]
    return buffer


async def receive_bounded(request: Request, limit: int) -> bytes:
    """A small body, refused with 413 past ``limit`` bytes (by Content-Length, or as it comes)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise HTTPException(413, f"this body may hold at most {limit} bytes")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise HTTPException(413, f"this body may hold at most {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def read_table(
    body: bytes | bytearray, content_type: str, headers: Mapping[str, str], json_dtype: str
) -> npt.NDArray[np.floating]:
    media_type = content_type.split(";")[0].strip().lower()
    if media_type == "application/x-npy":
        table = _npy(body)
    elif media_type == "application/octet-stream":
        table = _raw(body, headers.get("x-array-shape"), headers.get("x-array-dtype"))
    elif media_type == "application/json":
        table = _json_table(body, json_dtype)
    else:
        raise ParameterError(
            "body", f"Content-Type must be one of {', '.join(MEDIA_TYPES)}, got {media_type!r}"
        )
    if not 1 <= table.ndim <= 3 or 0 in table.shape:
        raise ParameterError(
            "body", f"the array must be 1-, 2- or 3-D and non-empty, got shape {table.shape}"
        )
    _check_finite(table.reshape(table.shape[0], -1))
    return table


def _check_finite(table: npt.NDArray[np.floating]) -> None:
    # In blocks of rows: a whole-table boolean mask would cost a quarter of a float32 body.
    step = max(1, _FINITE_BLOCK_BYTES // max(1, table.shape[1]))
    for start in range(0, len(table), step):
        finite = np.isfinite(table[start : start + step]).all(axis=1)
        if not finite.all():
            row = start + int(np.argmin(finite))
            # Finite values are a rule of the body that its schema (binary) cannot state.
            raise InconsistentError("body", f"row {row} holds NaN or infinity")


def _dtype(name: str, where: str) -> np.dtype[Any]:
    if name not in DTYPES:
        raise ParameterError(where, f"dtype must be one of {', '.join(DTYPES)}, got {name!r}")
    return np.dtype(name).newbyteorder("<")


def _npy(body: bytes | bytearray) -> npt.NDArray[np.floating]:
    # The header is small: read it from a copy of its first bytes, never of the whole body.
    stream = io.BytesIO(bytes(body[: 2**16 + 16]))
    try:
        version = np.lib.format.read_magic(stream)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(stream)
        else:
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(stream)
    except ValueError as e:
        raise ParameterError("body", f"not a valid .npy file: {e}") from None
    if dtype.name not in DTYPES:
        raise ParameterError("body", f"dtype must be one of {', '.join(DTYPES)}, got {dtype}")
    return _from_bytes(body, stream.tell(), shape, dtype, "body", "F" if fortran else "C")


def _raw(
    body: bytes | bytearray, shape_header: str | None, dtype_header: str | None
) -> npt.NDArray[np.floating]:
    if shape_header is None or dtype_header is None:
        raise InconsistentError(
            "X-Array-Shape", "raw bodies need X-Array-Shape (e.g. 128,512) and X-Array-Dtype"
        )
    if not re.fullmatch(SHAPE_PATTERN, shape_header.strip()):
        raise ParameterError(
            "X-Array-Shape",
            f"must be 1 to 3 comma-separated sizes, each ≥ 1, got {shape_header[:40]!r}",
        )
    shape = tuple(int(part) for part in shape_header.split(","))
    dtype = _dtype(dtype_header.strip(), "X-Array-Dtype")
    return _from_bytes(body, 0, shape, dtype, "X-Array-Shape")


def _from_bytes(
    data: bytes | bytearray,
    offset: int,
    shape: tuple[int, ...],
    dtype: np.dtype[Any],
    where: str,
    order: str = "C",
) -> npt.NDArray[np.floating]:
    expected = int(np.prod(shape, dtype=object)) * dtype.itemsize
    if expected != len(data) - offset:
        raise InconsistentError(
            where,
            f"shape {list(shape)} of {dtype} needs {expected} bytes, "
            f"the body has {len(data) - offset}",
        )
    flat = np.frombuffer(data, dtype=dtype, offset=offset)
    table = flat.reshape(shape[::-1]).T if order == "F" else flat.reshape(shape)
    # A view of the received bytes when they are native C order; else the one copy.
    return np.ascontiguousarray(table, dtype=dtype.newbyteorder("="))


def _json_table(body: bytes | bytearray, dtype: str) -> npt.NDArray[np.floating]:
    target = _dtype(dtype, "dtype").newbyteorder("=")
    try:
        small, arrays = read_object(body, {"data": 2}, dtypes={"data": target})
    except RequestValidationError as e:
        error = e.errors()[0]
        loc = error["loc"][1:]
        if loc and loc[0] == "data":
            where = "".join(f"[{part}]" for part in loc[1:])
            kind = InconsistentError if error["type"] == "inconsistent" else ParameterError
            raise kind("data", f"{where} {error['msg']}".strip()) from None
        raise ParameterError("body", f"not a valid table: {error['msg']}") from None
    table = arrays.get("data")
    if small or table is None:
        raise ParameterError("body", 'JSON bodies are {"data": [[...], ...]} and nothing else')
    return table


# --- JSON objects whose large members are numeric arrays --------------------------------------

_WS = re.compile(rb"[ \t\r\n]*")
_BLANK = re.compile(rb"[ \t\r\n]*\Z")
# Possessive: a long string is matched without a backtracking stack.
_STRING = re.compile(rb'"(?:[^"\\]++|\\.)*+"')
_TOKEN = re.compile(rb"[^ \t\r\n,\]}]{1,40}")
_STRUCTURE = re.compile(rb'["\[\]{}]')
_NUMERIC = np.zeros(256, dtype=bool)
_NUMERIC[np.frombuffer(b"0123456789+-.eE,[] \t\r\n", dtype=np.uint8)] = True
_OPEN, _CLOSE, _QUOTE, _COMMA = ord("["), ord("]"), ord('"'), ord(",")


def invalid(
    loc: tuple[str | int, ...], msg: str, kind: str = "value_error"
) -> RequestValidationError:
    """A 422 naming ``body`` and the path to what is wrong, as FastAPI's own body errors do;
    ``kind="inconsistent"`` for a rule no schema states (rows of equal length)."""
    return RequestValidationError(
        [{"type": kind, "loc": ("body", *loc), "msg": msg, "input": None}]
    )


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
    i = _skip(body, 0)
    if i >= len(body) or body[i] != ord("{"):
        raise invalid((), "the body must be a JSON object")
    i = _skip(body, i + 1)
    if i < len(body) and body[i] == ord("}"):
        i += 1
    else:
        while True:
            name = _STRING.match(body, i, i + 256)
            if name is None:
                raise invalid((), f"expected a member name at byte {i}")
            key = _loads(name.group(), ())
            i = _skip(body, name.end())
            if i >= len(body) or body[i] != ord(":"):
                raise invalid((key,), f"expected ':' at byte {i}")
            i = _skip(body, i + 1)
            if key in arrays:
                limit = (max_items or {}).get(key)
                dtype = (dtypes or {}).get(key, np.dtype(np.float64))
                i, found[key] = _array_member(body, i, key, arrays[key], limit, dtype)
            else:
                end = _small_end(body, i, i + small_left, key)
                small_left -= end - i
                small[key] = _loads(bytes(body[i:end]), (key,))
                i = end
            i = _skip(body, i)
            if i < len(body) and body[i] == ord(","):
                i = _skip(body, i + 1)
            elif i < len(body) and body[i] == ord("}"):
                i += 1
                break
            else:
                raise invalid((), f"expected ',' or '}}' at byte {i}")
    if _BLANK.match(body, i) is None:
        raise invalid((), f"unexpected data after the object at byte {i}")
    return small, found


def _skip(body: bytes | bytearray, i: int) -> int:
    match = _WS.match(body, i)
    return match.end() if match else i


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
    if body[i] == _QUOTE:
        string = _STRING.match(body, i, stop)
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
        if body[mark.start()] == _QUOTE:
            string = _STRING.match(body, mark.start(), stop)
            if string is None:
                raise too_long
            pos = string.end()
            continue
        depth += 1 if body[mark.start()] in b"[{" else -1
        pos = mark.end()
        if depth == 0:
            return pos


def _array_member(
    body: bytes | bytearray,
    i: int,
    key: str,
    ndim: int,
    max_items: int | None,
    dtype: np.dtype[Any],
) -> tuple[int, npt.NDArray[Any] | None]:
    if body[i : i + 4] == b"null":
        return i + 4, None
    what = "a list of numbers" if ndim == 1 else "a list of lists of numbers"
    if ndim == 1 and i < len(body) and body[i] == _QUOTE:
        # "0,5,17": the query's comma-separated form, accepted in a body too.
        string = _STRING.match(body, i, i + SMALL_MEMBERS_BYTES)
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
    if _BLANK.match(body, lo, hi):
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
    lo = _skip(body, lo)
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
        lo = _skip(body, cut + 1)
        if done < rows:
            if lo >= hi or body[lo] != _COMMA:
                raise invalid((key, done), what)
            lo = _skip(body, lo + 1)
    if lo < hi:
        raise invalid((key, done), what)
    return out


def positions_of(values: npt.NDArray[np.float64], key: str = "positions") -> npt.NDArray[np.int64]:
    """Positions as int64: every value an integer in 0 … 2^31 − 1 (``3.0`` is 3).

    >>> positions_of(np.array([0.0, 5.0, 17.0])).tolist()
    [0, 5, 17]
    """
    if len(values) == 0:
        raise invalid((key,), "must list at least one position")
    with np.errstate(invalid="ignore"):
        good = (values >= 0) & (values <= MAX_POSITION) & (np.floor(values) == values)
    if not good.all():
        k = int(np.argmin(good))
        raise invalid(
            (key, k), f"must be an integer between 0 and {MAX_POSITION}, got {values[k]:g}"
        )
    return values.astype(np.int64)

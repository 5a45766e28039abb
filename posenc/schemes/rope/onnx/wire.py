"""Protocol Buffers' wire format, walked without building messages: an ONNX file is a
``ModelProto`` serialised so, and this module reads the fields of any message in it as spans of
the body's bytes, so that the reader builds only what it keeps.

A message is a run of fields, each a key (``field_number << 3 | wire_type``, a varint) and a
value: a varint (type 0), 8 bytes (1), a length and that many bytes (2: strings, bytes, nested
messages, packed lists) or 4 bytes (5); types 3 and 4 (groups) are not in ONNX's schema.
Every length is held to the bytes that remain before anything is read past it, and every field
stepped over is counted against a :class:`Budget`: a hostile graph of 2-byte fields costs the
reader no more than the budget says, whatever its length.

>>> list(fields(bytes([0x08, 0x96, 0x01, 0x12, 0x02, 0x68, 0x69]), 0, 7, Budget(10)))
[(1, 0, 150, 3), (2, 2, 5, 7)]
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import numpy.typing as npt

from posenc.cancel import checkpoint
from posenc.errors import InconsistentError, LimitError, ParameterError

VARINT, I64, LEN, I32 = 0, 1, 2, 5
Data = bytes | bytearray | memoryview
# Fields stepped over between two cancellation checkpoints (≈ 20 ms in CPython), and between
# two counts of one message's fields against the budget.
_PER_CHECK = 1 << 15
_BATCH = 1 << 10


class ONNXError(InconsistentError):
    """The body is not an ONNX model this reader takes: the message says what is wrong and at
    which byte. The body's schema (bytes) cannot state protobuf's rules; its description does."""

    def __init__(self, message: str) -> None:
        ParameterError.__init__(self, "model", message)


class GraphTooLargeError(LimitError, ONNXError):
    """The graph holds more than the reader walks in one request."""


class Budget:
    """Fields the reader may step over, in all: each costs about a microsecond of Python, so
    the budget bounds a request's time whatever its bytes claim."""

    __slots__ = ("left", "most", "since")

    def __init__(self, most: int) -> None:
        self.most = most
        self.left = most
        self.since = 0

    def spend(self, count: int) -> None:
        self.left -= count
        if self.left < 0:
            raise GraphTooLargeError(
                f"the graph holds more than {self.most} fields where its rope is looked "
                "for: more than this service reads in one request"
            )
        self.since += count
        if self.since >= _PER_CHECK:
            self.since = 0
            checkpoint()


def varint(data: Data, at: int, end: int) -> tuple[int, int]:
    """The varint at ``at`` and the byte after it (at most 10 bytes, all before ``end``)."""
    value = shift = 0
    start = at
    while True:
        if at >= end or at - start >= 10:
            raise ONNXError(f"a varint at byte {start} is cut off or longer than 10 bytes")
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, at
        shift += 7


def fields(data: Data, lo: int, hi: int, budget: Budget) -> Iterator[tuple[int, int, int, int]]:
    """The fields of the message in ``data[lo:hi]``: ``(number, wire type, a, b)`` where
    ``(a, b)`` is the value's span, or for a varint its value and the byte after it.

    Fields are counted against ``budget`` every :data:`_BATCH` and when the walk ends, however
    it ends (a caller that stops early still pays for what it read)."""
    at, count = lo, 0
    try:
        while at < hi:
            count += 1
            if count == _BATCH:
                budget.spend(count)
                count = 0
            key = data[at]
            if key < 0x80:  # a one-byte key, as every ONNX field's is
                at += 1
            else:
                key, at = varint(data, at, hi)
            number, wire = key >> 3, key & 7
            if number == 0:
                raise ONNXError(f"a field at byte {at} has number 0: not a protobuf message")
            if wire == VARINT:
                value, after = varint(data, at, hi)
                yield number, wire, value, after
                at = after
                continue
            if wire == LEN:
                if at < hi and data[at] < 0x80:
                    size = data[at]
                    at += 1
                else:
                    size, at = varint(data, at, hi)
            elif wire == I64:
                size = 8
            elif wire == I32:
                size = 4
            else:
                raise ONNXError(f"field {number} at byte {at} has wire type {wire}: not in ONNX")
            if size > hi - at:
                raise ONNXError(
                    f"field {number} at byte {at} claims {size} bytes, {hi - at} remain in its "
                    "message: the file is cut off or not ONNX"
                )
            yield number, wire, at, at + size
            at += size
    finally:
        # Not spend(): raising while a generator closes would be lost; the next spend raises.
        budget.left -= count


def text(data: Data, lo: int, hi: int, longest: int = 4096) -> str:
    """A string field's UTF-8 text; one longer than ``longest`` bytes is refused (no ONNX name
    the reader keeps is that long)."""
    if hi - lo > longest:
        raise ONNXError(f"a name at byte {lo} is {hi - lo} bytes long: more than {longest}")
    try:
        return bytes(data[lo:hi]).decode("utf-8")
    except UnicodeDecodeError:
        raise ONNXError(f"a string at byte {lo} is not UTF-8") from None


def signed(value: int) -> int:
    """A varint read as protobuf's int64 (two's complement in 64 bits)."""
    return value - (1 << 64) if value >= 1 << 63 else value


def packed_varints(data: Data, lo: int, hi: int) -> npt.NDArray[np.uint64]:
    """Every varint of a packed list, vectorised: a value ends at each byte below 0x80."""
    raw = np.frombuffer(data, np.uint8, hi - lo, lo)
    ends = np.flatnonzero(raw < 0x80)
    if hi > lo and (len(ends) == 0 or ends[-1] != hi - lo - 1):
        raise ONNXError(f"a packed list at byte {lo} ends inside a varint")
    starts = np.concatenate(([0], ends[:-1] + 1))
    if len(ends) and int((ends - starts).max()) >= 10:
        raise ONNXError(f"a packed list at byte {lo} holds a varint longer than 10 bytes")
    values = np.zeros(len(ends), np.uint64)
    for k in range(10):  # the k-th byte of every value that has one
        has = starts + k <= ends
        if not has.any():
            break
        index = np.flatnonzero(has)
        bits = raw[starts[index] + k].astype(np.uint64) & np.uint64(0x7F)
        values[index] |= bits << np.uint64(7 * k)
    return values

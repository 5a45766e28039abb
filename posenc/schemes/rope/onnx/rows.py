"""The rows of a cache that are read, and their bytes: from the model itself, or from the
``external`` parts a client sent (each part's filename ``<location>@<offset>``), else the ranges
to ask for.

A cache is sampled at few positions: 0 (cos is the attention factor, sin 0), 1, 2, 3, the
powers of two, and the last two rows. Doubling positions let each pair's angle be followed
around the circle without losing a turn (:mod:`.fit`), and the last rows hold the angles
float32 rounds most coarsely. For a cache of 128k rows of 64 float32 values that is 21 rows,
5 KiB, of the 32 MiB it holds.

>>> positions(300).tolist()
[0, 1, 2, 3, 4, 8, 16, 32, 64, 128, 256, 298, 299]
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from posenc.declare import Part
from posenc.errors import ExternalDataNeededError, InconsistentError, LimitError
from posenc.schemes.rope.onnx.graph import Cache
from posenc.schemes.rope.onnx.reader import ITEMSIZE, Model, values
from posenc.schemes.rope.onnx.rules import FLOAT_TYPES
from posenc.schemes.rope.onnx.wire import Data, ONNXError

# Parts of external data a request may carry at most.
MAX_PARTS = 4096


def positions(length: int) -> npt.NDArray[np.int64]:
    """The positions sampled of a cache of ``length`` rows."""
    chosen = {0, 1, 2, 3, length - 2, length - 1}
    power = 4
    while power < length:
        chosen.add(power)
        power *= 2
    return np.array(sorted(p for p in chosen if 0 <= p < length), dtype=np.int64)


@dataclass(frozen=True)
class Needed:
    tensor: str
    location: str
    offset: int
    length: int

    def listed(self) -> dict[str, object]:
        return {
            "tensor": self.tensor,
            "location": self.location,
            "offset": self.offset,
            "length": self.length,
        }


class Parts:
    """The external data sent: for each location, its parts sorted by offset, and for each
    part the one among it and those before that reaches furthest, so that a range is found by
    bisection whatever the parts overlap."""

    def __init__(self, sent: Sequence[Part]) -> None:
        if len(sent) > MAX_PARTS:
            raise LimitError("external", f"at most {MAX_PARTS} parts, got {len(sent)}")
        by_location: dict[str, list[tuple[int, Data]]] = {}
        for part in sent:
            filename, data = part.filename or "", part.data
            location, at, offset = filename.rpartition("@")
            if not at or not location or not offset.isascii() or not offset.isdigit():
                raise InconsistentError(
                    "external",
                    f"a part's filename must be <location>@<offset>, got {filename[:80]!r}",
                )
            by_location.setdefault(location, []).append((int(offset[:19]), data))
        self._offsets: dict[str, list[int]] = {}
        self._furthest: dict[str, list[tuple[int, Data]]] = {}
        for location, sorted_parts in by_location.items():
            sorted_parts.sort(key=lambda part: part[0])
            self._offsets[location] = [offset for offset, _ in sorted_parts]
            furthest, reaching = [], sorted_parts[0]
            for one in sorted_parts:
                if one[0] + len(one[1]) > reaching[0] + len(reaching[1]):
                    reaching = one
                furthest.append(reaching)
            self._furthest[location] = furthest

    def find(self, need: Needed) -> Data | None:
        offsets = self._offsets.get(need.location, [])
        last = bisect.bisect_right(offsets, need.offset) - 1
        if last < 0:
            return None
        # Of the parts that start at or before the range, the one reaching furthest holds it
        # if any does.
        offset, data = self._furthest[need.location][last]
        if need.offset + need.length > offset + len(data):
            return None
        start = need.offset - offset
        return memoryview(data)[start : start + need.length]


def _runs(sampled: npt.NDArray[np.int64]) -> list[tuple[int, int]]:
    """Consecutive positions as (first, count)."""
    runs: list[tuple[int, int]] = []
    for p in sampled.tolist():
        if runs and runs[-1][0] + runs[-1][1] == p:
            runs[-1] = (runs[-1][0], runs[-1][1] + 1)
        else:
            runs.append((p, 1))
    return runs


def needed(cache: Cache, sampled: npt.NDArray[np.int64]) -> list[Needed]:
    """The byte ranges of external data that hold the sampled rows of ``cache``."""
    tensor = cache.tensor
    external = tensor.external
    if external is None:
        return []
    size = _itemsize(cache)
    if external.length != size * tensor.size:
        raise ONNXError(
            f"the rope cache {tensor.name!r} claims {external.length} bytes of external data "
            f"for {tensor.size} values of {size} bytes"
        )
    width = tensor.dims[1]
    return [
        Needed(
            tensor.name,
            external.location,
            external.offset + (cache.rows[0] + first) * width * size,
            count * width * size,
        )
        for first, count in _runs(sampled)
    ]


def _itemsize(cache: Cache) -> int:
    tensor = cache.tensor
    if tensor.data_type not in FLOAT_TYPES:
        raise ONNXError(
            f"the rope cache {tensor.name!r} has data type {tensor.data_type}: not "
            "a float type (float32, float16, bfloat16, float64)"
        )
    return ITEMSIZE[tensor.data_type]


def read(
    model: Model, cache: Cache, sampled: npt.NDArray[np.int64], parts: Parts
) -> npt.NDArray[np.float64]:
    """The sampled rows of ``cache`` in float64, ``(positions, width)``; the caller has checked
    that every external range is among ``parts``."""
    tensor, width = cache.tensor, cache.tensor.dims[1]
    kind = FLOAT_TYPES[tensor.data_type]
    size = _itemsize(cache)
    rows = []
    external = needed(cache, sampled)
    for k, (first, count) in enumerate(_runs(sampled)):
        if not external:
            raw = values(model, tensor, (cache.rows[0] + first) * width, count * width)
        else:
            found = parts.find(external[k])
            assert found is not None, "the caller asks for what is missing first"
            raw = np.frombuffer(found, _BITS[size], count * width)
        rows.append(_floats(raw, kind).reshape(count, width))
    return np.concatenate(rows)


_BITS = {2: "<u2", 4: "<f4", 8: "<f8"}


def _floats(raw: npt.NDArray[np.generic], kind: str) -> npt.NDArray[np.float64]:
    if kind == "bfloat16":  # the upper half of a float32
        return (raw.astype(np.uint32) << np.uint32(16)).view(np.float32).astype(np.float64)
    if kind == "float16":
        return raw.astype(np.uint16).view(np.float16).astype(np.float64)
    return raw.astype(np.float64)


def missing(wanted: Sequence[Needed], parts: Parts) -> list[Needed]:
    return [need for need in wanted if parts.find(need) is None]


def refuse(wanted: Sequence[Needed], sent: Sequence[Part]) -> ExternalDataNeededError:
    total = sum(need.length for need in wanted)
    more = " more" if sent else ""
    return ExternalDataNeededError(
        "external",
        f"the rope caches are in external data: send{more} {len(wanted)} byte ranges "
        f"({total} bytes) as parts named external, each part's filename <location>@<offset>",
        [need.listed() for need in wanted],
    )

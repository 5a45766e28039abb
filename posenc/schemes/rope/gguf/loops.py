"""The compiled loops of :mod:`.reader`: stepping over a GGUF header's variable-length items
(a vocabulary's strings, the tensor infos) without a Python object per item. Each returns
where it stopped and why; the reader turns that into its errors."""

from __future__ import annotations

from typing import Any

import numba
import numpy as np
import numpy.typing as npt


@numba.njit(cache=True, nogil=True)
def skip(data: npt.NDArray[np.uint8], at: Any, count: int, end: int) -> tuple[Any, Any, Any]:
    """Step over ``count`` strings from byte ``at``: the byte after them, and -1 and 0; or where
    string ``index`` fails, its index and its length (-1: its length is cut off)."""
    for index in range(count):
        if end - at < 8:
            return at, index, -1
        # Unsigned throughout: a length past 2^63 must not turn negative and pass the check.
        length = np.uint64(0)
        for k in range(8):
            length |= np.uint64(data[at + k]) << np.uint64(8 * k)
        at += 8
        if length > np.uint64(end - at):
            return at, index, np.int64(min(length, np.uint64(2**62)))
        at += np.int64(length)
    return at, -1, 0


@numba.njit(cache=True, nogil=True)
def infos(
    data: npt.NDArray[np.uint8],
    at: Any,
    count: int,
    end: int,
    names: npt.NDArray[np.uint8],
    lengths: npt.NDArray[np.int64],
    found: npt.NDArray[np.int64],
) -> tuple[Any, Any, Any, Any, Any]:
    """Step over ``count`` tensor infos from byte ``at``: the byte after them, -1, 0, 0 and how
    many rope tensors' infos start where ``found`` says (their start, their row of ``names``);
    or where info ``index`` fails, its index, why (1: cut off, needing ``value`` bytes; 2: its
    name is too long; 3: ``value`` dimensions) and the matches before it."""
    matches = 0
    for index in range(count):
        start = at
        if end - at < 8:
            return at, index, 1, 8, matches
        length = np.uint64(0)
        for k in range(8):
            length |= np.uint64(data[at + k]) << np.uint64(8 * k)
        at += 8
        if length > np.uint64(names.shape[1]):
            return at, index, 2, 0, matches
        size = np.int64(length)
        if end - at < size + 4:
            return at, index, 1, size + 4, matches
        name_at = at
        at += size
        n_dims = np.int64(0)
        for k in range(4):
            n_dims |= np.int64(data[at + k]) << (8 * k)
        at += 4
        if n_dims < 1 or n_dims > 4:
            return at, index, 3, n_dims, matches
        rest = 8 * n_dims + 12
        if end - at < rest:
            return at, index, 1, rest, matches
        at += rest
        for row in range(names.shape[0]):
            if lengths[row] != size or matches >= found.shape[0]:
                continue
            same = True
            for k in range(size):
                if data[name_at + k] != names[row, k]:
                    same = False
                    break
            if same:
                found[matches, 0] = start
                found[matches, 1] = row
                matches += 1
    return at, -1, 0, 0, matches

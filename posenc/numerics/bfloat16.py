"""bfloat16, the upper half of a float32's bits, held as its ``uint16`` words (NumPy has no such
dtype): the words widened to float32, and float32 rounded to bfloat16 as torch's cast and
ml_dtypes round it (to nearest, ties to even)."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

Float32Array = npt.NDArray[np.float32]


def widened(words: npt.NDArray[Any]) -> Float32Array:
    """The float32 values of bfloat16 ``words`` (``uint16``), exactly: each word is the top
    half of its float32.

    >>> widened(np.array([0x3F80, 0xC040], np.uint16)).tolist()
    [1.0, -3.0]
    """
    values: Float32Array = (words.astype(np.uint32) << np.uint32(16)).view(np.float32)
    return values


def rounded(values: npt.ArrayLike) -> Float32Array:
    """Finite ``values`` rounded to bfloat16 (nearest, ties to even), as float32: the word
    ``w`` becomes ``(w + 0x7FFF + bit 16 of w)`` with its low 16 bits cleared.

    >>> rounded([257.0, 259.0, 1 + 2**-8]).tolist()
    [256.0, 260.0, 1.0]
    """
    words = np.asarray(values, np.float32).view(np.uint32)
    carried = words + np.uint32(0x7FFF) + ((words >> np.uint32(16)) & np.uint32(1))
    result: Float32Array = (carried & np.uint32(0xFFFF0000)).view(np.float32)
    return result

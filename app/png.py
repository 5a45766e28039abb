"""Arrays as PNG heatmaps: the colour maps and the PNG writer."""

from __future__ import annotations

import struct
import zlib
from functools import lru_cache
from typing import Any

import numpy as np
import numpy.typing as npt

# ColorBrewer RdBu, negative blue to positive red: a diverging map with a neutral midpoint.
_DIVERGING = (
    "053061",
    "2166ac",
    "4393c3",
    "92c5de",
    "d1e5f0",
    "f7f7f7",
    "fddbc7",
    "f4a582",
    "d6604d",
    "b2182b",
    "67001f",
)
# Viridis: perceptually uniform and sequential, for values that are never negative.
_SEQUENTIAL = (
    "440154",
    "472d7b",
    "3b528b",
    "2c728e",
    "21918c",
    "28ae80",
    "5ec962",
    "addc30",
    "fde725",
)


def colour_limits(array: npt.NDArray[Any]) -> tuple[tuple[str, ...], float, float]:
    values = array.astype(np.float64, copy=False)
    finite = np.isfinite(values)
    if not finite.all():
        values = values[finite]
    low, high = (float(values.min()), float(values.max())) if values.size else (0.0, 0.0)
    if low < 0:
        bound = max(-low, high) or 1.0
        return _DIVERGING, -bound, bound
    return _SEQUENTIAL, low, high if high > low else low + 1.0


_PNG_MAX_SIDE = 2048
_PNG_MIN_SIDE = 256


def png_heatmap(
    array: npt.NDArray[Any], width: int | None = None, height: int | None = None
) -> bytes:
    """The array as a heatmap, rows top to bottom, ``width`` × ``height`` pixels if given (else
    small arrays are enlarged and huge ones sampled), nearest value per pixel."""
    return encode(heatmap_pixels(array, width, height))


def heatmap_pixels(
    array: npt.NDArray[Any], width: int | None = None, height: int | None = None
) -> npt.NDArray[np.uint8]:
    """The heatmap's RGB pixels, shape (height, width, 3)."""
    values = array.reshape(array.shape[0], -1) if array.ndim > 1 else array.reshape(1, -1)
    rows = _pixel_index(values.shape[0], height)
    columns = _pixel_index(values.shape[1], width)
    colours, low, high = colour_limits(values)
    lut = _lut(colours)
    scaled = (values[np.ix_(rows, columns)].astype(np.float64) - low) / (high - low)
    # Non-finite values take the ends of the map (NaN the low end), never an invalid index.
    scaled = np.nan_to_num(scaled, nan=0.0, posinf=1.0, neginf=0.0)
    pixels = lut[np.clip((scaled * 255).round(), 0, 255).astype(np.intp)]
    return pixels


def _pixel_index(count: int, size: int | None = None) -> npt.NDArray[np.intp]:
    """Which value each pixel shows: small arrays grow by a whole factor, big ones are sampled."""
    if size is None:
        size = (
            (_PNG_MIN_SIDE // count) * count if count < _PNG_MIN_SIDE else min(count, _PNG_MAX_SIDE)
        )
    return (np.arange(size) * count // size).astype(np.intp)


@lru_cache(maxsize=4)
def _lut(colours: tuple[str, ...]) -> npt.NDArray[np.uint8]:
    anchors = np.array([[int(c[i : i + 2], 16) for i in (0, 2, 4)] for c in colours], float)
    where = np.linspace(0, len(colours) - 1, 256)
    lut = np.stack([np.interp(where, np.arange(len(colours)), anchors[:, k]) for k in range(3)], 1)
    return lut.round().astype(np.uint8)


def encode(pixels: npt.NDArray[np.uint8]) -> bytes:
    """8-bit RGB pixels of shape (height, width, 3) as a PNG file."""
    height, width, _ = pixels.shape
    # Each scanline starts with filter type 0 (none).
    raw = np.concatenate([np.zeros((height, 1), np.uint8), pixels.reshape(height, -1)], axis=1)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw.tobytes(), 6))
        + chunk(b"IEND", b"")
    )

"""An array to a file as the service serves it (``npy``, ``bin``, ``csv``), in pieces, with a
progress bar when it is large; a file is complete or absent, never half written. NumPy is
imported when an array is written: the options that name these formats need none of it."""

from __future__ import annotations

import contextlib
import functools
import io
import os
import sys
from collections.abc import Iterator
from typing import IO, TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    import numpy.typing as npt

FORMATS = ("npy", "bin", "csv")
# Below these a file is written in well under a second, before a bar could be read: bytes of
# npy or raw (~200 MB/s to a disk here), values as CSV text (~1.5 million per second).
LARGE_BYTES = 1 << 27
LARGE_TEXT = 1 << 20
# Values per piece of CSV text, as the service writes it (app/formats.py).
_PIECE = 1 << 16
_BYTES = 1 << 22


def format_of(output: str) -> str:
    """The format an output name implies: ``.csv``, ``.bin`` or ``.raw``, else ``npy``."""
    suffix = os.path.splitext(output)[1].lower()
    return {".csv": "csv", ".bin": "bin", ".raw": "bin"}.get(suffix, "npy")


@contextlib.contextmanager
def destination(output: str) -> Iterator[IO[bytes]]:
    """``output`` opened for writing (``-`` is stdout); a file appears only once complete."""
    if output == "-":
        yield sys.stdout.buffer
        sys.stdout.buffer.flush()
        return
    partial = f"{output}.part"
    try:
        with open(partial, "wb") as file:
            yield file
        os.replace(partial, output)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.remove(partial)


def progress(total: int, label: str, large: int = LARGE_BYTES) -> Any:
    """A bar on stderr for ``total`` units, or nothing at all below ``large`` of them."""
    if total < large:
        return contextlib.nullcontext(_Silent())
    return click.progressbar(length=total, label=label, file=sys.stderr, show_pos=False)


class _Silent:
    def update(self, n_steps: int) -> None:
        pass


def write(array: npt.NDArray[Any], fmt: str, file: IO[bytes], label: str) -> None:
    """``array`` as the service's ``fmt`` body: npy (header 1.0) and bin little-endian in C
    order; csv one line per index of the first axis, numbers in their shortest form."""
    import numpy as np

    little = np.ascontiguousarray(array)
    little = little.astype(little.dtype.newbyteorder("<"), copy=False)
    if fmt == "csv":
        _csv(little, file, label)
        return
    if fmt == "npy":
        header = io.BytesIO()
        np.lib.format.write_array_header_1_0(
            header, np.lib.format.header_data_from_array_1_0(little)
        )
        file.write(header.getvalue())
    values = little.reshape(-1).view(np.uint8)
    with progress(len(values), label) as bar:
        for start in range(0, len(values), _BYTES):
            file.write(values[start : start + _BYTES].data)
            bar.update(min(_BYTES, len(values) - start))


def _csv(array: npt.NDArray[Any], file: IO[bytes], label: str) -> None:
    lines = array.reshape(array.shape[0], -1) if array.ndim > 1 else array.reshape(-1, 1)
    width = lines.shape[1]
    with progress(lines.size, label, LARGE_TEXT) as bar:
        if width <= _PIECE:
            step = _PIECE // width
            for start in range(0, len(lines), step):
                block = lines[start : start + step]
                file.write(_numbers(block)[2:-2].replace(b"],[", b"\n") + b"\n")
                bar.update(block.size)
            return
        for line in lines:  # lines wider than a piece: (2, n, d) cos/sin, (h, n, n) biases
            for start in range(0, width, _PIECE):
                piece = line[start : start + _PIECE]
                file.write((b"," if start else b"") + _numbers(piece)[1:-1])
                bar.update(piece.size)
            file.write(b"\n")


def _numbers(array: npt.NDArray[Any]) -> bytes:
    """JSON lists of the values, each in the shortest digits that read back in its dtype."""
    import numpy as np

    if array.dtype == np.float16:  # orjson would give float32's digits (0.1 → 0.099975586)
        return _nested(_float16_digits()[np.ascontiguousarray(array).view(np.uint16)])
    import orjson

    return orjson.dumps(array, option=orjson.OPT_SERIALIZE_NUMPY)


@functools.cache
def _float16_digits() -> npt.NDArray[Any]:
    """The shortest digits of each of float16's 65536 bit patterns."""
    import numpy as np

    every = np.arange(2**16, dtype=np.uint16).view(np.float16)
    return np.array([str(value).encode() for value in every], dtype=object)


def _nested(words: npt.NDArray[Any]) -> bytes:
    if words.ndim == 1:
        return b"[" + b",".join(words.tolist()) + b"]"
    return b"[" + b",".join(_nested(part) for part in words) + b"]"

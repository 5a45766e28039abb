"""Array → bytes in every format of API.md §3, and the choice of format from ``format=``/Accept."""

from __future__ import annotations

import io
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, cast

import numpy as np
import numpy.typing as npt
import orjson

from app.models import Format
from app.png import colour_limits, png_heatmap

MEDIA_TYPES: dict[str, str] = {
    "json": "application/json",
    "npy": "application/x-npy",
    "bin": "application/octet-stream",
    "csv": "text/csv; charset=utf-8",
    "plotly": "application/json",
    "png": "image/png",
}
_BY_MEDIA_TYPE: dict[str, Format] = {
    "application/json": "json",
    "application/x-npy": "npy",
    "application/octet-stream": "bin",
    "text/csv": "csv",
    "image/png": "png",
}


def negotiate(requested: Format | None, accept: str | None) -> Format:
    """``format=`` wins; else the most preferred media type of Accept we serve; else json.

    >>> negotiate(None, "text/html;q=0.9, text/csv")
    'csv'
    >>> negotiate("npy", "text/csv"), negotiate(None, None), negotiate(None, "*/*")
    ('npy', 'json', 'json')
    """
    if requested is not None:
        return requested
    ranked: list[tuple[float, int, Format]] = []
    for index, item in enumerate((accept or "").split(",")):
        media_type, *options = (part.strip() for part in item.split(";"))
        quality = 1.0
        for option in options:
            key, _, value = option.partition("=")
            if key.strip() == "q":
                try:
                    quality = float(value)
                except ValueError:
                    quality = 0.0
        chosen = _BY_MEDIA_TYPE.get(media_type.lower())
        if chosen is not None and quality > 0:
            ranked.append((-quality, index, chosen))
    return min(ranked)[2] if ranked else "json"


@dataclass(frozen=True)
class Labels:
    """What a picture of the array is about: for Plotly figures and PNG heatmaps."""

    title: str
    x: str
    y: str
    value: str
    x_values: list[int] | None = None
    y_values: list[int] | None = None
    width: int | None = None  # of a png, in pixels; else chosen from the array's size
    height: int | None = None


def serialize(
    array: npt.NDArray[Any], fmt: Format, envelope: dict[str, Any], labels: Labels
) -> bytes | memoryview:
    """The body for ``fmt``; ``envelope`` holds the JSON fields that go beside ``data``.

    ``npy`` and ``bin`` are not made here but by :func:`raw`, in pieces that are never joined.
    """
    array = np.ascontiguousarray(array)
    if fmt == "json":
        head = orjson.dumps({**envelope, "shape": list(array.shape), "dtype": str(array.dtype)})
        return head[:-1] + b',"data":' + json_array(array) + b"}"
    if fmt == "csv":
        return csv(array)
    if fmt == "plotly":
        figure = plotly_figure(array, labels)
        for trace in figure["data"]:  # the values in bounded pieces, as for JSON
            for axis in ("z", "y"):
                if isinstance(trace.get(axis), np.ndarray):
                    trace[axis] = orjson.Fragment(json_array(trace[axis]))
        return orjson.dumps(figure, option=orjson.OPT_SERIALIZE_NUMPY)
    return png_heatmap(array, labels.width, labels.height)


def raw(array: npt.NDArray[Any], fmt: Format) -> tuple[bytes, memoryview]:
    """The ``npy`` or ``bin`` body as a head (the npy header; nothing for bin) and the values:
    a read-only view of the (cached, read-only) array itself, little-endian, C order.

    Sent one after the other, never joined: joining would copy the values (~10 ms and a page
    fault per 4 KiB of a fresh buffer for 32 MiB) for bytes that are already in memory.

    >>> head, values = raw(np.arange(3, dtype=np.float32), "npy")
    >>> len(head) % 64, head[:6], bytes(values) == np.arange(3, dtype="<f4").tobytes()
    (0, b'\\x93NUMPY', True)
    >>> raw(np.arange(3, dtype=np.float32), "bin")[0]
    b''
    """
    little = np.ascontiguousarray(array)
    little = little.astype(little.dtype.newbyteorder("<"), copy=False)
    values = little.data.cast("B").toreadonly()
    return raw_head(little.shape, little.dtype, fmt), values


def raw_head(shape: tuple[int, ...], dtype: np.dtype[Any] | str, fmt: Format) -> bytes:
    """What goes before the values of a little-endian C-order array: npy's header, or nothing.

    >>> len(raw_head((2, 3), "float32", "npy")), raw_head((2, 3), "float32", "bin")
    (128, b'')
    """
    if fmt == "bin":
        return b""
    described = {
        "descr": np.lib.format.dtype_to_descr(np.dtype(dtype).newbyteorder("<")),
        "fortran_order": False,
        "shape": tuple(shape),
    }
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, described)
    return header.getvalue()


def json_array(array: npt.NDArray[Any]) -> bytes:
    """Nested JSON lists, each float in the shortest form that round-trips in its own dtype.

    >>> json_array(np.array([[0.1, 1/3]], dtype=np.float32)), json_array(np.float16([0.1, 2]))
    (b'[[0.1,0.33333334]]', b'[0.1,2.0]')
    """
    if array.dtype == np.float16:
        # orjson writes float16 with float32's shortest digits (0.1 → 0.099975586).
        return _float16_json(array)
    return b"".join(_json_pieces(array))


# Values per orjson call (~2 ms): orjson holds the GIL while it writes, so a whole 2M-value
# table in one call (~55 ms) would hold /healthz back on the event loop's thread that long.
_JSON_CHUNK_VALUES = 1 << 16


def _json_pieces(array: npt.NDArray[Any]) -> list[bytes]:
    """``array`` as JSON in pieces of bounded size, whose concatenation is the whole."""
    if array.ndim < 2 or array.size <= _JSON_CHUNK_VALUES:
        return [orjson.dumps(array, option=orjson.OPT_SERIALIZE_NUMPY)]
    if array.ndim > 2:
        inner = [b"".join(_json_pieces(part)) for part in array]
        return [b"[", b",".join(inner), b"]"]
    rows = max(1, _JSON_CHUNK_VALUES // max(1, array.shape[1]))
    pieces = [b"["]
    for start in range(0, len(array), rows):
        if start:
            pieces.append(b",")
        pieces.append(
            orjson.dumps(array[start : start + rows], option=orjson.OPT_SERIALIZE_NUMPY)[1:-1]
        )
    pieces.append(b"]")
    return pieces


@lru_cache(maxsize=1)
def _float16_digits() -> npt.NDArray[np.object_]:
    every = np.arange(2**16, dtype=np.uint16).view(np.float16)
    return np.array([str(value).encode() for value in every], dtype=object)


def _float16_json(array: npt.NDArray[Any]) -> bytes:
    # Every float16 has one of 65536 bit patterns: look its shortest digits up.
    words = _float16_digits()[np.ascontiguousarray(array).view(np.uint16)]
    return _nested(words)


def _nested(words: npt.NDArray[np.object_]) -> bytes:
    if words.ndim == 0:
        return cast(bytes, words.item())
    if words.ndim == 1:
        return b"[" + b",".join(words.tolist()) + b"]"
    return b"[" + b",".join(_nested(part) for part in words) + b"]"


def csv(array: npt.NDArray[Any]) -> bytes:
    """One line per first-axis index, values comma-separated, no header.

    >>> csv(np.array([[1.5, 2], [3, 4]], dtype=np.float32)), csv(np.float64([0.1, 2]))
    (b'1.5,2.0\\n3.0,4.0\\n', b'0.1\\n2.0\\n')
    """
    rows = array.reshape(array.shape[0], -1) if array.ndim > 1 else array.reshape(-1, 1)
    step = max(1, _JSON_CHUNK_VALUES // max(1, rows.shape[1]))
    lines = []
    for start in range(0, len(rows), step):
        # json_array gives [[a,b],[c,d]]: its numbers hold no brackets or commas to confuse.
        text = json_array(rows[start : start + step])
        lines.append(text[2:-2].replace(b"],[", b"\n") + b"\n")
    return b"".join(lines)


def plotly_figure(array: npt.NDArray[Any], labels: Labels) -> dict[str, Any]:
    """A figure ready for ``Plotly.newPlot``: a heatmap for 2-D arrays, a line for 1-D."""
    values = array.astype(np.float64) if array.dtype == np.float16 else array
    title = labels.title
    if values.ndim == 3:  # a stack (cos and sin, or heads): the first of it
        title += f" (first of {values.shape[0]})"
        values = values[0]
    layout: dict[str, Any] = {
        "title": {"text": title},
        "xaxis": {"title": {"text": labels.x}},
        "yaxis": {"title": {"text": labels.y if values.ndim == 2 else labels.value}},
    }
    if values.ndim == 1:
        trace: dict[str, Any] = {
            "type": "scatter",
            "mode": "lines",
            "y": values,
            "name": labels.value,
        }
        if labels.x_values is not None:
            trace["x"] = labels.x_values
        return {"data": [trace], "layout": layout}
    colours, low, high = colour_limits(values)
    steps = np.linspace(0, 1, len(colours)).tolist()
    heatmap: dict[str, Any] = {
        "type": "heatmap",
        "z": values.reshape(values.shape[0], -1),
        "zmin": low,
        "zmax": high,
        "colorscale": [[step, f"#{colour}"] for step, colour in zip(steps, colours, strict=True)],
        "colorbar": {"title": {"text": labels.value}},
    }
    if labels.x_values is not None:
        heatmap["x"] = labels.x_values
    if labels.y_values is not None:
        heatmap["y"] = labels.y_values
    layout["yaxis"]["autorange"] = "reversed"
    return {"data": [heatmap], "layout": layout}

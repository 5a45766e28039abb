"""The PNG writer and colour maps of app/png.py against the libraries that could replace them.

    .venv/bin/python scripts/png_compare.py          # needs pillow, pypng, cmap, colorcet,
                                                     # matplotlib (pip install them to compare)

Every measurement of an encoder runs in a fresh interpreter, so one encoder's freed memory or
imported modules never flatter the next. Peak memory is measured twice: tracemalloc (what the
service's cost test sees: Python's allocations only) and the rise of the process's resident peak
(VmHWM, reset through /proc/self/clear_refs), which also sees what C libraries malloc.
"""

from __future__ import annotations

import ctypes
import gc
import importlib.metadata
import io
import json
import statistics
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# (label, seq_len, d_model, width, height): sinusoid tables as the service draws them.
CASES = [
    ("64×100 → 256×200 (default size)", 100, 64, None, None),
    ("512×2048 (default size)", 2048, 512, None, None),
    ("512×4096, height=4096", 4096, 512, None, 4096),
    ("2048×2048 (default size)", 2048, 2048, None, None),
    ("4096×4096, the largest", 4096, 4096, 4096, 4096),
]
LEVEL = 6  # zlib's default, and the hand writer's


Pixels = tuple[npt.NDArray[np.uint8], npt.NDArray[np.uint8]]  # colour indices, palette


def _hand_indexed(picture: Pixels) -> bytes:
    from app.png import encode

    return encode(*picture)


def _hand_truecolour(picture: Pixels) -> bytes:
    """app/png.py's writer before it wrote indices: RGB scanlines, filter none."""
    import struct
    import zlib

    indices, palette = picture
    pixels = palette[indices]
    height, width, _ = pixels.shape
    raw = np.concatenate([np.zeros((height, 1), np.uint8), pixels.reshape(height, -1)], axis=1)

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = struct.pack(">I", zlib.crc32(kind + data))
        return struct.pack(">I", len(data)) + kind + data + crc

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw.tobytes(), LEVEL))
        + chunk(b"IEND", b"")
    )


def _pillow_indexed(picture: Pixels) -> bytes:
    from PIL import Image

    indices, palette = picture
    image = Image.fromarray(indices, "P")
    image.putpalette(palette.tobytes())
    out = io.BytesIO()
    image.save(out, "PNG", compress_level=LEVEL)
    return out.getvalue()


def _pillow_truecolour(picture: Pixels) -> bytes:
    from PIL import Image

    indices, palette = picture
    out = io.BytesIO()
    Image.fromarray(palette[indices], "RGB").save(out, "PNG", compress_level=LEVEL)
    return out.getvalue()


def _pypng_indexed(picture: Pixels) -> bytes:
    import png

    indices, palette = picture
    height, width = indices.shape
    out = io.BytesIO()
    colours = [tuple(colour) for colour in palette.tolist()]
    writer = png.Writer(width, height, palette=colours, bitdepth=8, compression=LEVEL)
    writer.write(out, indices)
    return out.getvalue()


def _pypng_truecolour(picture: Pixels) -> bytes:
    import png

    indices, palette = picture
    height, width = indices.shape
    out = io.BytesIO()
    writer = png.Writer(width, height, greyscale=False, bitdepth=8, compression=LEVEL)
    writer.write(out, palette[indices].reshape(height, -1))
    return out.getvalue()


# name → (encoder, the import a cold start pays for it, its distribution)
ENCODERS: dict[str, tuple[Callable[[Pixels], bytes], str, str | None]] = {
    "hand RGB": (_hand_truecolour, "import zlib, struct", None),
    "hand indexed": (_hand_indexed, "import zlib, struct", None),
    "pillow RGB": (_pillow_truecolour, "from PIL import Image, PngImagePlugin", "pillow"),
    "pillow indexed": (_pillow_indexed, "from PIL import Image, PngImagePlugin", "pillow"),
    "pypng RGB": (_pypng_truecolour, "import png", "pypng"),
    "pypng indexed": (_pypng_indexed, "import png", "pypng"),
}


def _decode_pillow(data: bytes) -> npt.NDArray[np.uint8]:
    from PIL import Image

    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))


def _decode_pypng(data: bytes) -> npt.NDArray[np.uint8]:
    import png

    width, height, rows, _ = png.Reader(bytes=data).asRGB8()
    return np.vstack([np.frombuffer(bytes(row), np.uint8) for row in rows]).reshape(
        height, width, 3
    )


def _table(seq_len: int, d_model: int) -> npt.NDArray[np.float32]:
    position = np.arange(seq_len, dtype=np.float64)[:, None]
    i = np.arange(d_model)
    angle = position / 10000.0 ** ((i - i % 2) / d_model)
    return np.where(i % 2 == 0, np.sin(angle), np.cos(angle)).astype(np.float32)


def _status(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise LookupError(field)


def _one(case: int, name: str) -> dict[str, Any]:
    from app.png import heatmap_pixels

    encoder = ENCODERS[name][0]
    _, seq_len, d_model, width, height = CASES[case]
    indices, palette = heatmap_pixels(_table(seq_len, d_model), width, height)
    picture = (indices, palette)
    encoder((indices[:2, :2].copy(), palette))  # lazy imports and first calls are not the encode
    gc.collect()
    ctypes.CDLL("libc.so.6").malloc_trim(0)  # freed heap pages would hide new allocations
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS
    before = _status("VmRSS")
    data = encoder(picture)
    rss_peak = _status("VmHWM") - before
    del data
    times = []
    for _ in range(5):
        start = time.perf_counter()
        data = encoder(picture)
        times.append(time.perf_counter() - start)
    pixels = palette[indices]
    decoded = {"pillow": _decode_pillow(data), "pypng": _decode_pypng(data)}
    exact = all(np.array_equal(d, pixels) for d in decoded.values())
    del data
    gc.collect()
    tracemalloc.start()
    encoder(picture)
    traced_peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return {
        "ms": 1000 * min(times),
        "bytes": len(encoder(picture)),
        "pixels": indices.size,
        "rss_peak": rss_peak,
        "traced_peak": traced_peak,
        "exact": exact,
    }


def _cold_import(statement: str) -> float:
    """Milliseconds ``statement`` adds to a fresh interpreter that has NumPy loaded."""
    code = (
        "import numpy, time; s = time.perf_counter(); "
        + statement
        + "; print(time.perf_counter() - s)"
    )
    runs = [
        float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout)
        for _ in range(5)
    ]
    return 1000 * statistics.median(runs)


def _installed_mb(distribution: str | None) -> float:
    if distribution is None:
        return 0.0
    files = importlib.metadata.distribution(distribution).files or []
    return sum(f.size or 0 for f in files) / 1e6


def _child(*args: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, *args], capture_output=True, text=True, check=True
    ).stdout
    return dict(json.loads(out))


def encoders() -> None:
    print(f"PNG encoders, zlib level {LEVEL}, best of 5 encodes; peaks over the indices held")
    print("(RGB rows include expanding indices to RGB pixels, as truecolour needs: 3 B/px)")
    print(f"{'picture':34} {'encoder':14} {'ms':>7} {'KiB':>7} {'RSS↑ B/px':>10}", end="")
    print(f" {'traced B/px':>11} {'exact':>6}")
    for case, (label, *_) in enumerate(CASES):
        for name in ENCODERS:
            r = _child("--one", str(case), name)
            print(
                f"{label:34} {name:14} {r['ms']:7.1f} {r['bytes'] / 1024:7.0f}"
                f" {r['rss_peak'] / r['pixels']:10.2f} {r['traced_peak'] / r['pixels']:11.2f}"
                f" {'yes' if r['exact'] else 'NO':>6}"
            )
    print()
    print(f"{'encoder':14} {'cold import ms':>15} {'installed MB':>13}")
    for name, (_, statement, distribution) in ENCODERS.items():
        if name.endswith("RGB"):
            continue
        library = name.split()[0]
        print(f"{library:14} {_cold_import(statement):15.1f} {_installed_mb(distribution):13.2f}")


# name → (the import and first LUT a cold start pays for, its distribution)
COLOUR_LIBRARIES = {
    "hand (app.png)": ("from app.png import _lut, _SEQUENTIAL; _lut(_SEQUENTIAL)", None),
    "cmap": ("from cmap import Colormap; Colormap('viridis').lut(256)", "cmap"),
    "colorcet": ("import colorcet; colorcet.cm['bgy']", "colorcet"),
    "matplotlib": ("import matplotlib; matplotlib.colormaps['viridis'](0.5)", "matplotlib"),
}


def _reference(name: str) -> npt.NDArray[np.int64]:
    import matplotlib

    rgba = matplotlib.colormaps[name](np.linspace(0, 1, 256))
    return np.asarray((rgba[:, :3] * 255).round(), dtype=np.int64)


def colour_maps() -> None:
    from cmap import Colormap

    from app import png

    print("Colour maps, 256 entries, max and mean |Δ| against matplotlib's (in 1/255)")
    pairs = {"viridis": png._SEQUENTIAL, "RdBu_r": png._DIVERGING}
    for name, table in pairs.items():
        reference = _reference(name)
        ours = png._lut(table).astype(np.int64)
        lut = Colormap(name if name == "viridis" else "colorbrewer:RdBu_r").lut(256)[:, :3]
        theirs = np.asarray((lut * 255).round(), dtype=np.int64)
        for who, lut_ in (("app.png", ours), ("cmap", theirs)):
            delta = np.abs(lut_ - reference)
            print(f"  {name:8} {who:8} max {delta.max():3d}  mean {delta.mean():5.2f}")
    print()
    print(f"{'colour library':16} {'cold import + LUT ms':>21} {'installed MB':>13}")
    for name, (statement, distribution) in COLOUR_LIBRARIES.items():
        print(f"{name:16} {_cold_import(statement):21.1f} {_installed_mb(distribution):13.2f}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--one"]:
        print(json.dumps(_one(int(sys.argv[2]), sys.argv[3])))
    else:
        encoders()
        print()
        colour_maps()

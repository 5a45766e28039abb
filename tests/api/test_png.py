"""The PNG heatmap against libraries that know better: its colour maps against the published
ones (cmap's data, equal to matplotlib's: scripts/png_compare.py), its files decoded by Pillow."""

from __future__ import annotations

import io

import numpy as np
import numpy.typing as npt
import pytest
from cmap import Colormap
from PIL import Image

from app import png

MAPS = {"viridis": png._SEQUENTIAL, "colorbrewer:RdBu_r": png._DIVERGING}


def reference(name: str, where: npt.ArrayLike) -> npt.NDArray[np.int64]:
    rgba = Colormap(name)(np.asarray(where, dtype=np.float64))
    return np.asarray((rgba[..., :3] * 255).round(), dtype=np.int64)


def decoded(data: bytes) -> npt.NDArray[np.int64]:
    image = Image.open(io.BytesIO(data))
    image.load()  # reads every chunk: a bad CRC or a short IDAT raises here
    return np.asarray(image.convert("RGB"), dtype=np.int64)


@pytest.mark.parametrize("name", list(MAPS))
def test_each_colour_map_is_the_published_one_to_within_one_level(name: str) -> None:
    lut = png._lut(MAPS[name]).astype(np.int64)
    assert np.abs(lut - reference(name, np.linspace(0, 1, 256))).max() <= 1


def test_a_png_decodes_to_the_colours_of_its_values() -> None:
    values = np.array([[0.0, 0.25, 0.5], [0.75, 1.0, 0.125]], dtype=np.float32)
    pixels = decoded(png.png_heatmap(values, width=3, height=2))
    assert np.abs(pixels - reference("viridis", values)).max() <= 1


def test_signed_values_are_drawn_around_a_neutral_zero() -> None:
    values = np.array([[-2.0, 0.0, 1.0, 2.0]])
    pixels = decoded(png.png_heatmap(values, width=4, height=1))
    expected = reference("colorbrewer:RdBu_r", (values + 2) / 4)
    assert np.abs(pixels - expected).max() <= 1


def test_non_finite_values_take_the_ends_of_the_map() -> None:
    values = np.array([[np.nan, 0.0, 1.0, np.inf, -np.inf]])
    pixels = decoded(png.png_heatmap(values, width=5, height=1))
    low, high = reference("viridis", [0.0, 1.0])
    assert pixels[0].tolist() == [
        low.tolist(),
        low.tolist(),
        high.tolist(),
        high.tolist(),
        low.tolist(),
    ]


@pytest.mark.parametrize(("rows", "columns"), [(1, 1), (5, 6), (300, 2), (4096, 512)])
def test_every_size_decodes_to_exactly_the_pixels_drawn(rows: int, columns: int) -> None:
    position = np.arange(rows)[:, None] / 10000 ** (np.arange(columns) / columns)
    values = np.sin(position).astype(np.float32)
    indices, palette = png.heatmap_pixels(values)
    assert np.array_equal(decoded(png.png_heatmap(values)), palette[indices])


def test_limits_as_far_apart_as_float64_allows_are_drawn() -> None:
    """A span past float64's range (once a 500: inf / inf warned in the division)."""
    values = np.array([[-1.7e308, 0.0, 1.7e308, np.inf, np.nan]])
    pixels = decoded(png.png_heatmap(values, width=5, height=1))
    expected = reference("colorbrewer:RdBu_r", [0.0, 0.5, 1.0, 1.0, 0.0])
    assert np.abs(pixels - expected).max() <= 1

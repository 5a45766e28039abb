"""The cos/sin (or angles) a vision tower applies to its patches, from their ``(row, column)``.

Every pair of the head turns by one axis of the patch at one frequency of a one-dimensional rope
(``rope_of``: ``θ^(-2i/d_model)``): which axis and which frequency is the family's
(:func:`columns`). So every value is a value of that rope at one of the patch's two ids, and the
table is the rope's at all ``2n`` ids at once (:func:`posenc.schemes.rope.maths.encode`, exact
or framework), each pair then taken from the row and column it reads, and expanded to the
family's layout: ``rotate_half`` halves (``split``) for Qwen, Kimi and Pixtral, complex pairs
(``interleaved``) for Llama 4. The exact and framework recipes keep their bounds: a value is
only moved, never recomputed.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from posenc.cost import Cost
from posenc.numerics.float32 import Recipe
from posenc.schemes.rope import maths
from posenc.schemes.rope.params import RopeParams
from posenc.schemes.rope.vision.config import VisionRope


def rope_of(vision: VisionRope, recipe: Recipe) -> RopeParams:
    """The one-dimensional rope whose frequencies the tower uses: a half-width head's for Qwen,
    Kimi and Llama 4 (``spatial_dim = d/2``, ``freq_dim = d/2``), the whole head's for Pixtral."""
    width = vision.head_dim if vision.family.kind == "pixtral" else vision.head_dim // 2
    return RopeParams(d_model=width, base=vision.theta, recipe=recipe)


def columns(vision: VisionRope) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]:
    """For each of the ``d/2`` pairs: the axis it turns by (0 row, 1 column) and the index of
    its frequency in :func:`rope_of`'s.

    >>> from posenc.schemes.rope.vision.config import read
    >>> axis, frequency = columns(read({"model_type": "pixtral", "head_dim": 8}))
    >>> axis.tolist(), frequency.tolist()
    ([0, 0, 1, 1], [0, 2, 1, 3])
    """
    quarter = vision.head_dim // 4
    k = np.arange(quarter)
    first, second = np.zeros(quarter, np.intp), np.ones(quarter, np.intp)
    if vision.family.kind == "pixtral":  # inv_freq[0::2] for rows, inv_freq[1::2] for columns
        return np.concatenate([first, second]), np.concatenate([2 * k, 2 * k + 1])
    if vision.family.kind == "llama4":  # the column (x) first
        return np.concatenate([second, first]), np.concatenate([k, k])
    if vision.family.kind == "kimi":  # column then row, frequency by frequency
        return np.tile(np.array([1, 0], np.intp), quarter), np.repeat(k, 2)
    return np.concatenate([first, second]), np.concatenate([k, k])


def shape(vision: VisionRope, patches: int, component: str) -> tuple[int, ...]:
    d = vision.head_dim
    return {"cos_sin": (2, patches, d), "cos": (patches, d), "sin": (patches, d)}.get(
        component, (patches, d // 2)
    )


def encode(
    vision: VisionRope, ids: npt.NDArray[np.int64], recipe: Recipe, dtype: str, component: str
) -> npt.NDArray[np.floating]:
    """``component`` (``cos_sin``, ``cos``, ``sin`` or ``angle``) for the ``(n, 2)`` ids."""
    params = rope_of(vision, recipe)
    n, half = len(ids), params.d_model // 2
    every = maths.encode(params, ids.T.reshape(-1), dtype, component)
    if component != "angle":  # rotate_half's two halves are alike: keep the first
        every = every[..., :half]
    by_axis = every.reshape(*every.shape[:-2], 2, n, half)
    axis, frequency = columns(vision)
    pairs = by_axis[..., axis, :, frequency]  # advanced indices first: (d/2, [2,] n)
    pairs = np.moveaxis(pairs, 0, -1)
    if component == "angle":
        return np.ascontiguousarray(pairs)
    if vision.family.kind == "llama4":
        return np.ascontiguousarray(np.repeat(pairs, 2, axis=-1))
    return np.ascontiguousarray(np.concatenate([pairs, pairs], axis=-1))


def cost(vision: VisionRope, patches: int, recipe: Recipe, dtype: str, component: str) -> Cost:
    """The rope's at ``2 · patches`` ids, the pairs picked (twice: gathered, then moved or
    expanded) and the answer beside them."""
    params = rope_of(vision, recipe)
    every = maths.cost(params, 2 * patches, dtype, component)
    out = math.prod(shape(vision, patches, component)) * np.dtype(dtype).itemsize
    return Cost(every.bytes + 3 * out, every.work + 3 * out)

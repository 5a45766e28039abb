"""``layout_mismatch``: the cache repeats its values as the other layout does, or holds sin
where cos belongs (read by the sense of rotation, or by the error)."""

from __future__ import annotations

import numpy as np

from posenc.conformance import Finding
from posenc.schemes.rope.conformance.rows import DECISIVE, FloatArray, Model, compare, row_width
from posenc.schemes.rope.params import Layout, RopeParams
from posenc.verify import row_chunks


def _duplicated(params: RopeParams, array: FloatArray, component: str, n: int, layout: str) -> bool:
    """Every value written twice as ``layout`` expands cos and sin."""
    h = params.d_model // 2
    for rows in row_chunks(n, row_width(params, component)):
        for plane in (array[0, rows], array[1, rows]) if component == "cos_sin" else (array[rows],):
            first, second = (
                (plane[:, :h], plane[:, h:])
                if layout == "split"
                else (plane[:, 0::2], plane[:, 1::2])
            )
            if not np.array_equal(first, second):
                return False
    return True


def layout_of(
    stated: Model, array: FloatArray, component: str, n: int
) -> tuple[Layout, Finding | None]:
    """The layout whose repetition the cache shows: the stated one unless only the other fits."""
    layout = stated.params.layout
    if component == "angle" or stated.params.d_model == 2:
        return layout, None
    if _duplicated(stated.params, array, component, n, layout):
        return layout, None
    other: Layout = "interleaved" if layout == "split" else "split"
    if not _duplicated(stated.params, array, component, n, other):
        return layout, None
    name = {"split": "split (rotate_half)", "interleaved": "interleaved (GPT-J, every two)"}
    return other, Finding(
        "layout_mismatch",
        f"the cache repeats cos and sin as the {name[other]} layout does, not the stated "
        f"{name[layout]} layout",
        {"matches": other, "stated": layout, "evidence": f"every value equals its {other} twin"},
    )


def swapped(frame: Model, array: FloatArray, component: str, n: int) -> bool:
    """Is sin where cos belongs? For ``cos_sin`` the sense of rotation says: cos then sin turn
    forward with the position, sin then cos backward. For ``cos``/``sin`` alone only the error
    against the other function can say, when nothing else is wrong. O(n·d)."""
    if component == "angle":
        return False
    if component == "cos_sin" and n >= 2:
        h, d = frame.params.d_model // 2, frame.params.d_model
        columns = np.arange(h) if frame.params.layout == "split" else np.arange(0, d, 2)
        turned = 0.0
        for rows in row_chunks(n - 1, 2 * d):
            block = slice(rows.start, rows.stop + 1)
            c = array[0, block][:, columns].astype(np.float64)
            s = array[1, block][:, columns].astype(np.float64)
            turned += float(np.sum(s[1:] * c[:-1] - c[1:] * s[:-1]))
        return turned < 0
    other = Model(frame.params, frame.offset, swapped=True)
    as_swapped = compare(other, array, component, n, 0.0).max_abs
    as_stated = compare(frame, array, component, n, 0.0).max_abs
    return as_swapped <= DECISIVE * as_stated


def swap_finding(component: str, layout: str) -> Finding:
    what = (
        "the first plane holds sin and the second cos"
        if component == "cos_sin"
        else (f"the cache holds {'sin' if component == 'cos' else 'cos'}, not {component}")
    )
    return Finding(
        "layout_mismatch",
        f"sin and cos are exchanged: {what}",
        {"matches": f"{layout} layout with sin and cos exchanged", "stated": layout},
    )

"""The patches of a ``[t, h, w]`` grid in the order a vision tower's attention sees them, each
as the ``(row, column)`` its rope turns by.

- ``qwen`` and ``kimi``: each frame's patches in ``m × m`` merge blocks, blocks in raster order
  (``transformers.vision_utils.get_vision_position_ids``), frame after frame; with Qwen2.5-VL's
  windows, the blocks regrouped window by window (``get_vision_window_index``), as its tower
  permutes hidden states and cos/sin alike before the first block. PaddleOCR-VL's and Kimi's
  blocks are of 1: raster order.
- ``pixtral``: raster order, each of the ``t`` images alike.
- ``llama4``: raster order of its fixed grid counted from 1 (column and row + 1, as its module
  adds), then the CLS token at ``(0, 0)``: it turns by nothing.

>>> from posenc.schemes.rope.vision.config import read
>>> order(read({"model_type": "qwen2_vl"}), (1, 2, 4)).tolist()
[[0, 0], [0, 1], [1, 0], [1, 1], [0, 2], [0, 3], [1, 2], [1, 3]]
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from posenc.errors import InconsistentError, LimitError
from posenc.schemes.rope.vision.config import VisionRope

Ids = npt.NDArray[np.int64]
# Ids past 2^24 would round in float32 (and the merged grid of Qwen2.5-VL's windows is int64).
_LARGEST_SIDE = 2**20


def count(vision: VisionRope, grid: tuple[int, int, int]) -> int:
    """How many patches (rows of the table) the grid gives, checked against the tower."""
    t, h, w = grid
    if max(grid) > _LARGEST_SIDE:
        raise LimitError("grid", f"each of t, h, w must be ≤ 2^20, got {list(grid)}")
    if vision.family.kind == "llama4":
        side = vision.side
        if (t, h, w) != (1, side, side):
            raise InconsistentError(
                "grid",
                f"Llama 4's tower turns one tile of its own {side} × {side} patches "
                f"(image_size / patch_size): give [1, {side}, {side}], got {list(grid)}",
            )
        return h * w + 1
    merge = vision.spatial_merge_size
    if merge is not None and (h % merge or w % merge):
        raise InconsistentError(
            "grid",
            f"h and w must be multiples of spatial_merge_size = {merge}, got {list(grid)}",
        )
    return t * h * w


def order(vision: VisionRope, grid: tuple[int, int, int]) -> Ids:
    """``(n, 2)`` int64: the (row, column) each patch turns by, in the tower's order."""
    count(vision, grid)
    t, h, w = grid
    rows, columns = np.meshgrid(np.arange(h), np.arange(w), indexing="ij")
    if vision.family.kind == "llama4":
        raster = np.stack([rows.reshape(-1) + 1, columns.reshape(-1) + 1], axis=1)
        return np.concatenate([raster, np.zeros((1, 2), np.int64)]).astype(np.int64)
    if vision.spatial_merge_size is None:
        frame = np.stack([rows.reshape(-1), columns.reshape(-1)], axis=1)
        return np.tile(frame, (t, 1)).astype(np.int64)
    m = vision.spatial_merge_size
    blocks = [
        a.reshape(h // m, m, w // m, m).transpose(0, 2, 1, 3).reshape(-1) for a in (rows, columns)
    ]
    ids = np.tile(np.stack(blocks, axis=1), (t, 1)).astype(np.int64)
    if vision.window is None:
        return ids
    unit = m * m
    units = _window_index(t, h // m, w // m, vision.window)
    return ids.reshape(-1, unit, 2)[units].reshape(-1, 2)


def _window_index(t: int, blocks_h: int, blocks_w: int, window: int) -> npt.NDArray[np.intp]:
    """Qwen2.5-VL's order of the merge blocks: window by window (``window`` blocks a side,
    the last ones cut short), each window's blocks in raster order, frame after frame.

    transformers pads each frame to whole windows and drops the padding; sorting by (frame,
    window row, window column, row, column) gives the same order without the padding, which a
    window far larger than the grid would make huge.

    >>> _window_index(1, 2, 3, 2).tolist()
    [0, 1, 3, 4, 2, 5]
    """
    frame, row, column = np.indices((t, blocks_h, blocks_w)).reshape(3, -1)
    keys = (column % window, row % window, column // window, row // window, frame)
    return np.lexsort(keys).astype(np.intp)

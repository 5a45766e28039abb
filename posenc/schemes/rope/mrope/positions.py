"""The ``(3, n)`` position ids (temporal, height, width) of one sequence, as ``get_rope_index``
of transformers 5.23 computes them for the Qwen2-VL, Qwen3-VL, GLM-4V, ERNIE-VL, Qwen2.5-Omni
and GLM-Image families.

Text continues one id a token on all three rows. A vision block of merged grid ``(t, h, w)``
starting at id ``s`` gives ``s + time(i)``, ``s + row``, ``s + column`` in t-major, then h, then
w order, where ``time(i)`` is the frame index, or float32 products truncated where the family
spaces frames in time; what follows resumes at ``s + max(h, w)`` (not at the block's largest
id + 1, as transformers 4 and vLLM did, and the Qwen-Omni thinkers still do: a video's temporal
ids may pass it). The delta a decoder adds to later positions is the largest id + 1 − n
(GLM-Image's is 0).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from posenc.schemes.rope.mrope.families import MRopeFamily
from posenc.schemes.rope.mrope.layout import Run


def sequence_ids(runs: Sequence[Run], family: MRopeFamily) -> tuple[npt.NDArray[np.int64], int]:
    """The ids and delta of one sequence by the family's rules."""
    ids, delta = position_ids(runs, resume_at_max=family.resume == "max")
    return ids, 0 if family.zero_delta else delta


def position_ids(
    runs: Sequence[Run], resume_at_max: bool = False
) -> tuple[npt.NDArray[np.int64], int]:
    """The ids of the runs, and ``next_position_delta`` (``mrope_position_deltas``).

    ``resume_at_max``: each run starts at the largest id so far + 1, the rule of transformers 4
    and vLLM (and still of the Qwen-Omni thinkers).

    >>> from posenc.schemes.rope.mrope.layout import Run
    >>> ids, delta = position_ids([Run("text", 0, count=2), Run("image", 1, grid=(1, 2, 2))])
    >>> ids.tolist(), delta
    ([[0, 1, 2, 2, 2, 2], [0, 1, 2, 2, 3, 3], [0, 1, 2, 3, 2, 3]], -2)
    """
    tokens = sum(run.tokens for run in runs)
    ids = np.empty((3, tokens), np.int64)
    at, start, top = 0, 0, -1
    for run in runs:
        width = run.tokens
        block = _run_ids(run, start)
        ids[:, at : at + width] = block
        at += width
        top = max(top, int(block.max()))
        start = top + 1 if resume_at_max else start + run.advance
    return ids, top + 1 - tokens


def _run_ids(run: Run, start: int) -> npt.NDArray[np.int64]:
    if run.kind == "text":
        return np.arange(start, start + run.count, dtype=np.int64)
    t, h, w = run.grid
    if run.clock is None:
        times = np.arange(t, dtype=np.int64)
    else:  # torch: float32 frame indices times float32 numbers, truncated
        a, b = (np.float32(v) for v in run.clock)
        times = ((np.arange(t, dtype=np.float32) * a) * b).astype(np.int64)
    grid = np.empty((3, t, h, w), np.int64)
    grid[0] = times[:, None, None]
    grid[1] = np.arange(h)[None, :, None]
    grid[2] = np.arange(w)[None, None, :]
    block = grid.reshape(3, t * h * w)
    if run.frames == 1 and run.prefix == run.suffix == 0:
        return block + start
    # A video split into frames: each frame's text, block and text, one frame after another.
    step = run.prefix + max(h, w) + run.suffix
    frames = np.arange(run.frames, dtype=np.int64)[:, None] * step + start
    prefix = frames + np.arange(run.prefix)
    middle = frames[None, :, :] + run.prefix + block[:, None, :]
    suffix = frames + run.prefix + max(h, w) + np.arange(run.suffix)
    rows = np.concatenate(
        [
            np.broadcast_to(prefix, (3, *prefix.shape)),
            middle,
            np.broadcast_to(suffix, (3, *suffix.shape)),
        ],
        axis=2,
    )
    return rows.reshape(3, -1)

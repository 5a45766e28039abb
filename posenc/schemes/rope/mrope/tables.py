"""The cos/sin (or angles) a multimodal model applies for ``(3, n)`` position ids.

Each rotary frequency turns by one of a token's three ids; which one is the family's rule
(:data:`~.families.Rotary`): ``chunked`` gives the first ``section[0]`` frequencies the temporal
id, the next ``section[1]`` the height and the rest the width (Qwen2-VL); ``interleaved`` gives
frequency j the height where ``j % 3 == 1`` and ``j < 3·section[1]``, the width where
``j % 3 == 2`` and ``j < 3·section[2]``, and the temporal id elsewhere (Qwen3-VL); GLM-4V takes
the chunks and expands them pairwise (its rope is laid out ``interleaved``). Every value is
therefore a value of the one-dimensional rope at one of the token's ids: the tables are the
text rope's at all ``3n`` ids at once (so that dynamic scaling sees the largest of them, as
transformers does), each column then taken from the row its frequency reads. Exact and
framework recipes alike keep their bounds.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from posenc.cost import Cost
from posenc.errors import InconsistentError
from posenc.schemes.rope import maths
from posenc.schemes.rope.mrope.families import Rotary
from posenc.schemes.rope.params import RopeParams


def frequency_rows(rotary: Rotary, section: tuple[int, ...], half: int) -> npt.NDArray[np.intp]:
    """Which id (0 temporal, 1 height, 2 width) each of ``half`` frequencies turns by."""
    j = np.arange(half)
    if rotary == "interleaved":
        rows = np.zeros(half, np.intp)
        rows[(j % 3 == 1) & (j < 3 * section[1])] = 1
        rows[(j % 3 == 2) & (j < 3 * section[2])] = 2
        return rows
    if rotary == "ernie":
        raise InconsistentError(
            "config.model_type", "ERNIE-VL's permuted frequencies: not answered"
        )
    if sum(section) != half:  # config.check_widths refuses it first, naming the field
        raise InconsistentError(
            "mrope_section", f"{list(section)} does not split {half} frequencies"
        )
    return np.repeat(np.arange(3), section).astype(np.intp)


def _column_rows(
    params: RopeParams, rows: npt.NDArray[np.intp], component: str
) -> npt.NDArray[np.intp]:
    if component == "angle":
        return rows
    if params.layout == "split":
        return np.concatenate([rows, rows])
    return np.repeat(rows, 2)


def encode(
    params: RopeParams,
    ids: npt.NDArray[np.int64],
    rotary: Rotary,
    section: tuple[int, ...],
    dtype: str,
    component: str,
) -> npt.NDArray[np.floating]:
    """``component`` (``cos_sin``, ``cos``, ``sin`` or ``angle``) for the ``(3, n)`` ids."""
    three, n = ids.shape
    rows = frequency_rows(rotary, section, params.d_model // 2)
    columns = _column_rows(params, rows, component)
    every = maths.encode(params, ids.reshape(-1), dtype, component)
    stacked = every.reshape(*every.shape[:-2], three, n, every.shape[-1])
    chosen = np.take_along_axis(stacked, _index(stacked.ndim, columns), axis=-3)
    return np.ascontiguousarray(chosen[..., 0, :, :])


def _index(ndim: int, columns: npt.NDArray[np.intp]) -> npt.NDArray[np.intp]:
    """``columns`` shaped to pick, along the ids axis (third from last), one row a column."""
    return columns.reshape((1,) * (ndim - 3) + (1, 1, -1))


def cost(params: RopeParams, tokens: int, dtype: str, component: str) -> Cost:
    """The text rope's at ``3 · tokens`` ids, and the chosen columns beside it."""
    every = maths.cost(params, 3 * tokens, dtype, component)
    out = math.prod(maths.shape(params, tokens, component)) * np.dtype(dtype).itemsize
    return Cost(every.bytes + out, every.work + out)

"""Tables built the way real code builds them, faults included: the inputs of /verify's tests."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from posenc import SinusoidalParams, table

Table = npt.NDArray[np.floating]


def _bfloat16(values: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """Round float32 values to bfloat16's 8-bit significand (nearest, ties to even)."""
    bits = values.astype(np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return rounded.astype(np.uint32).view(np.float32)


def _assemble(sin: Table, cos: Table, layout: str, d_model: int) -> Table:
    out = np.empty((sin.shape[0], d_model), dtype=sin.dtype)
    h = (d_model + 1) // 2
    if layout == "interleaved":
        out[:, 0::2], out[:, 1::2] = sin, cos[:, : d_model // 2]
    else:
        out[:, :h], out[:, h:] = sin, cos[:, : d_model // 2]
    return out


def float32_angles(d_model: int, seq_len: int, offset: int = 0, base: float = 10000.0) -> Table:
    """The common PyTorch recipe: inverse frequencies and angles in float32."""
    exponent = np.arange(0, d_model, 2, dtype=np.float32) / np.float32(d_model)
    inv_freq = (np.float32(1.0) / np.float32(base) ** exponent).astype(np.float32)
    positions = np.arange(offset, offset + seq_len, dtype=np.float32)[:, None]
    angles = positions * inv_freq
    return _assemble(np.sin(angles), np.cos(angles), "interleaved", d_model)


def bfloat16_inverse_frequencies(d_model: int, seq_len: int) -> Table:
    """Inverse frequencies cast to bfloat16 before the product, angles then in float32."""
    exponent = np.arange(0, d_model, 2, dtype=np.float32) / np.float32(d_model)
    inv_freq = _bfloat16(np.float32(1.0) / np.float32(10000.0) ** exponent)
    angles = np.arange(seq_len, dtype=np.float64)[:, None] * inv_freq.astype(np.float64)
    return _assemble(np.sin(angles), np.cos(angles), "interleaved", d_model).astype(np.float32)


def bfloat16_positions(d_model: int, seq_len: int) -> Table:
    """Positions held in bfloat16: above 256 neighbours share a value."""
    positions = _bfloat16(np.arange(seq_len, dtype=np.float32)).astype(np.float64)
    return np.stack([table(SinusoidalParams(d_model=d_model), 1, int(p))[0] for p in positions])


def correct(d_model: int, seq_len: int, dtype: str = "float32", **params: object) -> Table:
    return table(SinusoidalParams(d_model=d_model, **params), seq_len, 0, dtype)  # type: ignore[arg-type]


def sin_cos_swapped(d_model: int, seq_len: int) -> Table:
    t = correct(d_model, seq_len).copy()
    t[:, 0::2], t[:, 1::2] = t[:, 1::2].copy(), t[:, 0::2].copy()
    return t

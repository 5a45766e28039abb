"""The GenAI model builder's float32 cache, operation by operation (``onnxruntime-genai``).

onnxruntime-genai 0.18's ``make_rotary_embedding_caches_from_scratch`` (``builders/base.py``)
computes, in torch float32::

    inv_freq = 1.0 / (rescale_factors * theta ** (torch.arange(0, dim, 2).float() / dim))
    t = torch.arange(cache_length).type_as(inv_freq)
    cos_cache = torch.outer(t, inv_freq).cos() * mscale        (likewise sin)

where ``rescale_factors`` is 1, linear scaling's factor (a Python float) or LongRoPE's
short or long factors (a float32 tensor), and ``mscale`` LongRoPE's attention factor — then
casts to the model's type (float16 for CUDA, DirectML, WebGPU). That differs from
transformers' float32 recipe (:mod:`..recipes.framework`) in one place: linear scaling
multiplies the power by the factor before the reciprocal, where transformers divides the
reciprocal by it. Its llama3 and YaRN rescalings are its own code (Python loops over float32
scalars, YaRN's ramp unrounded): not reproduced here, so a cache of those scalings is equal to
transformers' recipe or to none.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from posenc.numerics.float32 import F32, Float32Array, angles, power, reciprocal, scalar, sincos
from posenc.schemes.rope.params import RopeParams

NAME = "onnxruntime-genai"


def rows(
    params: RopeParams, seq_len: int, positions: npt.NDArray[np.int64], attention: float
) -> tuple[Float32Array, Float32Array] | None:
    """The builder's cos and sin ``(n, d/2)`` for ``params`` with cos and sin multiplied by
    ``attention``; None for a rope it does not compute this way."""
    dim = params.d_model
    if params.rotary_pairs is not None or params.scaling not in ("none", "linear", "longrope"):
        return None
    exponents = (np.arange(0, dim, 2, dtype=F32) / scalar(dim)).astype(F32)
    powers = power(scalar(params.base), exponents)
    if params.scaling == "linear":
        assert params.factor is not None
        powers = (scalar(params.factor) * powers).astype(F32)
    elif params.scaling == "longrope":
        original = params.original_max_position_embeddings or 0
        chosen = params.long_factor if seq_len > original else params.short_factor
        powers = (np.array(chosen, dtype=np.float64).astype(F32) * powers).astype(F32)
    if params.freq_factors is not None:
        powers = (np.array(params.freq_factors, dtype=np.float64).astype(F32) * powers).astype(F32)
    inv_freq = reciprocal(powers)
    sin, cos = sincos(angles(positions, inv_freq))
    scale = scalar(attention)
    return (cos * scale).astype(F32), (sin * scale).astype(F32)

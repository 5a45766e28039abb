"""llama.cpp's arguments to ``ggml_rope_ext`` for a model's rope, derived apart from posenc's
recipe, for the tests that run ggml itself (:mod:`.runtimes`) at parameters no record covers:
the converter's factor tensors in torch, its own expressions (``conversion/llama.py``,
``phi.py``), and ``llama-context.cpp``'s float32 scalars in NumPy with this machine's libm.
``tests/gguf/test_llama_cpp_records.py`` holds it to what llama.cpp itself passed.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import math
import platform
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from posenc.schemes.rope.params import RopeParams

_f = np.float32
_libm = ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6")
_libm.logf.restype, _libm.logf.argtypes = ctypes.c_float, [ctypes.c_float]
_libm.fmaf.restype, _libm.fmaf.argtypes = ctypes.c_float, [ctypes.c_float] * 3


@dataclass(frozen=True)
class Call:
    """The arguments of one ``ggml_rope_ext`` call (float32 values), ``factors`` its ``src[2]``."""

    n_dims: int
    mode: int
    n_ctx_orig: int
    freq_base: float
    freq_scale: float
    ext_factor: float
    attn_factor: float
    beta_fast: float
    beta_slow: float
    factors: tuple[float, ...] | None

    @classmethod
    def of_node(cls, node: Mapping[str, Any]) -> Call:
        """The call a rope node recorded from llama.cpp shows (tests/gguf/records)."""
        names = [name for name in cls.__dataclass_fields__ if name != "factors"]
        factors = node["factors"]
        return cls(
            **{n: node[n] for n in names}, factors=None if factors is None else tuple(factors)
        )


def _logf(x: np.float32) -> np.float32:
    return _f(_libm.logf(x))


def _multiply_add(a: np.float32, b: np.float32, c: np.float32) -> np.float32:
    # libllama is built for its architecture's baseline: no FMA on x86-64, so a·b + c rounds
    # twice there; AArch64's baseline has FMA, which GCC contracts into.
    if platform.machine().lower() in ("aarch64", "arm64"):
        return _f(_libm.fmaf(a, b, c))
    return _f(_f(a * b) + c)


def yarn_attn_factor(freq_scale: np.float32, log_mul: np.float32, deepseek2: bool) -> np.float32:
    """llama-context.cpp, for ``yarn_ext_factor ≠ 0``: ``get_mscale`` of ``1/freq_scale`` (the
    ratio of two with a ``yarn_log_multiplier``), times ``1/(1 + 0.1·logf(factor))``."""
    factor = _f(_f(1) / freq_scale)

    def get_mscale(mscale: np.float32) -> np.float32:
        if factor <= _f(1):
            return _f(1)
        return _multiply_add(_f(_f(0.1) * mscale), _logf(factor), _f(1))

    if log_mul != 0:
        mscale = log_mul if deepseek2 and log_mul != _f(1) else _f(1)
        attention = _f(get_mscale(mscale) / get_mscale(log_mul))
    else:
        attention = get_mscale(_f(1))
    growth = _multiply_add(_f(0.1), _logf(factor), _f(1))
    return _f(attention * _f(_f(1) / growth))


def llama3_rope_freqs(params: RopeParams) -> tuple[float, ...]:
    """``rope_freqs`` as ``conversion/llama.py``'s ``generate_extra_tensors`` computes it."""
    import torch

    base, dim = params.base, params.d_model
    factor = params.factor or 8.0
    low = 1.0 if params.low_freq_factor is None else params.low_freq_factor
    high = 4.0 if params.high_freq_factor is None else params.high_freq_factor
    old = params.original_max_position_embeddings or 8192
    freqs = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
    factors: list[Any] = []
    for freq in freqs:
        wavelen = 2 * math.pi / freq
        if wavelen < old / high:
            factors.append(1)
        elif wavelen > old / low:
            factors.append(factor)
        else:
            smooth = (old / wavelen - low) / (high - low)
            factors.append(1 / ((1 - smooth) / factor + smooth))
    return tuple(float(x) for x in torch.tensor(factors, dtype=torch.float32))


def call(params: RopeParams) -> Call:
    """What llama.cpp passes ggml for a file converted from a model whose rope is ``params``
    (DeepSeek-2's rule where ``mscale_all_dim`` is given; ``n_ctx``, padded to 256 as
    llama_context pads it, chooses LongRoPE's factors)."""
    factor = _f(params.factor or 1.0)
    scaled = params.scaling in ("linear", "yarn")
    freq_scale = _f(1) / factor if scaled else _f(1)
    attn, factors = _f(1), None
    original = params.original_max_position_embeddings or 0
    if params.scaling == "yarn":
        log_mul = _f(_f(0.1 * params.mscale_all_dim) / _f(0.1)) if params.mscale_all_dim else _f(0)
        attn = yarn_attn_factor(freq_scale, log_mul, deepseek2=True)
    elif params.scaling == "llama3":
        factors = llama3_rope_freqs(params)
    elif params.scaling == "longrope":
        n_ctx = params.n_ctx or int(original * float(factor))
        padded = -(-n_ctx // 256) * 256
        chosen = params.long_factor if padded > original else params.short_factor
        factors = tuple(float(_f(x)) for x in chosen or ())
        # phi.py, in double; the writer stores it as float32
        scale = float(factor)
        attn = _f(math.sqrt(1 + math.log(scale) / math.log(original)) if scale > 1 else 1.0)
        if params.attention_factor is not None:
            attn = _f(params.attention_factor)
    if params.freq_factors is not None:
        factors = tuple(float(_f(x)) for x in params.freq_factors)
    return Call(
        n_dims=params.d_model,
        mode=0 if params.layout == "interleaved" else 2,
        n_ctx_orig=original,
        freq_base=float(_f(params.base)),
        freq_scale=float(freq_scale),
        ext_factor=1.0 if params.scaling == "yarn" else 0.0,
        attn_factor=float(attn),
        beta_fast=float(_f(params.beta_fast or 32.0)),
        beta_slow=float(_f(params.beta_slow or 1.0)),
        factors=factors,
    )

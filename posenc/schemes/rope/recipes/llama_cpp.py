"""llama.cpp's rope call and the float32 scalar arithmetic it derives its arguments with, shared by
the recipe that computes its rows (:mod:`.ggml`, from a model's rope) and the reader of what a
GGUF file makes it pass (:mod:`..gguf.rules`, from the file's keys).

The scalars go through this machine's libm (``logf``, ``powf``, ``fmaf`` …): glibc's ``logf``
is not correctly rounded everywhere, and llama.cpp built here calls the same functions, so
the same bits come out. Whether ``a·b + c`` is one rounding depends on where it is compiled:
ggml-cpu is built with ``-march=native`` and GCC contracts it into an FMA on a processor that
has one (``fmaf``); libllama, where llama-context.cpp derives the attention factor, is built
for its architecture's baseline, which on x86-64 has no FMA, so there it is two roundings
(objdump of llama-cpp-python 0.3.36's build here: no ``vfmadd`` in libllama.so, 1785 in
libggml-cpu.so). AArch64's baseline has FMA, and GCC contracts there by default.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import platform
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

import numpy as np

from posenc.numerics.float32 import F32

_FUNCTIONS = {"powf": 2, "logf": 1, "floorf": 1, "ceilf": 1, "fmaf": 3}
# Whether libllama's a·b + c is one rounding (see the module's docstring).
LIBLLAMA_CONTRACTS = platform.machine().lower() in ("aarch64", "arm64")


# ggml's rope types (ggml.h: GGML_ROPE_TYPE_*), as llama.cpp names them: NORMAL turns pairs
# (2i, 2i+1), NEOX and the multimodal ones (i, i + n_dims/2).
RopeType = Literal["norm", "neox", "mrope", "imrope", "vision"]
MODES: dict[RopeType, int] = {"norm": 0, "neox": 2, "mrope": 8, "vision": 24, "imrope": 40}


@dataclass(frozen=True)
class RopeCall:
    """One ``ggml_rope_ext`` (or ``ggml_rope_multi``) call as llama.cpp makes it: its scalars
    (float32 values), its rope type, M-RoPE's sections and the factor tensor's values — whether
    derived from a model's rope (:mod:`.ggml`) or read from a GGUF file (:mod:`..gguf.rules`)."""

    n_dims: int
    n_ctx_orig: int
    freq_base: float
    freq_scale: float
    ext_factor: float
    attn_factor: float
    beta_fast: float
    beta_slow: float
    rope_type: RopeType
    sections: tuple[int, ...] | None = None
    freq_factors: tuple[float, ...] | None = None

    @property
    def mode(self) -> int:
        return MODES[self.rope_type]


@lru_cache(maxsize=1)
def _libm() -> ctypes.CDLL:
    library = ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6")
    for name, arguments in _FUNCTIONS.items():
        function = getattr(library, name)
        function.restype = ctypes.c_float
        function.argtypes = [ctypes.c_float] * arguments
    return library


def libm(function: str, *arguments: float | np.floating[Any]) -> np.float32:
    """This machine's libm float32 ``function`` (one of ``powf``, ``logf``, ``floorf``,
    ``ceilf``, ``fmaf``)."""
    return F32(getattr(_libm(), function)(*(F32(a) for a in arguments)))


def _libllama_multiply_add(a: np.float32, b: np.float32, c: np.float32) -> np.float32:
    """``a·b + c`` as libllama computes it: contracted where its build has FMA, else rounded
    twice."""
    if LIBLLAMA_CONTRACTS:
        return libm("fmaf", a, b, c)
    return F32(F32(a * b) + c)


def get_mscale(scale: np.float32, mscale: np.float32) -> np.float32:
    """llama-context.cpp's ``get_mscale``: ``0.1f·mscale·logf(scale) + 1.0f``."""
    if scale <= F32(1):
        return F32(1)
    return _libllama_multiply_add(F32(F32(0.1) * mscale), libm("logf", scale), F32(1))


def yarn_growth(factor: np.float32) -> np.float32:
    """``1 + 0.1·logf(factor)`` as ggml-cpu's ``rope_yarn`` multiplies cos and sin by it
    (``factor = 1/freq_scale``), contracted."""
    return libm("fmaf", F32(0.1), libm("logf", factor), F32(1))


def yarn_attention(
    factor: np.float32,
    mscale: float | np.floating[Any] = 1.0,
    mscale_all_dims: float | np.floating[Any] = 0.0,
) -> np.float32:
    """llama-context.cpp's ``yarn_attn_factor`` before the file's ``rope.scaling.attn_factor``
    multiplies it: ``get_mscale(factor, mscale) / get_mscale(factor, mscale_all_dims)`` with a
    ``yarn_log_multiplier`` (``mscale_all_dims``), else ``get_mscale(factor, 1)``; then the
    growth ggml will multiply by again is cancelled."""
    if mscale_all_dims != 0:
        ratio = get_mscale(factor, F32(mscale)) / get_mscale(factor, F32(mscale_all_dims))
        attention = F32(ratio)
    else:
        attention = get_mscale(factor, F32(1))
    # llama-context.cpp's own 1 + 0.1·logf(factor), which ggml's growth will cancel.
    growth = _libllama_multiply_add(F32(0.1), libm("logf", factor), F32(1))
    return F32(attention * F32(F32(1) / growth))

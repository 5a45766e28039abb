"""llama.cpp's float32 scalars (posenc.schemes.rope.recipes.llama_cpp) against what llama.cpp
itself computed here, and the one rounding choice the source cannot settle alone."""

from __future__ import annotations

import platform

import pytest

from posenc.numerics.float32 import F32
from posenc.schemes.rope.recipes import llama_cpp
from posenc.schemes.rope.recipes.llama_cpp import get_mscale, libm, yarn_attention

# Each rope node's attn_factor op_param, read through llama.cpp's eval callback (llama.cpp
# 0c1e57098, llama-cpp-python 0.3.36 built on this machine), for tiny Qwen2 models converted by
# its converter with YaRN of these factors: 1 + 0.1·ln f, divided back out in float32.
MEASURED_ATTN_FACTOR = {2.5: 1.0, 4.0: 1.0, 7.0: 1.0, 16.0: 1.0, 40.0: 1.0}


@pytest.mark.parametrize("factor", MEASURED_ATTN_FACTOR)
def test_yarn_attention_is_what_llama_cpp_passed_ggml(factor: float) -> None:
    freq_scale = F32(1) / F32(factor)  # llama.cpp's factor is 1/freq_scale, both float32
    assert float(yarn_attention(F32(1) / freq_scale)) == MEASURED_ATTN_FACTOR[factor]


@pytest.mark.skipif(platform.machine() != "x86_64", reason="x86-64's libllama has no FMA")
def test_libllama_rounds_its_multiply_add_twice_on_x86_64() -> None:
    # A factor and multiplier where one rounding and two differ: libllama, built without
    # -march (objdump: no vfmadd in it), computes 0.1f·m·logf(s) + 1.0f with two.
    scale, mscale = F32(32.0), F32(0.35)
    two = F32(F32(F32(F32(0.1) * mscale) * libm("logf", scale)) + F32(1))
    one = libm("fmaf", F32(F32(0.1) * mscale), libm("logf", scale), F32(1))
    assert one != two  # the case tells the two apart
    assert not llama_cpp.LIBLLAMA_CONTRACTS
    assert get_mscale(scale, mscale) == two

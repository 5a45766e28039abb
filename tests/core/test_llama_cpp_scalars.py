"""llama.cpp's float32 scalars (posenc.schemes.rope.recipes.llama_cpp) against what llama.cpp
itself passed ggml: YaRN's attention factor for every factor 1.25 … 63.75 in steps of 0.25
(tests/gguf/records/yarn.json, written by ``python -m tests.gguf.records``), without a
``yarn_log_multiplier`` (Qwen2) and with DeepSeek-2's, which its converter writes from
``mscale_all_dim``."""

from __future__ import annotations

import dataclasses
import platform

import numpy as np
import pytest

from posenc.numerics.float32 import F32
from posenc.schemes.rope.params import RopeParams
from posenc.schemes.rope.recipes import ggml, llama_cpp
from posenc.schemes.rope.recipes.llama_cpp import libm, yarn_attention
from tests.gguf.records import load

RECORD = load("yarn")
SWEEPS = {sweep["family"]: sweep for sweep in RECORD["sweeps"]}
# libllama's arithmetic is its build's: the records hold on the machine they were measured on.
pytestmark = pytest.mark.skipif(
    platform.machine() != RECORD["machine"], reason=f"measured on {RECORD['machine']}"
)


def _measured(family: str) -> dict[float, float]:
    sweep = SWEEPS[family]
    return dict(zip(sweep["factors"], sweep["attn_factor"], strict=True))


def _contracted(factor: float) -> np.float32:
    """YaRN's attention factor as a libllama built with FMA would compute it: each
    ``0.1·logf(f) + 1`` one rounding (llama-context.cpp's get_mscale and its growth)."""
    f = F32(1) / (F32(1) / F32(factor))
    growth = libm("fmaf", F32(0.1), libm("logf", f), F32(1))
    return F32(growth * F32(F32(1) / growth))


def test_yarn_attention_is_what_llama_cpp_passed_ggml_at_every_factor() -> None:
    measured = _measured("qwen2")
    assert len(measured) == 251
    ours = {f: float(yarn_attention(F32(1) / (F32(1) / F32(f)))) for f in measured}
    assert ours == measured


def test_the_measured_factors_tell_the_real_attention_factor_from_a_constant_one() -> None:
    """At 35 of the 251 factors llama.cpp passes ggml 1 − 2^-24, not 1: a yarn_attention that
    returned the constant 1.0 fails the test above."""
    away = [f for f, value in _measured("qwen2").items() if value != 1.0]
    assert len(away) == 35 and 5.5 in away and 29.75 in away


@pytest.mark.skipif(platform.machine() != "x86_64", reason="x86-64's libllama has no FMA")
def test_libllama_rounds_its_multiply_add_twice_on_x86_64() -> None:
    """Of the 251 factors three tell one rounding of 0.1·logf(f) + 1 from two: llama.cpp's own
    values there are two roundings' (libllama is built without -march; objdump finds no vfmadd
    in it), and a contracted build's would differ."""
    measured = _measured("qwen2")
    telling = [f for f in measured if float(_contracted(f)) != measured[f]]
    assert telling == [21.5, 24.5, 29.75]
    assert not llama_cpp.LIBLLAMA_CONTRACTS
    for factor in telling:
        assert float(yarn_attention(F32(1) / (F32(1) / F32(factor)))) == measured[factor]


@pytest.mark.parametrize("family", ["deepseek2-v2", "deepseek2-v3"])
def test_deepseek2_s_attention_from_mscale_all_dim_is_what_llama_cpp_passed(family: str) -> None:
    """DeepSeek-2's converter writes yarn_log_multiplier = 0.1·mscale_all_dim; llama.cpp divides
    it by 0.1f and, for DeepSeek-2, takes mscale equal to it: the ratio of get_mscales is 1,
    and the attention factor 1/(1 + 0.1·logf(f)) — measured, never 1.0."""
    sweep = SWEEPS[family]
    given = RopeParams(
        d_model=32,
        layout="interleaved",
        scaling="yarn",
        factor=2.0,
        original_max_position_embeddings=sweep["original_max_position_embeddings"],
        mscale=sweep["mscale"],
        mscale_all_dim=sweep["mscale_all_dim"],
        recipe="ggml",
    )
    measured = _measured(family)
    derived = {f: ggml.derive(dataclasses.replace(given, factor=f)).attn_factor for f in measured}
    assert derived == measured
    assert all(value != 1.0 for f, value in measured.items() if f > 1)
    # Without a yarn_log_multiplier the attention factor is Qwen2's, a different rule.
    assert any(measured[f] != value for f, value in _measured("qwen2").items())

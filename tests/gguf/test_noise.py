"""The recipe noise a GGUF answer reports beside its verdict: llama.cpp's table against the
model's exact one and transformers' float32 recipe, at the positions before n_ctx."""

from __future__ import annotations

import pytest

from posenc.schemes.rope.gguf.conformance import NOISE_POSITIONS, recipe_noise


def test_llama_3_s_rope_at_a_million_is_hundredths_from_exact_and_from_transformers() -> None:
    """The issue's measurement: ggml vs exact 6.2e-2 and vs transformers 7.8e-2 in cos near
    10^6 (d 128, base 500000); sin is as far."""
    params = {"d_model": 128, "base": 500000.0, "layout": "split", "scaling": "none"}
    noise = recipe_noise(params, params, 1_000_000)
    assert noise is not None
    assert noise["positions"] == [1_000_000 - NOISE_POSITIONS, 999_999]
    assert 1e-2 < noise["exact"] < 0.2
    assert 1e-2 < noise["transformers"] < 0.2


def test_at_a_short_context_the_recipes_agree_to_float32_s_rounding() -> None:
    params = {"d_model": 64, "base": 10000.0, "layout": "interleaved", "scaling": "none"}
    noise = recipe_noise(params, {**params, "layout": "split"}, 64)
    assert noise is not None
    # float32's rounding of angles below 64 radians: a few 2^-24·64
    assert noise["exact"] < 2e-5 and noise["transformers"] < 4e-5


@pytest.mark.parametrize("model_width", [32, 128])
def test_ropes_of_other_widths_have_no_noise_to_report(model_width: int) -> None:
    file = {"d_model": 64, "base": 10000.0, "layout": "split", "scaling": "none"}
    noise = recipe_noise(file, {**file, "d_model": model_width}, 4096)
    assert noise is None

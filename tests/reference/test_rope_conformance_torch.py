"""RoPE conformance on caches that torch and transformers build, faults included: each finding
fires on the cache real code makes with that fault, and stays silent on a correct one."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import torch
from transformers import GPTNeoXConfig, LlamaConfig
from transformers.models.gpt_neox.modeling_gpt_neox import GPTNeoXRotaryEmbedding
from transformers.models.gptj.modeling_gptj import create_sinusoidal_positions
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

from posenc.schemes.rope import conformance as rope_conformance
from posenc.schemes.rope.params import RopeParams
from posenc.schemes.rope.scaling import scaled
from tests.hub_configs import llama_31_rope_scaling

D = 128
N = 1024


@pytest.fixture(autouse=True)
def _quiet_transformers() -> Iterator[None]:
    logging.disable(logging.WARNING)  # its config validation warns about test-sized contexts
    yield
    logging.disable(logging.NOTSET)


def llama_cache(
    positions: torch.Tensor, base: float = 500000.0, **rope_parameters: Any
) -> np.ndarray:
    """transformers' LlamaRotaryEmbedding forward: ``(2, n, D)`` float32, cos then sin."""
    rope_type = rope_parameters.pop("rope_type", "default")
    config = LlamaConfig(
        hidden_size=2 * D,
        num_attention_heads=2,
        head_dim=D,
        max_position_embeddings=rope_parameters.pop("max_position_embeddings", 131072),
        rope_parameters={"rope_type": rope_type, "rope_theta": base, **rope_parameters},
    )
    cos, sin = LlamaRotaryEmbedding(config)(torch.zeros(1, 1, D), positions[None])
    return np.stack([cos[0].numpy(), sin[0].numpy()])


def diagnosis(params: RopeParams, array: np.ndarray, component: str, offset: int) -> Any:
    return rope_conformance.check(params, array, component, offset)


def named(result: Any) -> list[str]:
    return [f.name for f in result.diagnosis]


def evidence(result: Any, name: str) -> dict[str, Any]:
    (found,) = [f for f in result.diagnosis if f.name == name]
    return dict(found.evidence)


LLAMA3: dict[str, Any] = llama_31_rope_scaling()
OURS_LLAMA3 = RopeParams(
    d_model=D,
    base=500000.0,
    scaling="llama3",
    factor=8.0,
    low_freq_factor=1.0,
    high_freq_factor=4.0,
    original_max_position_embeddings=8192,
)


@pytest.mark.parametrize("offset", [0, 60_000])
@pytest.mark.parametrize("component", ["cos_sin", "cos", "sin"])
def test_llama_float32_cache_is_the_framework_recipe_and_nothing_else(
    component: str, offset: int
) -> None:
    cache = llama_cache(torch.arange(offset, offset + N), **dict(LLAMA3))
    array = cache if component == "cos_sin" else cache[0 if component == "cos" else 1]
    result = diagnosis(OURS_LLAMA3, array, component, offset)
    assert set(named(result)) <= {"matches_framework_recipe", "angle_precision", "value_rounding"}
    assert "matches_framework_recipe" in named(result)
    found = evidence(result, "matches_framework_recipe")
    assert found["max_abs_error_from_exact"] == result.max_abs_error
    assert found["exceeds_tolerance_from_position"] == result.first_bad_position


def test_a_correct_cache_in_torch_float64_is_silent_but_for_rounding() -> None:
    # Exact up to float64's own rounding: the angles and cos/sin in double precision.
    positions = torch.arange(0, N, dtype=torch.float64)
    inv_freq = 1.0 / 500000.0 ** (torch.arange(0, D, 2, dtype=torch.float64) / D)
    emb = torch.cat([torch.outer(positions, inv_freq)] * 2, dim=-1)
    cache = torch.stack([emb.cos(), emb.sin()]).to(torch.float32).numpy()
    result = diagnosis(RopeParams(d_model=D, base=500000.0), cache, "cos_sin", 0)
    assert named(result) == ["value_rounding"]


def test_llama_rotary_with_the_wrong_base_is_fitted() -> None:
    cache = llama_cache(torch.arange(N), base=10000.0)
    result = diagnosis(RopeParams(d_model=D, base=500000.0), cache, "cos_sin", 0)
    assert named(result)[0] == "base_mismatch"
    assert evidence(result, "base_mismatch")["fitted_base"] == 10000.0
    assert set(named(result)) <= {"base_mismatch", "angle_precision"}


def test_llama_rotary_with_llama3_scaling_where_none_was_stated_is_fitted() -> None:
    cache = llama_cache(torch.arange(N), **dict(LLAMA3))
    result = diagnosis(RopeParams(d_model=D, base=500000.0), cache, "cos_sin", 0)
    found = evidence(result, "scaling_mismatch")
    assert (found["fitted_scaling"], found["fitted_factor"]) == ("llama3", 8.0)
    assert found["fitted_original_max_position_embeddings"] == 8192


def test_yarn_without_its_attention_factor_is_fitted() -> None:
    # A port that takes YaRN's frequencies but drops transformers' attention scaling.
    config: dict[str, Any] = {
        "rope_type": "yarn",
        "factor": 4.0,
        "original_max_position_embeddings": 32768,
    }
    cache = llama_cache(torch.arange(N), base=1e6, **config)
    ours = RopeParams(
        d_model=D, base=1e6, scaling="yarn", factor=4.0, original_max_position_embeddings=32768
    )
    attention = float(scaled(ours, N)[1])
    unscaled = (cache / np.float32(attention)).astype(np.float32)
    result = diagnosis(ours, unscaled, "cos_sin", 0)
    assert "attention_factor_mismatch" in named(result)
    assert evidence(result, "attention_factor_mismatch")["fitted_factor"] == pytest.approx(1.0)


def test_positions_held_in_bfloat16_collapse() -> None:
    offset = 2000
    held = torch.arange(offset, offset + N).to(torch.bfloat16).to(torch.int64)
    cache = llama_cache(held)
    result = diagnosis(RopeParams(d_model=D, base=500000.0), cache, "cos_sin", offset)
    assert named(result) == ["collapsed_positions"]
    assert evidence(result, "collapsed_positions")["first_collapsed_position"] == offset + 1


def test_gptj_interleaved_cache_against_a_stated_rotate_half_layout() -> None:
    # GPT-J: sin/cos of (n, d/2) repeated every two (repeat_interleave), then rotate_every_two.
    table = create_sinusoidal_positions(N, D)  # (n, d): sin half then cos half, base 10000
    sin, cos = torch.chunk(table, 2, dim=-1)
    cache = torch.stack([cos.repeat_interleave(2, -1), sin.repeat_interleave(2, -1)]).numpy()
    result = diagnosis(RopeParams(d_model=D, base=10000.0), cache, "cos_sin", 0)
    assert named(result)[0] == "layout_mismatch"
    assert evidence(result, "layout_mismatch")["matches"] == "interleaved"


def test_sin_and_cos_exchanged_by_unpacking_in_the_wrong_order() -> None:
    # `sin, cos = rotary(...)`: the module returns cos first.
    sin, cos = llama_cache(torch.arange(N))
    cache = np.stack([cos, sin])  # named the wrong way round, stacked as named
    result = diagnosis(RopeParams(d_model=D, base=500000.0), cache, "cos_sin", 0)
    assert named(result)[0] == "layout_mismatch"
    assert "exchanged" in evidence(result, "layout_mismatch")["matches"]


def test_a_cache_sliced_from_another_offset_is_placed() -> None:
    # The cache precomputed for 0 … 8191, sliced at the wrong place: rows 4096 … for 5000 ….
    full = llama_cache(torch.arange(8192))
    result = diagnosis(RopeParams(d_model=D, base=500000.0), full[:, 4096:5120], "cos_sin", 5000)
    assert "offset_mismatch" in named(result)
    assert evidence(result, "offset_mismatch")["fitted_offset"] == 4096


def test_gpt_neox_partial_rotary_padded_to_the_whole_head() -> None:
    # GPT-NeoX rotates the first quarter (partial_rotary_factor 0.25); a port that applies the
    # rotation to the whole head pads cos with 1 and sin with 0.
    config = GPTNeoXConfig(
        hidden_size=4 * D,
        num_attention_heads=4,
        rope_parameters={
            "rope_type": "default",
            "rope_theta": 10000.0,
            "partial_rotary_factor": 0.25,
        },
    )
    cos, sin = GPTNeoXRotaryEmbedding(config)(torch.zeros(1, 1, D), torch.arange(N)[None])
    rotary = cos.shape[-1]
    padded = np.zeros((2, N, D), dtype=np.float32)
    padded[0] = 1.0
    padded[0, :, :rotary], padded[1, :, :rotary] = cos[0].numpy(), sin[0].numpy()
    result = diagnosis(RopeParams(d_model=D, base=10000.0), padded, "cos_sin", 0)
    assert named(result) == ["partial_rotary"]
    found = evidence(result, "partial_rotary")
    assert (found["rotating_dimensions"], found["partial_rotary_factor"]) == (32, 0.25)


def test_a_float32_angle_cache_is_named_by_its_precision() -> None:
    # Angles as many ports build them: float32 positions times float32 inverse frequencies.
    offset = 300_000
    inv_freq = 1.0 / (500000.0 ** (torch.arange(0, D, 2).float() / D))
    angles = torch.outer(torch.arange(offset, offset + N).float(), inv_freq)
    result = diagnosis(RopeParams(d_model=D, base=500000.0), angles.numpy(), "angle", offset)
    assert "angle_precision" in named(result)
    assert 22 < evidence(result, "angle_precision")["implied_bits"] < 27
    assert set(named(result)) <= {"angle_precision", "matches_framework_recipe"}

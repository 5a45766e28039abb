"""The reference harness of ``tests/reference/transformers_ropes.py`` works: it finds the rotary
model types, reads transformers' own frequencies and measures the layout each family applies."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from tests.reference.transformers_ropes import (
    ReferenceModel,
    discover,
    reference_model,
    rotary_model_types,
)


@pytest.fixture(autouse=True)
def _quiet_transformers() -> Iterator[None]:
    import logging

    logging.disable(logging.WARNING)
    yield
    logging.disable(logging.NOTSET)


def float32_ulps(ours: np.ndarray, exact: np.ndarray) -> np.ndarray:
    return np.abs(ours.astype(np.float64) - exact) / np.spacing(exact.astype(np.float32))


def test_discovers_the_rotary_model_types() -> None:
    types = rotary_model_types()
    assert len(types) >= 150
    found = discover()
    assert {"llama", "gemma3_text", "qwen2_vl", "deepseek_v3", "llama4_text"} <= set(found.text)
    assert {"gptj", "codegen"} <= set(found.tables)
    assert found.via_text_config["llava"] == "llama"  # no rotary class of its own
    assert "pixtral" in found.vision_only and "pixtral" not in types


def test_llama_reference_is_transformers_default_rope() -> None:
    model = reference_model("llama")
    assert model.failure is None
    (rope,) = model.ropes
    assert rope.layers == tuple(range(model.num_hidden_layers)) and model.nope_layers == ()
    d = model.head_dim
    exact = 1.0 / 10000.0 ** (np.arange(0, d, 2, dtype=np.float64) / d)
    assert rope.inv_freq.dtype == np.float32 and rope.inv_freq.shape == (d // 2,)
    # torch's float32 pow is within 1 ulp, its reciprocal within 2.
    assert float32_ulps(rope.inv_freq, exact).max() <= 2
    assert rope.attention_scaling == 1.0 and rope.rope_type == "default"

    positions = np.array([0, 1, 5, 4095])
    cos, sin = rope.cos_sin(positions)
    assert cos.dtype == np.float32 and cos.shape == (4, d)
    angles = positions[:, None].astype(np.float32) * rope.inv_freq  # the module's float32 product
    expected = np.concatenate([angles, angles], axis=1).astype(np.float64)
    np.testing.assert_allclose(cos, np.cos(expected), atol=2e-7)
    np.testing.assert_allclose(sin, np.sin(expected), atol=2e-7)


def assert_layout(model: ReferenceModel, kind: str, width: int) -> None:
    assert model.failure is None, model.failure
    layout = model.ropes[0].layout
    assert (layout.kind, layout.rotary_width, layout.sign) == (kind, width, 1)
    assert layout.frequency_order == "ascending"


def test_layout_is_measured_rotate_half_for_llama() -> None:
    model = reference_model("llama")
    assert_layout(model, "rotate_half", model.head_dim)
    pair = model.ropes[0].layout.pairs[0]
    assert pair.inputs == pair.outputs == (0, model.head_dim // 2)


def test_layout_is_measured_interleaved_for_gptj() -> None:
    # GPT-J keeps a sin/cos table in every attention and rotates the first rotary_dim (64) of
    # its 256 head dimensions in pairs (2i, 2i+1).
    model = reference_model("gptj")
    assert_layout(model, "interleaved", 64)
    rope = model.ropes[0]
    assert rope.source == "table" and rope.output == "cos_sin_half"
    assert rope.layout.head_slice == (0, 256)
    assert rope.layout.pairs[1].inputs == (2, 3)


def test_layout_of_deepseek_v3_interleaves_q_and_k_onto_a_rotate_half_cache() -> None:
    model = reference_model("deepseek_v3")
    assert_layout(model, "interleaved_to_rotate_half", 64)
    pair = model.ropes[0].layout.pairs[1]
    assert (pair.inputs, pair.outputs) == ((2, 3), (1, 33))


def test_nope_layers_are_the_layers_that_apply_no_rope() -> None:
    # SmolLM3 skips rope on every fourth layer (config.no_rope_layers holds 0 there).
    model = reference_model("smollm3")
    assert model.failure is None
    (rope,) = model.ropes
    assert model.nope_layers == tuple(range(3, model.num_hidden_layers, 4))
    assert set(rope.layers) | set(model.nope_layers) == set(range(model.num_hidden_layers))


def test_a_rope_the_harness_cannot_trace_is_no_nope_layer() -> None:
    # CLVP's text encoder turns q, k and v by a rotary module whose forward takes no position
    # ids: its layers call apply_rotary_pos_emb on cos/sin the harness does not see. They are
    # not counted as NoPE layers (an answer of "no rope" would be measured right), and say so.
    model = reference_model("clvp_encoder")
    assert model.ropes == () and model.nope_layers == ()
    assert any("apply_rotary_pos_emb" in note for note in model.notes)
    # Its decoder calls no apply function at all: every layer is a NoPE layer.
    decoder = reference_model("clvp_decoder")
    assert decoder.nope_layers == tuple(range(decoder.num_hidden_layers))


def test_glm_applies_interleaved_pairs_to_half_of_a_rotate_half_cache() -> None:
    # GLM's rotary module emits cat(freqs, freqs); its apply function repeat-interleaves the
    # first half and turns pairs (2i, 2i+1) of the first rotary_dim dimensions only.
    model = reference_model("glm")
    assert_layout(model, "interleaved", model.head_dim // 2)
    rope = model.ropes[0]
    assert rope.cache_layout == "concatenated"
    assert rope.layout.passed == tuple(range(model.head_dim // 2, model.head_dim))


def test_a_default_config_the_model_itself_cannot_run_is_its_own_refusal() -> None:
    # GLM-4V's default text config turns the whole 128-wide head; its rotary module splits the
    # 64 frequencies by sections covering 32, on real tensors as in the model.
    model = reference_model("glm4v_text")
    assert model.ropes == () and model.rejected is not None
    assert "split_with_sizes" in model.rejected
    assert reference_model("llama").rejected is None


def test_dbrx_s_own_model_cannot_be_built_from_its_default_config() -> None:
    # What docs/models.md says of DBRX's refusal: its rotary module builds from its default
    # config, but its attention reads attn_config.rope_theta, which that config lacks; given
    # the key, the model builds and turns by rope_parameters' base, not that key's.
    from tests.reference.transformers_ropes import _constructor_error, build_config

    default = build_config("dbrx", None)
    assert _constructor_error(default) == (
        "AttributeError: 'DbrxAttentionConfig' object has no attribute 'rope_theta'"
    )
    config = {"model_type": "dbrx", "d_model": 256, "n_heads": 4, "n_layers": 2}
    hub = {**config, "attn_config": {"kv_n_heads": 4, "rope_theta": 500000}}
    assert _constructor_error(build_config("dbrx", hub)) is None
    (rope,) = reference_model("dbrx", hub).ropes
    assert rope.inv_freq[1] == np.float32(1 / 10000 ** (2 / 64))


def test_a_model_failing_on_a_key_its_rope_reads_refuses_its_config() -> None:
    # Ministral's attention computes head_dim ** -0.5 on its class default, null: the model's
    # own refusal, which the service must share; Nemotron's fails on num_key_value_heads,
    # which no rope reads: its rope, built alone, is measured.
    ministral = reference_model("ministral")
    assert ministral.rejected is not None and "self.head_dim**-0.5" in ministral.rejected
    nemotron = reference_model("nemotron")
    assert not nemotron.traced and nemotron.rejected is None and nemotron.ropes


def test_an_audio_encoder_runs_on_its_own_inputs() -> None:
    # Wav2Vec2-Conformer takes a waveform, no token ids nor position ids; its default config
    # has relative position embeddings, so no layer applies a rope.
    model = reference_model("wav2vec2-conformer")
    assert model.traced and model.failure is None and model.ropes == ()
    assert model.nope_layers == tuple(range(model.num_hidden_layers))


def test_a_model_s_own_refusal_of_odd_heads_is_told_from_other_failures() -> None:
    """Qwen3-Omni's default config: its model broadcasts a 74-wide cache against 73-wide heads
    and fails; the harness then counts the config as one the model itself cannot run. A run
    that fails for another reason, or on other widths, is not such a refusal."""
    from tests.reference.transformers_ropes import _same_mismatch

    own = (
        "RuntimeError: inputs_embeds: RuntimeError: Attempting to broadcast a dimension of "
        "length 74 at -1! Mismatching argument at index 1 had torch.Size([1, 1, 3, 74]); but "
        "expected shape should be broadcastable to [1, 28, 3, 73] | input_ids: …"
    )
    assert _same_mismatch(own, head_dim=73, width=74)
    assert not _same_mismatch(own, head_dim=128, width=74)
    assert not _same_mismatch(own, head_dim=73, width=64)
    other = "RuntimeError: shape [1, 8, 74] is invalid | input_ids: expected [1, 8, 73]"
    assert not _same_mismatch(other, head_dim=73, width=74)
    model = reference_model("qwen3_omni_moe_text")
    assert model.rejected is not None and "head dimension 73" in model.rejected


def test_a_dynamic_rope_is_read_after_its_frequencies_grow() -> None:
    # transformers' dynamic rope grows its frequencies once a forward passes
    # max_position_embeddings: those, not its initial ones, turn the later positions.
    config = {
        "model_type": "llama",
        "hidden_size": 256,
        "num_attention_heads": 4,
        "num_hidden_layers": 1,
        "max_position_embeddings": 1024,
        "rope_scaling": {"type": "dynamic", "factor": 2.0},
    }
    (rope,) = reference_model("llama", config).ropes
    assert np.array_equal(rope.inv_freq_at(np.array([0, 1023])), rope.inv_freq)
    d, length = 64, 4096
    base = 10000.0 * (2.0 * length / 1024 - 1) ** (d / (d - 2))
    exact = 1.0 / base ** (np.arange(0, d, 2, dtype=np.float64) / d)
    assert float32_ulps(rope.inv_freq_at(np.array([0, length - 1])), exact).max() <= 2

"""Hybrids of attention and Mamba or recurrent layers, and speech models' text transformers, on
configs beyond their defaults and the Hub's (which tests/reference/test_model_ropes.py
measures): where their config classes read the rope's width and the layers' kinds from keys of
their own, the answer is what the model itself does (the harness runs it), or refused where
the model cannot run the config."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest

from tests.api.test_rope_config_hybrids import (
    BAMBA,
    GRANITE_ROPE,
    MOSHI,
    NEMOTRON_H,
    RECURRENT_GEMMA,
)
from tests.reference.test_model_ropes import _verdict

_LINEAR = {"rope_type": "linear", "factor": 2.0, "rope_theta": 10000.0}
_SMALL_BAMBA = {
    **BAMBA,
    "attn_layer_indices": [1, 3, 40],
    "hidden_size": 1024,
    "mamba_n_heads": 32,
    "num_attention_heads": 8,
    "num_hidden_layers": 4,
}
_SMALL_GEMMA = {**RECURRENT_GEMMA, "hidden_size": 512, "num_attention_heads": 4, "head_dim": 64}
_SMALL_GEMMA["lru_width"] = 512

CASES: dict[str, tuple[dict[str, Any], str]] = {
    # Its config class sets the top-level factor to 0.5; the rope dict's own wins.
    "bamba, a top-level factor": ({**_SMALL_BAMBA, "partial_rotary_factor": 0.25}, "right"),
    "bamba, the rope dict's factor": (
        {**_SMALL_BAMBA, "rope_parameters": {"rope_theta": 5e4, "partial_rotary_factor": 0.25}},
        "right",
    ),
    "bamba, yarn": (
        {**_SMALL_BAMBA, "rope_scaling": {"rope_type": "yarn", "factor": 4.0}},
        "right",
    ),
    "granitemoehybrid, a rope, a factor its default rope ignores": (
        {**GRANITE_ROPE, "partial_rotary_factor": 0.5},
        "right",
    ),
    "granitemoehybrid, layers_block_type over layer_types": (
        {**GRANITE_ROPE, "layers_block_type": ["attention", "mamba", "attention", "mamba"]},
        "right",
    ),
    "granitemoehybrid, linear over the whole head": (
        {**GRANITE_ROPE, "rope_parameters": _LINEAR},
        "right",
    ),
    # Its cache is then half the head its attention turns: the model fails.
    "granitemoehybrid, linear over half the head": (
        {**GRANITE_ROPE, "rope_parameters": {**_LINEAR, "partial_rotary_factor": 0.5}},
        "refused",
    ),
    "recurrent_gemma, a top-level factor": (
        {**_SMALL_GEMMA, "partial_rotary_factor": 0.25, "num_hidden_layers": 5},
        "right",
    ),
    "recurrent_gemma, attention first": (
        {**_SMALL_GEMMA, "block_types": ["attention", "recurrent"], "num_hidden_layers": 5},
        "right",
    ),
    # Its rotary module refuses every rope type but the default.
    "recurrent_gemma, linear": ({**_SMALL_GEMMA, "rope_parameters": _LINEAR}, "refused"),
    # Its default rope turns the whole head, whatever partial_rotary_factor says; a scaled one
    # reads it, and its attention cannot apply the narrower cache.
    "moshi, a factor its default rope ignores": (
        {**MOSHI, "head_dim": 64, "partial_rotary_factor": 0.5},
        "right",
    ),
    "moshi, linear over half the head": (
        {**MOSHI, "rope_parameters": {**_LINEAR, "partial_rotary_factor": 0.5}},
        "refused",
    ),
    "kyutai_speech_to_text, a factor its default rope ignores": (
        {**MOSHI, "model_type": "kyutai_speech_to_text", "partial_rotary_factor": 0.25},
        "right",
    ),
    # Learned absolute positions, no rope.
    "clvp_decoder": (
        {
            "model_type": "clvp_decoder",
            "hidden_size": 256,
            "num_attention_heads": 4,
            "num_hidden_layers": 3,
        },
        "right",
    ),
    # Its layers are the pattern's letters, whatever num_hidden_layers says.
    "nemotron_h, a pattern": (
        {**NEMOTRON_H, "hybrid_override_pattern": "M-M*-ME", "num_hidden_layers": 52},
        "right",
    ),
    "nemotron_h, layers_block_type": (
        {**NEMOTRON_H, "layers_block_type": ["mamba", "attention", "mlp"], "num_hidden_layers": 9},
        "right",
    ),
    "nemo_speechlm": ({"model_type": "nemo_speechlm", "text_config": NEMOTRON_H}, "right"),
}


@pytest.fixture(autouse=True)
def _quiet_transformers() -> Iterator[None]:
    logging.disable(logging.WARNING)
    yield
    logging.disable(logging.NOTSET)


@pytest.mark.parametrize("case", list(CASES))
def test_hybrid_configs_are_answered_as_their_models_run_them(case: str) -> None:
    config, expected = CASES[case]
    verdict, why = _verdict((config["model_type"], config))
    assert verdict == expected, why

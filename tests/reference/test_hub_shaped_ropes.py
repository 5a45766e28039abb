"""Model types whose default config their own model cannot run (GLM-4V's sections over the
whole head, Cohere-Compass's missing rope per layer type) or no rope can turn (GLM-4.5's odd
rotary width) are refused on it by
``test_model_ropes.py``; here their configs in the shape the Hub publishes, whose text rope the
reader answers, are held to what transformers computes for them, as every model type is there.

The reader answers only the model types its generated table names (measured right on their
default configs), so these tests add theirs, with their config classes' defaults."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.reference.test_model_ropes import _verdict

# Half of each 128-wide head turns (64 dimensions, 32 frequencies), in sections of 8, 12, 12.
_GLM_ROPE = {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [8, 12, 12]}
_GLM4V_TEXT = {
    "model_type": "glm4v_text",
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "num_key_value_heads": 2,
    "num_hidden_layers": 4,
    "partial_rotary_factor": 0.5,
    "rope_parameters": _GLM_ROPE,
}
_COMPASS_TEXT = {
    "model_type": "cohere_compass_text",
    "hidden_size": 2048,
    "num_attention_heads": 16,
    "num_key_value_heads": 4,
    "num_hidden_layers": 4,
    "layer_types": ["sliding_attention"] * 3 + ["full_attention"],
    "rope_parameters": {
        "sliding_attention": {**_GLM_ROPE, "rope_theta": 50000.0, "mrope_section": [24, 20, 20]},
        "full_attention": None,
    },
}
CONFIGS: dict[str, dict[str, Any]] = {
    "GLM-4.1V": {"model_type": "glm4v", "text_config": _GLM4V_TEXT},
    "GLM-4.1V text model": _GLM4V_TEXT,
    "GLM-4.6V": {"model_type": "glm46v", "text_config": _GLM4V_TEXT},
    "GLM-4.5V": {
        "model_type": "glm4v_moe",
        "text_config": {
            **_GLM4V_TEXT,
            "model_type": "glm4v_moe_text",
            "num_attention_heads": 96,
            "num_key_value_heads": 8,
            "head_dim": 128,
            "first_k_dense_replace": 1,
        },
    },
    "GLM-Image": {
        "model_type": "glm_image",
        "text_config": {**_GLM4V_TEXT, "model_type": "glm_image_text"},
    },
    "Cohere-Compass": {"model_type": "cohere_compass", "text_config": _COMPASS_TEXT},
    # Its default heads are 4096 / 96 = 42 wide, half of which (21) no rope can turn.
    "GLM-4.5": {
        "model_type": "glm4_moe",
        "hidden_size": 5120,
        "num_attention_heads": 96,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "num_hidden_layers": 4,
        "first_k_dense_replace": 1,
        "partial_rotary_factor": 0.5,
        "rope_theta": 1000000.0,
        "max_position_embeddings": 131072,
    },
}


@pytest.fixture(autouse=True)
def _answered(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    from posenc.schemes.rope.class_defaults import CLASS_DEFAULTS

    for model_type, defaults in {
        "glm4v_text": {},
        "glm4v_moe_text": {"partial_rotary_factor": 0.5},
        "glm_image_text": {},
        "cohere_compass_text": {},
        "glm4_moe": {"partial_rotary_factor": 0.5},
    }.items():
        monkeypatch.setitem(CLASS_DEFAULTS, model_type, defaults)
    yield


@pytest.mark.parametrize("name", list(CONFIGS))
def test_a_hub_shaped_config_is_read_as_transformers_runs_it(name: str) -> None:
    config = CONFIGS[name]
    assert _verdict((config["model_type"], config)) == ("right", "")

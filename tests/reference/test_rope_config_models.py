"""The canonical parameters /v1/rope/config reads from a config.json build the same rope that
transformers builds from the same config.json: its own config class (``AutoConfig.for_model``)
and the family's own rotary module, run at the start of the context and at its end."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import torch
from transformers import AutoConfig
from transformers.models.gemma.modeling_gemma import GemmaRotaryEmbedding
from transformers.models.gpt_neox.modeling_gpt_neox import GPTNeoXRotaryEmbedding
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding
from transformers.models.mistral.modeling_mistral import MistralRotaryEmbedding
from transformers.models.phi3.modeling_phi3 import Phi3RotaryEmbedding
from transformers.models.qwen2.modeling_qwen2 import Qwen2RotaryEmbedding

from posenc.schemes.rope.models import config as rope_config
from posenc.schemes.rope.params import RopeParams
from posenc.schemes.rope.recipes import framework
from tests.api.test_rope_config import FAMILIES
from tests.reference.test_framework_recipe import pow_differs, ulps

ROTARY_MODULES: dict[str, Any] = {
    "llama": LlamaRotaryEmbedding,
    "mistral": MistralRotaryEmbedding,
    "qwen2": Qwen2RotaryEmbedding,
    "phi3": Phi3RotaryEmbedding,
    "gpt_neox": GPTNeoXRotaryEmbedding,
    "gemma": GemmaRotaryEmbedding,
}


@pytest.fixture(autouse=True)
def _quiet_transformers() -> Iterator[None]:
    logging.disable(logging.WARNING)
    yield
    logging.disable(logging.NOTSET)


@pytest.mark.parametrize("at", ["start", "end"])
@pytest.mark.parametrize("family", list(FAMILIES))
def test_canonical_parameters_build_the_rope_transformers_builds(family: str, at: str) -> None:
    config = dict(FAMILIES[family][0])
    model_type = config.pop("model_type")
    theirs_config = AutoConfig.for_model(model_type, **config)
    module = ROTARY_MODULES[model_type](theirs_config)
    params = rope_config.from_config(FAMILIES[family][0]).params
    context = config["max_position_embeddings"]
    positions = np.arange(16) if at == "start" else np.arange(context - 16, context)
    cos, sin = module(torch.zeros(1, 1, 1), torch.from_numpy(positions)[None])

    framework_params = RopeParams(**{**params.__dict__, "recipe": "framework"})
    # The sequence ends at the last position: longrope's short factors at the start.
    ours_freq, attention = framework.frequencies(framework_params, int(positions[-1]) + 1)
    theirs_freq = module.inv_freq.numpy()
    assert attention == module.attention_scaling
    freq_ulps = ulps(ours_freq, theirs_freq)
    # docs/numbers.md: bit-identical where torch's float32 pow is correctly rounded, else 2 ulp.
    end = int(positions[-1]) + 1
    assert (freq_ulps <= np.where(pow_differs(framework_params, end), 2, 0)).all(), freq_ulps

    table = framework.encode(framework_params, positions, "float32", "cos_sin")
    assert table.shape[2] == cos.shape[2] == params.d_model
    same = np.concatenate([freq_ulps == 0, freq_ulps == 0])
    bound = 1 if attention == 1.0 else 2
    assert ulps(table[0], cos[0].numpy())[:, same].max() <= bound
    assert ulps(table[1], sin[0].numpy())[:, same].max() <= bound


_GEMMA4_ROTARY = {
    "gemma4_text": ("gemma4", "Gemma4TextRotaryEmbedding"),
    "gemma4_unified_text": ("gemma4_unified", "Gemma4UnifiedTextRotaryEmbedding"),
    "diffusion_gemma_text": ("diffusion_gemma", "DiffusionGemmaTextRotaryEmbedding"),
}


@pytest.mark.parametrize("form", ["class default", "global_head_dim", "as saved"])
@pytest.mark.parametrize("model_type", list(_GEMMA4_ROTARY))
def test_gemma_4_ropes_are_its_rotary_module_s_for_each_layer_type(
    model_type: str, form: str
) -> None:
    """Gemma 4's full-attention heads are global_head_dim wide (512 when the config says
    nothing; per_layer_config once transformers has saved it), turned by a proportional rope
    over a quarter of them; its sliding layers' default rope turns the whole 64-wide head."""
    import importlib

    given: dict[str, Any] = {
        "hidden_size": 256,
        "num_attention_heads": 2,
        "head_dim": 64,
        "num_hidden_layers": 6,
        "layer_types": ["sliding_attention"] * 5 + ["full_attention"],
        "rope_parameters": {
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
            "full_attention": {
                "rope_type": "proportional",
                "partial_rotary_factor": 0.25,
                "rope_theta": 1000000.0,
            },
        },
        **({"global_head_dim": 384} if form == "global_head_dim" else {}),
    }
    theirs_config = AutoConfig.for_model(model_type, **given)
    body = theirs_config.to_dict() if form == "as saved" else {"model_type": model_type, **given}
    package, name = _GEMMA4_ROTARY[model_type]
    module_file = importlib.import_module(f"transformers.models.{package}.modeling_{package}")
    module = getattr(module_file, name)(theirs_config)
    ropes = {rope.layer_types: rope for rope in rope_config.read(body).ropes}
    full_head = 384 if form == "global_head_dim" else 512
    assert ropes[("full_attention",)].params.d_model == full_head
    assert ropes[("full_attention",)].params.rotary_pairs == full_head // 8
    positions = np.array([0, 1, 7, 1000, 2**20])
    for (layer_type,), rope in ropes.items():
        params = RopeParams(**{**rope.params.__dict__, "recipe": "framework"})
        theirs_freq = getattr(module, f"{layer_type}_inv_freq").numpy()
        ours_freq, _ = framework.frequencies(params, int(positions[-1]) + 1)
        freq_ulps = ulps(ours_freq, theirs_freq)
        allowed = np.where(pow_differs(params, int(positions[-1]) + 1), 2, 0)
        assert (freq_ulps <= allowed).all(), freq_ulps
        x = torch.zeros(1, 1, params.d_model)
        cos, sin = module(x, torch.from_numpy(positions)[None], layer_type)
        table = framework.encode(params, positions, "float32", "cos_sin")
        assert table.shape[2] == cos.shape[2] == params.d_model
        same = np.concatenate([freq_ulps == 0, freq_ulps == 0])
        assert ulps(table[0], cos[0].numpy())[:, same].max() <= 1
        assert ulps(table[1], sin[0].numpy())[:, same].max() <= 1


@pytest.mark.parametrize(
    ("head", "theta", "alpha"),
    [
        (128, 10000.0, 1000.0),
        (64, 500000.0, 7.5),
        (128, 10000.0, 50.0),
        (96, 1e6, 2.0),
        (6, 1e4, 3.0),
    ],
)
def test_hunyuan_alpha_stretches_the_base_as_its_rotary_module_does(
    head: int, theta: float, alpha: float
) -> None:
    """HunYuan-VL's rope_type dynamic with an alpha (its checkpoints' xdrope): our base is the
    float64 transformers computes, near the real rope_theta·alpha^(d/(d−2)) (its d/(d−2),
    rounded once, is off by 2^-53 of itself, which the power turns into ln α times that), and
    its frequencies and cos/sin are its rotary module's (ntk_alpha), at the start and far out."""
    import mpmath
    from transformers.models.hunyuan_vl.configuration_hunyuan_vl import HunYuanVLTextConfig
    from transformers.models.hunyuan_vl.modeling_hunyuan_vl import HunYuanVLRotaryEmbedding

    # Four axes, or three of one frequency each (head 6).
    axes = [head // 8] * 3 + [head // 2 - 3 * (head // 8)] if head >= 8 else [1, 1, 1]
    rope = {"type": "xdrope", "alpha": alpha, "factor": 1.0, "xdrope_section": axes}
    config = {
        "model_type": "hunyuan_vl_text",
        "hidden_size": 1024,
        "num_attention_heads": 8,
        "head_dim": head,
        "max_position_embeddings": 32768,
        "rope_theta": theta,
        "rope_scaling": rope,
    }
    params = rope_config.from_config(config).params
    with mpmath.workdps(50):
        real = mpmath.mpf(theta) * mpmath.mpf(alpha) ** (mpmath.mpf(head) / (head - 2))
        exponent = head / (head - 2)
        bound = (2 + abs(mpmath.log(alpha)) * exponent) * 2.0**-52
        assert abs(mpmath.mpf(params.base) - real) <= bound * real
    module = HunYuanVLRotaryEmbedding(HunYuanVLTextConfig.from_dict(config))
    assert module.rope_type == "ntk_alpha"
    positions = torch.tensor([0, 1, 2, 100, 4095, 32767, 10**6])
    cos, sin = module(torch.zeros(1), positions[None, None].expand(len(axes), 1, -1))
    framework_params = RopeParams(**{**params.__dict__, "recipe": "framework"})
    ours_freq, attention = framework.frequencies(framework_params, 10**6 + 1)
    assert attention == module.attention_scaling == 1.0
    freq_ulps = ulps(ours_freq, module.inv_freq.numpy())
    assert freq_ulps.max() <= 1
    table = framework.encode(framework_params, positions.numpy(), "float32", "cos_sin")
    same = np.concatenate([freq_ulps == 0, freq_ulps == 0])
    assert ulps(table[0], cos[0].numpy())[:, same].max() <= 1
    assert ulps(table[1], sin[0].numpy())[:, same].max() <= 1

"""What transformers 5.23 itself computes for the 2-D rope of a vision tower: the patch order
and the cos/sin of the tower's own rotary module for a ``[t, h, w]`` grid. The reference side
of the /v1/rope/vision comparison; CPU only, no weights.

The config is built by the model type's own config class from the body's dict. Then:

* Qwen2-VL's kin: ``transformers.vision_utils.get_vision_position_ids`` and the tower's rotary
  class (its ``__init__`` makes only ``inv_freq``), with the merge size its tower's ``forward``
  passes (1 for PaddleOCR-VL and Kimi K2.5); the windowed towers' (Qwen2.5-VL, Qwen2.5-Omni's,
  EXAONE 4.5's) cos/sin and ids then go through ``get_vision_window_index`` and the tower's own
  ``permute_input_for_window_attn``, called on a bare instance (``nn.Module.__init__`` only).
  The Qwen-Omni towers' configs are built inside their thinker's.
* Pixtral: the ids its vision model's ``forward`` builds inline (a meshgrid per image; the
  ``t`` images of the grid one after another) and ``PixtralVisionRotaryEmbedding``.
* Llama 4: ``Llama4VisionRotaryEmbedding``'s ``freqs_ci`` (complex, one per pair), as the cos
  and sin of each complex pair written to both of its elements; the ids its ``_compute_freqs_ci``
  turns by (column and row + 1, the CLS token last at 0).

:func:`pair_frequencies` gives the module's float32 frequency of each of the ``d/2`` pairs.
"""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from tests.reference.transformers_mrope import quiet as _quiet

__all__ = ["ROTARY", "pair_frequencies", "reference"]

Array = npt.NDArray[Any]

# model type → module.class of its tower's rotary embedding.
ROTARY: dict[str, str] = {
    "qwen2_vl": "qwen2_vl.Qwen2VLVisionRotaryEmbedding",
    "qwen2_5_vl": "qwen2_5_vl.Qwen2_5_VLVisionRotaryEmbedding",
    "qwen3_vl": "qwen3_vl.Qwen3VLVisionRotaryEmbedding",
    "qwen3_vl_moe": "qwen3_vl_moe.Qwen3VLMoeVisionRotaryEmbedding",
    "glm4v": "glm4v.Glm4vVisionRotaryEmbedding",
    "glm4v_moe": "glm4v_moe.Glm4vMoeVisionRotaryEmbedding",
    "glm_ocr": "glm_ocr.GlmOcrVisionRotaryEmbedding",
    "pixtral": "pixtral.PixtralVisionRotaryEmbedding",
    "llama4": "llama4.Llama4VisionRotaryEmbedding",
    "qwen2_5_omni": "qwen2_5_omni.Qwen2_5OmniVisionRotaryEmbedding",
    "qwen3_omni_moe": "qwen3_omni_moe.Qwen3OmniMoeVisionRotaryEmbedding",
    "exaone4_5": "exaone4_5.Exaone4_5_VisionRotaryEmbedding",
    "ernie4_5_vl_moe": "ernie4_5_vl_moe.Ernie4_5_VLMoeVisionRotaryEmbedding",
    "cohere_compass": "cohere_compass.CohereCompassVisionRotaryEmbedding",
    "lfm3_vl": "lfm3_vl.Lfm3VlVisionRotaryEmbedding",
    "paddleocr_vl": "paddleocr_vl.PaddleOCRVisionRotaryEmbedding",
    "kimi_k25": "kimi_k25.Kimi_K25VisionRotaryEmbedding",
}
# The towers that reorder patches into attention windows: module.class of the tower.
WINDOWED: dict[str, str] = {
    "qwen2_5_vl": "qwen2_5_vl.Qwen2_5_VisionTransformerPretrainedModel",
    "qwen2_5_omni": "qwen2_5_omni.Qwen2_5OmniVisionEncoder",
    "exaone4_5": "exaone4_5.Exaone4_5_VisionModel",
}
# The towers whose forward asks get_vision_position_ids for blocks of 1, not their config's.
_RASTER = {"paddleocr_vl", "kimi_k25"}
# Where the tower's config sits in the built config, when not at vision_config.
_THINKER = {"qwen2_5_omni", "qwen3_omni_moe"}


def _class(dotted: str) -> Any:
    module, name = dotted.split(".")
    return getattr(importlib.import_module(f"transformers.models.{module}.modeling_{module}"), name)


def _vision(config: dict[str, Any]) -> tuple[str, Any]:
    """The tower's kind (a key of :data:`ROTARY`) and its vision config, built by transformers."""
    from transformers import CONFIG_MAPPING

    body = dict(config)
    model_type = body.pop("model_type")
    with _quiet():
        built = CONFIG_MAPPING[model_type](**body)
    if model_type == "pixtral":
        vision = built
    elif model_type in _THINKER:
        vision = built.thinker_config.vision_config
    else:
        vision = built.vision_config
    kind = "pixtral" if vision.model_type == "pixtral" else model_type
    return kind, vision


def pair_frequencies(config: dict[str, Any]) -> Array:
    """The module's float32 frequency of each pair, in the order of its cos/sin halves."""
    kind, vision = _vision(config)
    if kind == "llama4":  # _compute_freqs_ci's own expression: the buffer holds freqs_ci only
        freq_dim = vision.hidden_size // vision.num_attention_heads // 2
        theta = vision.rope_parameters["rope_theta"]
        freq = 1.0 / (theta ** (torch.arange(0, freq_dim, 2)[: (freq_dim // 2)].float() / freq_dim))
        return torch.cat([freq, freq]).numpy()
    with _quiet():
        inv_freq = _class(ROTARY[kind])(vision).inv_freq
    if kind == "pixtral":  # already [even frequencies (rows), odd ones (columns)]
        return inv_freq.numpy()
    if kind == "kimi_k25":  # each frequency twice, column then row
        return torch.repeat_interleave(inv_freq, 2).numpy()
    return torch.cat([inv_freq, inv_freq]).numpy()


def reference(config: dict[str, Any], grid: list[int]) -> tuple[Array, Array, Array]:
    """``(cos, sin, ids)``: float32 ``(n, head_dim)`` in the tower's layout and the int64
    ``(n, 2)`` (row, column) each patch turns by, in the order its attention sees them."""
    kind, vision = _vision(config)
    with _quiet():
        rotary = _class(ROTARY[kind])(vision)
    grid_thw = torch.tensor([grid], dtype=torch.long)
    x = torch.zeros(1, dtype=torch.float32)
    with torch.no_grad():
        if kind == "llama4":
            return _llama4(rotary, vision)
        if kind == "pixtral":
            ids = _pixtral_ids(grid)
        else:
            from transformers.vision_utils import get_vision_position_ids

            merge = 1 if kind in _RASTER else vision.spatial_merge_size
            ids = get_vision_position_ids(grid_thw, merge)
        cos, sin = rotary(x, ids)
        if kind in WINDOWED:
            cos, sin, ids = _windows(_class(WINDOWED[kind]), vision, grid_thw, cos, sin, ids)
    return cos.numpy(), sin.numpy(), ids.numpy().astype(np.int64)


def _pixtral_ids(grid: list[int]) -> torch.Tensor:
    """PixtralVisionModel.forward's ids, for t images of h × w patches."""
    t, h, w = grid
    position_ids = []
    for _ in range(t):
        hpos_ids, wpos_ids = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
        position_ids.append(torch.stack([hpos_ids.flatten(), wpos_ids.flatten()], dim=-1))
    return torch.cat(position_ids, dim=0)


def _windows(
    tower_class: Any,
    vision: Any,
    grid_thw: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    ids: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    from transformers.vision_utils import get_vision_window_index

    window_index, _ = get_vision_window_index(
        grid_thw, vision.spatial_merge_size, vision.window_size, vision.patch_size
    )
    tower = tower_class.__new__(tower_class)
    torch.nn.Module.__init__(tower)
    tower.spatial_merge_unit = vision.spatial_merge_size**2
    n = len(ids)
    cos, sin, ids = (
        tower_class.permute_input_for_window_attn(tower, part, window_index, seq_len=n)
        for part in (cos, sin, ids)
    )
    return cos, sin, ids


def _llama4(rotary: Any, vision: Any) -> tuple[Array, Array, Array]:
    freqs_ci = rotary.freqs_ci[:, 0, :]
    cos = freqs_ci.real.repeat_interleave(2, dim=-1)
    sin = freqs_ci.imag.repeat_interleave(2, dim=-1)
    side = vision.image_size // vision.patch_size
    # _compute_freqs_ci's ids: img_idx % side + 1 and img_idx // side + 1, the CLS row masked.
    index = torch.arange(side**2)
    ids = torch.stack([index // side + 1, index % side + 1], dim=-1)
    ids = torch.cat([ids, torch.zeros(1, 2, dtype=ids.dtype)])
    return cos.numpy(), sin.numpy(), ids.numpy().astype(np.int64)

"""Which vision towers of transformers 5.23 turn their patches by a 2-D rope, and how, as data.

Read from each tower's rotary module and the code that orders its patches. Three families:

- ``qwen`` (``Qwen2VLVisionRotaryEmbedding`` and its copies): frequencies ``θ^(-2k/(d/2))``,
  ``k < d/4``, of a rope half the head wide; the first ``d/4`` pairs of ``rotate_half`` turn by
  the patch's row, the next ``d/4`` by its column. Patches come in ``spatial_merge_size²``
  blocks (``transformers.vision_utils.get_vision_position_ids``), each frame's the same; Qwen2.5-VL
  then reorders the blocks into its attention windows (``get_vision_window_index``), cos/sin
  with them.
- ``pixtral`` (``PixtralVisionRotaryEmbedding``): frequencies ``θ^(-2i/d)``, ``i < d/2``; the even
  ones turn by the row, the odd ones by the column, in ``rotate_half`` pairs; patches in raster
  order.
- ``llama4`` (``Llama4VisionRotaryEmbedding``): frequencies ``θ^(-2k/(d/2))``, ``k < d/4``; the
  first ``d/4`` complex pairs ``(2i, 2i+1)`` turn by the column + 1, the next by the row + 1;
  the grid is the model's own (``image_size / patch_size`` a side), raster order, and a CLS
  token last turns by nothing.

The head width is ``head_dim`` where the rotary module reads it, else the family's width key over
the heads; the defaults are the vision config classes'.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

Kind = Literal["qwen", "pixtral", "llama4"]


@dataclass(frozen=True)
class VisionFamily:
    kind: Kind
    width: str  # the key divided by the heads: embed_dim (Qwen2-VL) or hidden_size
    heads: tuple[str, ...]  # the heads' keys, the config class's own name first
    defaults: Mapping[str, int] = field(hash=False)
    reads_head_dim: bool = True  # Llama 4's module divides hidden_size even where head_dim is set
    window: bool = False  # Qwen2.5-VL's attention windows reorder the patches


def _qwen(width: str, hidden: int, heads: int, window: bool = False) -> VisionFamily:
    defaults: dict[str, int] = {width: hidden, "num_heads": heads, "spatial_merge_size": 2}
    if window:
        defaults |= {"window_size": 112, "patch_size": 14}
    return VisionFamily("qwen", width, ("num_heads", "num_attention_heads"), defaults, True, window)


_PIXTRAL = VisionFamily(
    "pixtral",
    "hidden_size",
    ("num_attention_heads",),
    {"hidden_size": 1024, "num_attention_heads": 16, "head_dim": 64},
)

# model type (top level of config.json) → its vision tower's rope.
VISION_FAMILIES: dict[str, VisionFamily] = {
    "qwen2_vl": _qwen("embed_dim", 1280, 16),
    "qwen2_5_vl": _qwen("hidden_size", 3584, 16, window=True),
    "qwen3_vl": _qwen("hidden_size", 1152, 16),
    "qwen3_vl_moe": _qwen("hidden_size", 1152, 16),
    "glm4v": _qwen("hidden_size", 1536, 12),
    "glm4v_moe": _qwen("hidden_size", 1536, 12),
    "glm_ocr": _qwen("hidden_size", 1024, 16),
    "pixtral": _PIXTRAL,
    "mistral3": _PIXTRAL,
    "llama4": VisionFamily(
        "llama4",
        "hidden_size",
        ("num_attention_heads",),
        {"hidden_size": 768, "num_attention_heads": 16, "image_size": 448, "patch_size": 14},
        reads_head_dim=False,
    ),
}
# A config whose vision_config is a Pixtral tower (Pixtral-12B is a "llava") is Pixtral's.
PIXTRAL_TOWER = "pixtral"

# Towers with a 2-D (or 3-D) rope that are refused, and why.
UNANSWERED: dict[str, str] = {
    "paddleocr_vl": "its tower orders patches without the merge blocks: not yet measured here",
    "video_llama_3": "its tower takes a merge size per image: not yet measured here",
    "kimi_k25": "its tower interleaves width and height frequencies: not yet measured here",
    "ernie4_5_vl_moe": "its tower's rope is not yet measured here",
    "exaone4_5": "its tower's windows are not yet measured here",
    "lfm3_vl": "its tower's rope is not yet measured here",
    "cohere_compass": "its tower's rope is not yet measured here",
    "minimax_m3_vl": "its tower turns by three axes (time, height, width): not answered",
    "qwen2_5_omni": "its vision tower sits in thinker_config: not answered",
    "qwen3_omni_moe": "its vision tower sits in thinker_config: not answered",
}

"""Which vision towers of transformers 5.23 turn their patches by a 2-D rope, and how, as data.

Read from each tower's rotary module and the code that orders its patches. Four families:

- ``qwen`` (``Qwen2VLVisionRotaryEmbedding`` and its copies): frequencies ``θ^(-2k/(d/2))``,
  ``k < d/4``, of a rope half the head wide; the first ``d/4`` pairs of ``rotate_half`` turn by
  the patch's row, the next ``d/4`` by its column. Patches come in ``spatial_merge_size²``
  blocks (``transformers.vision_utils.get_vision_position_ids``), each frame's the same; Qwen2.5-VL
  (and its copies in Qwen2.5-Omni's thinker and EXAONE 4.5) then reorders the blocks into its
  attention windows (``get_vision_window_index``), cos/sin with them. PaddleOCR-VL's tower asks
  for blocks of 1 whatever its ``spatial_merge_size`` (it merges after the tower): raster order.
- ``kimi`` (``Kimi_K25VisionRotaryEmbedding``): the qwen frequencies, but the ``d/4`` column
  and row pairs alternate, column first (``freq.transpose(1, 2).flip(-1).flatten(1)``); blocks
  of 1 (raster order), as PaddleOCR-VL's.
- ``pixtral`` (``PixtralVisionRotaryEmbedding``): frequencies ``θ^(-2i/d)``, ``i < d/2``; the even
  ones turn by the row, the odd ones by the column, in ``rotate_half`` pairs; patches in raster
  order.
- ``llama4`` (``Llama4VisionRotaryEmbedding``): frequencies ``θ^(-2k/(d/2))``, ``k < d/4``; the
  first ``d/4`` complex pairs ``(2i, 2i+1)`` turn by the column + 1, the next by the row + 1;
  the grid is the model's own (``image_size / patch_size`` a side), raster order, and a CLS
  token last turns by nothing.

The head width is ``head_dim`` where the rotary module reads it, else the family's width key over
the heads; the defaults (θ among them: LFM3-VL's vision config's ``default_theta`` is 10^6) are the
vision config classes'. The vision config sits at ``vision_config``, or in Qwen-Omni's thinker
(``thinker_config.vision_config``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

Kind = Literal["qwen", "kimi", "pixtral", "llama4"]


@dataclass(frozen=True)
class VisionFamily:
    kind: Kind
    width: str  # the key divided by the heads: embed_dim (Qwen2-VL) or hidden_size
    heads: tuple[str, ...]  # the heads' keys, the config class's own name first
    defaults: Mapping[str, int] = field(hash=False)
    reads_head_dim: bool = True  # Llama 4's module divides hidden_size even where head_dim is set
    window: bool = False  # Qwen2.5-VL's attention windows reorder the patches
    merge: int | None = None  # the blocks the tower's rope asks for, whatever the config says
    theta: float = 10000.0  # the vision config class's default_theta
    at: tuple[str, ...] = ("vision_config",)  # where the vision config sits in config.json


_QWEN_HEADS = ("num_heads", "num_attention_heads")  # num_heads, mapped from num_attention_heads
_THINKER = ("thinker_config", "vision_config")


def _qwen(
    width: str,
    hidden: int,
    heads: int,
    window: bool = False,
    at: tuple[str, ...] = ("vision_config",),
    theta: float = 10000.0,
    heads_key: tuple[str, ...] = _QWEN_HEADS,
) -> VisionFamily:
    defaults: dict[str, int] = {width: hidden, heads_key[0]: heads, "spatial_merge_size": 2}
    if window:
        defaults |= {"window_size": 112, "patch_size": 14}
    return VisionFamily("qwen", width, heads_key, defaults, True, window, theta=theta, at=at)


def _raster(kind: Kind, hidden: int, heads: int) -> VisionFamily:
    """A tower whose rope asks for blocks of 1 (raster order); its heads are num_attention_heads."""
    defaults = {"hidden_size": hidden, "num_attention_heads": heads}
    return VisionFamily(kind, "hidden_size", ("num_attention_heads",), defaults, merge=1)


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
    "qwen2_5_omni": _qwen("hidden_size", 3584, 16, window=True, at=_THINKER),
    "qwen3_omni_moe": _qwen("hidden_size", 1152, 16, at=_THINKER),
    "exaone4_5": _qwen("hidden_size", 3584, 16, window=True),
    "ernie4_5_vl_moe": _qwen("hidden_size", 1280, 16),
    "cohere_compass": _qwen("hidden_size", 1152, 16),
    "lfm3_vl": _qwen("hidden_size", 1024, 16, theta=1e6, heads_key=("num_attention_heads",)),
    "paddleocr_vl": _raster("qwen", 1152, 16),
    "kimi_k25": _raster("kimi", 1152, 16),
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
    "video_llama_3": "its tower's merge blocks are per image (merge_sizes, passed with the pixels "
    "by the processor: 1 for images, 2 for videos), not in its config: not answered",
    "minimax_m3_vl": "its tower turns by three axes (time, row, column), 2·⌊d/6⌋ of the head "
    "each, the rest unturned: not answered",
}

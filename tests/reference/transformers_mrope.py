"""What transformers 5.23 itself computes for multimodal rope (M-RoPE): the position ids of a
token run with images and videos (each model type's own ``get_rope_index``) and the cos/sin of its
text rotary module for them. The reference side of the M-RoPE comparison; CPU only, no weights.

``get_rope_index`` is called on a bare instance of the class that owns it (``nn.Module.__init__``
only, so nothing is allocated), with the config built by the type's own config class from
:func:`hub_config`'s dict. One sequence, no padding.

Segments, and the token run the harness builds from them (m = ``vision_config.spatial_merge_size``):

* ``{"text": n}``: n plain text tokens (type 0). Wrapper tokens (vision start/end, image
  begin/end, timestamps) are the caller's text segments; none is added, except inside per-frame
  videos.
* ``{"image": [t, h, w]}``: t·h·w/m² placeholder tokens of type 1; image grid row [t, h, w].
* ``{"video": [t, h, w], "second_per_grid_t": s}`` (s defaults to 1.0): a video grid row
  [t, h, w] and, where the model takes one, a float32 ``second_per_grid_ts`` entry s.

  - one block (qwen2_vl, paddleocr_vl, qwen2_5_vl, ernie4_5_vl_moe, the omni types): t·h·w/m²
    placeholder tokens of type 2 (ernie: t·h·w/(m²·``temporal_merge_size``));
  - per frame (Qwen3-VL and GLM-4V classes): for each of the t frames, ``frame_prefix`` text
    tokens, h·w/m² placeholder tokens of type 2 (GLM-4V writes the image token id), then
    ``frame_suffix`` text tokens; both keys default to 1 (the processor's start/end around each
    frame; a caller adds its timestamp tokens to them).

The omni types and glm_image find their media by token id, not ``mm_token_type_ids``: they read
the token just before a placeholder run as its start marker (vision_start; glm_image's
``<|begin_of_image|>``) and the token just after it as its end marker. Faithful to the segment
contract, that is the last token of the caller's preceding text segment and the first of the
following one, and the harness gives those two text tokens the marker ids (they stay text, and
take text positions). An image or video therefore needs a text token of its own on each side:
:func:`reference_positions` raises ``ValueError`` otherwise. glm_image has no video input
(``ValueError``); its delta is always 0. An ERNIE video's t must be a multiple of
``temporal_merge_size``, or transformers' own ``get_rope_index`` fails. qwen3_omni_moe keeps
its ids in float32 (fractional temporal ids), so its positions and delta are floats.

The omni types' config is the Hub's: the model type's top-level config with the thinker's
``text_config``, ``vision_config`` and ids under ``thinker_config``. cohere_compass keys its
``rope_parameters`` by layer type; :func:`reference_cos_sin` uses the first layer type that has a
rope.

Types with ``get_rope_index`` whose layout the segments cannot express are in
:data:`NOT_EXPRESSIBLE` with the reason.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import json
import logging
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch

__all__ = [
    "MROPE_MODEL_TYPES",
    "NOT_EXPRESSIBLE",
    "hub_config",
    "reference_cos_sin",
    "reference_positions",
]

# An ordinary token of every vocabulary here (the lowest special id, cosmos3_edge's, is 18).
_TEXT_ID = 1000

# model type → (the class of its modeling module owning get_rope_index, module.class of the text
# rotary). glm46v and cosmos3_omni reuse another type's language model, so its rotary lives there.
_CLASSES: dict[str, tuple[str, str]] = {
    "qwen2_vl": ("Qwen2VLModel", "qwen2_vl.Qwen2VLRotaryEmbedding"),
    "qwen2_5_vl": ("Qwen2_5_VLModel", "qwen2_5_vl.Qwen2_5_VLRotaryEmbedding"),
    "paddleocr_vl": ("PaddleOCRVLModel", "paddleocr_vl.PaddleOCRRotaryEmbedding"),
    "ernie4_5_vl_moe": ("Ernie4_5_VLMoeModel", "ernie4_5_vl_moe.Ernie4_5_VLMoeTextRotaryEmbedding"),
    "qwen3_vl": ("Qwen3VLModel", "qwen3_vl.Qwen3VLTextRotaryEmbedding"),
    "qwen3_vl_moe": ("Qwen3VLMoeModel", "qwen3_vl_moe.Qwen3VLMoeTextRotaryEmbedding"),
    "qwen3_5": ("Qwen3_5Model", "qwen3_5.Qwen3_5TextRotaryEmbedding"),
    "qwen3_5_moe": ("Qwen3_5MoeModel", "qwen3_5_moe.Qwen3_5MoeTextRotaryEmbedding"),
    "qwen4_exp": ("Qwen4ExpModel", "qwen4_exp.Qwen4ExpTextRotaryEmbedding"),
    "cosmos3_edge": ("Cosmos3EdgeModel", "cosmos3_edge.Cosmos3EdgeTextRotaryEmbedding"),
    "cosmos3_omni": ("Cosmos3OmniModel", "qwen3_vl.Qwen3VLTextRotaryEmbedding"),
    "cohere_compass": ("CohereCompassModel", "cohere_compass.CohereCompassRotaryEmbedding"),
    "glm4v": ("Glm4vModel", "glm4v.Glm4vTextRotaryEmbedding"),
    "glm46v": ("Glm46VModel", "glm4v.Glm4vTextRotaryEmbedding"),
    "glm_ocr": ("GlmOcrModel", "glm_ocr.GlmOcrTextRotaryEmbedding"),
    "glm4v_moe": ("Glm4vMoeModel", "glm4v_moe.Glm4vMoeTextRotaryEmbedding"),
    "glm_image": ("GlmImageModel", "glm_image.GlmImageTextRotaryEmbedding"),
    "qwen2_5_omni": (
        "Qwen2_5OmniThinkerForConditionalGeneration",
        "qwen2_5_omni.Qwen2_5OmniRotaryEmbedding",
    ),
    "qwen3_omni_moe": (
        "Qwen3OmniMoeThinkerForConditionalGeneration",
        "qwen3_omni_moe.Qwen3OmniMoeThinkerTextRotaryEmbedding",
    ),
}
_QWEN3_CLASS = {"qwen3_vl", "qwen3_vl_moe", "qwen3_5", "qwen3_5_moe", "qwen4_exp"}
_QWEN3_CLASS |= {"cosmos3_edge", "cosmos3_omni", "cohere_compass"}
_GLM4V_CLASS = {"glm4v", "glm46v", "glm_ocr", "glm4v_moe"}
_OMNI = {"qwen2_5_omni", "qwen3_omni_moe"}

# The mrope_section each rotary module falls back to; the Hub writes it out.
_SECTIONS: dict[tuple[int, ...], tuple[str, ...]] = {
    (16, 24, 24): ("qwen2_vl", "qwen2_5_vl", "paddleocr_vl", "qwen2_5_omni"),
    (24, 20, 20): (
        *("qwen3_vl", "qwen3_vl_moe", "cosmos3_edge", "cosmos3_omni", "cohere_compass"),
        "qwen3_omni_moe",
    ),
    (11, 11, 10): ("qwen3_5", "qwen3_5_moe", "qwen4_exp"),
    (8, 12, 12): ("glm4v", "glm46v", "glm_ocr", "glm4v_moe", "glm_image"),
    (22, 22, 20): ("ernie4_5_vl_moe",),
}
_SECTION = {mt: list(section) for section, types in _SECTIONS.items() for mt in types}
# Defaults the Hub's configs differ from, where the default breaks the model or its rotary:
# GLM's default text configs rotate all 128 dims (64 frequencies) against a section of 32;
# glm4v_moe's default head_dim is 4096 // 96 = 42 and qwen3_omni_moe's 2048 // 28 = 73; the omni
# thinkers have no vision_start field, yet their get_rope_index reads it.
_ROPE_EXTRA: dict[str, dict[str, Any]] = {
    "glm4v": {"partial_rotary_factor": 0.5},
    "glm46v": {"partial_rotary_factor": 0.5},
    "glm_image": {"partial_rotary_factor": 0.5},
    "glm4v_moe": {"partial_rotary_factor": 0.5},
    "qwen3_omni_moe": {"interleaved": True},
}
_TEXT_EXTRA: dict[str, dict[str, Any]] = {
    "glm4v_moe": {"head_dim": 128},
    "qwen3_omni_moe": {"head_dim": 128},
}
_OMNI_IDS = {"vision_start_token_id": 151652, "vision_end_token_id": 151653}
_TOP_EXTRA: dict[str, dict[str, Any]] = {
    "qwen2_5_vl": {"vision_config": {"tokens_per_second": 2}},
    "qwen2_5_omni": _OMNI_IDS,
    "qwen3_omni_moe": _OMNI_IDS,
}

MROPE_MODEL_TYPES: tuple[str, ...] = tuple(sorted(_CLASSES))

NOT_EXPRESSIBLE: dict[str, str] = {
    "hunyuan_vl": "an image is h/m·(w/m + 1) + 2 tokens (a newline per row, two extra), its ids "
    "are absolute grid indices on len(mrope_section) axes, and it has no video input",
    "minicpmv4_7": "it lays thumbnails and slices on a canvas sized by downsample_mode (no "
    "spatial_merge_size), and its <image>/</image> markers take non-text positions",
}


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Config validation logs notes (ids outside the talker's vocabulary, empty per-layer rope
    parameters) that say nothing about positions."""
    logger = logging.getLogger("transformers")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        old = out.get(key)
        if isinstance(value, dict) and isinstance(old, dict):
            value = _merge(old, value)
        out[key] = value
    return out


def _thinker(config: Any) -> Any:
    """The part of an omni config that holds its text model, vision config and ids."""
    return getattr(config, "thinker_config", config)


def hub_config(model_type: str) -> dict[str, Any]:
    """``model_type``'s config as the Hub would hold it: its config class's defaults with the
    text ``rope_parameters`` written out (``mrope_section`` …) and the fixes above, through
    ``to_dict()``. JSON-serialisable."""
    from transformers import CONFIG_MAPPING

    if model_type not in _CLASSES:
        raise KeyError(f"{model_type}: {NOT_EXPRESSIBLE.get(model_type, 'no get_rope_index')}")
    cls = CONFIG_MAPPING[model_type]
    with quiet():
        defaults = _thinker(cls()).text_config
    rope = {**defaults.rope_parameters, "mrope_section": list(_SECTION[model_type])}
    rope |= _ROPE_EXTRA.get(model_type, {})
    if model_type == "cohere_compass":  # keyed by layer type; empty by default
        rope = {"full_attention": {"rope_type": "default", "rope_theta": 10000.0, **rope}}
    text = {"rope_parameters": rope, **_TEXT_EXTRA.get(model_type, {})}
    body = _merge({"text_config": text}, _TOP_EXTRA.get(model_type, {}))
    with quiet():
        config = cls(**({"thinker_config": body} if model_type in _OMNI else body))
    out: dict[str, Any] = config.to_dict()
    return out


@functools.lru_cache(maxsize=64)
def _config(serialised: str) -> Any:
    from transformers import CONFIG_MAPPING

    body = json.loads(serialised)
    with quiet():
        return CONFIG_MAPPING[body.pop("model_type")].from_dict(body)


def _load(config: dict[str, Any]) -> tuple[str, Any]:
    model_type = config["model_type"]
    if model_type not in _CLASSES:
        raise KeyError(f"{model_type}: {NOT_EXPRESSIBLE.get(model_type, 'no get_rope_index')}")
    return model_type, _config(json.dumps(config, sort_keys=True))


def _class(dotted: str) -> Any:
    module, name = dotted.split(".")
    return getattr(importlib.import_module(f"transformers.models.{module}.modeling_{module}"), name)


def _owner(model_type: str, config: Any) -> Any:
    """The class owning get_rope_index, without its __init__: no submodules, no weights."""
    cls = _class(f"{model_type}.{_CLASSES[model_type][0]}")
    model = cls.__new__(cls)
    torch.nn.Module.__init__(model)
    model.config = config
    if model_type in _OMNI:  # the thinker's __init__ copies it from the vision config
        model.spatial_merge_size = config.vision_config.spatial_merge_size
    return model


class _Run:
    """The token run of a list of segments, as the processor would hand it to the model."""

    def __init__(self, model_type: str, config: Any) -> None:
        self.model_type, self.config = model_type, config
        self.ids: list[int] = []
        self.types: list[int] = []
        self.images: list[list[int]] = []
        self.videos: list[list[int]] = []
        self.seconds: list[float] = []
        self.media: list[tuple[int, int]] = []  # [start, end) of each placeholder run

    def add(self, token: int, count: int, kind: int = 0) -> None:
        if kind:
            self.media.append((len(self.ids), len(self.ids) + count))
        self.ids += [token] * count
        self.types += [kind] * count

    def segment(self, segment: dict[str, Any]) -> None:
        config, mt = self.config, self.model_type
        if "text" in segment:
            self.add(_TEXT_ID, int(segment["text"]))
            return
        m = config.vision_config.spatial_merge_size
        if "image" in segment:
            t, h, w = (int(x) for x in segment["image"])
            self.images.append([t, h, w])
            self.add(config.image_token_id, t * h * w // m**2, 1)
            return
        if mt == "glm_image":
            raise ValueError("glm_image has no video input")
        t, h, w = (int(x) for x in segment["video"])
        self.videos.append([t, h, w])
        self.seconds.append(float(segment.get("second_per_grid_t", 1.0)))
        if mt in _QWEN3_CLASS or mt in _GLM4V_CLASS:
            # GLM-4V's processor writes frames with the image token, typed 2 inside the video.
            token = config.image_token_id if mt in _GLM4V_CLASS else config.video_token_id
            for _ in range(t):
                self.add(_TEXT_ID, int(segment.get("frame_prefix", 1)))
                self.add(token, h * w // m**2, 2)
                self.add(_TEXT_ID, int(segment.get("frame_suffix", 1)))
            return
        merge = config.vision_config.temporal_merge_size if mt == "ernie4_5_vl_moe" else 1
        self.add(config.video_token_id, t * h * w // (m**2 * merge), 2)

    def mark_media(self, start_id: int, end_id: int) -> None:
        """Give the text tokens around each placeholder run the start and end marker ids."""
        claimed = -1
        for start, end in self.media:
            before, after = start - 1, end
            own = claimed < before and after < len(self.ids)
            if not own or self.types[before] or self.types[after]:
                raise ValueError(
                    f"{self.model_type} finds media by their start/end tokens: each image or video "
                    "needs a text token of its own on each side"
                )
            self.ids[before], self.ids[after] = start_id, end_id
            claimed = after


def _grid(rows: list[list[int]]) -> torch.Tensor | None:
    return torch.tensor(rows, dtype=torch.long) if rows else None


def reference_positions(
    config: dict[str, Any], segments: list[dict[str, Any]]
) -> tuple[np.ndarray, int | float]:
    """transformers' own ``get_rope_index`` for one sequence of ``segments`` under ``config``
    (a :func:`hub_config` dict): position ids (A, n), int64 (float32 for qwen3_omni_moe), and
    ``mrope_position_deltas`` as a number."""
    model_type, cfg = _load(config)
    inner = _thinker(cfg)
    run = _Run(model_type, inner)
    for segment in segments:
        run.segment(segment)
    if model_type in _OMNI:
        run.mark_media(inner.vision_start_token_id, inner.vision_end_token_id)
    elif model_type == "glm_image":
        run.mark_media(inner.image_start_token_id, inner.image_end_token_id)
    ids = torch.tensor([run.ids], dtype=torch.long)
    mask = torch.ones_like(ids)
    images, videos = _grid(run.images), _grid(run.videos)
    seconds = torch.tensor(run.seconds, dtype=torch.float32) if run.seconds else None
    model = _owner(model_type, inner)
    with torch.no_grad(), quiet():
        if model_type in _OMNI:
            pos, delta = model.get_rope_index(
                ids, images, videos, mask, use_audio_in_video=False, second_per_grids=seconds
            )
        elif model_type == "glm_image":
            pos, delta = model.get_rope_index(ids, image_grid_thw=images, attention_mask=mask)
        else:
            kinds = torch.tensor([run.types], dtype=torch.int)
            grids = {"image_grid_thw": images, "video_grid_thw": videos}
            if model_type == "qwen2_5_vl":
                grids["second_per_grid_ts"] = seconds
            pos, delta = model.get_rope_index(ids, kinds, attention_mask=mask, **grids)
    positions = pos[:, 0, :].numpy()
    positions = positions.astype(np.float32 if pos.dtype.is_floating_point else np.int64)
    value = delta.reshape(-1)[0]
    return positions, (float(value) if value.dtype.is_floating_point else int(value))


@functools.lru_cache(maxsize=64)
def _rotary(serialised: str) -> tuple[Any, str | None]:
    model_type, config = _load(json.loads(serialised))
    text = _thinker(config).text_config
    cls = _class(_CLASSES[model_type][1])
    layer_type = None
    if model_type == "cohere_compass":
        layer_type = next(k for k in text.layer_types if text.rope_parameters.get(k) is not None)
    with quiet():
        return cls(text), layer_type


def reference_cos_sin(
    config: dict[str, Any], position_ids: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The float32 cos and sin of ``config``'s own text rotary module for ``position_ids``
    (A, n): each (n, width of the module's output)."""
    rotary, layer_type = _rotary(json.dumps(config, sort_keys=True))
    positions = torch.as_tensor(np.asarray(position_ids))[:, None, :]  # (A, batch 1, n)
    x = torch.zeros(1, dtype=torch.float32)  # only its dtype and device are read
    kwargs = {"layer_type": layer_type} if layer_type else {}
    with torch.no_grad():
        cos, sin = rotary(x, positions, **kwargs)
    return cos[0].float().numpy(), sin[0].float().numpy()


_LAYOUTS: dict[str, list[dict[str, Any]]] = {
    "text only": [{"text": 5}],
    "image": [{"text": 3}, {"image": [1, 8, 12]}, {"text": 2}],
    "text+image+text+video+text": [
        {"text": 4},
        {"image": [1, 8, 12]},
        {"text": 3},
        {"video": [4, 6, 8], "second_per_grid_t": 0.7},
        {"text": 2},
    ],
    "two videos": [
        {"text": 2},
        {"video": [2, 4, 4]},
        {"text": 2},
        {"video": [6, 4, 8], "second_per_grid_t": 2.0, "frame_prefix": 3},
        {"text": 1},
    ],
}


def _self_check() -> None:
    for model_type in MROPE_MODEL_TYPES:
        config = hub_config(model_type)
        json.dumps(config)
        print(model_type)
        for name, segments in _LAYOUTS.items():
            if model_type == "glm_image" and any("video" in s for s in segments):
                continue
            positions, delta = reference_positions(config, segments)
            cos, sin = reference_cos_sin(config, positions)
            assert cos.shape == sin.shape and cos.shape[0] == positions.shape[1]
            print(
                f"  {name:28} positions {positions.shape} {positions.dtype}"
                f" max {positions.max()} delta {delta} cos {cos.shape}"
            )
    for model_type, reason in NOT_EXPRESSIBLE.items():
        print(f"{model_type}: not expressible: {reason}")


if __name__ == "__main__":
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # as the suite runs it
        _self_check()

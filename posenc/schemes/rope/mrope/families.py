"""How each multimodal-rope (M-RoPE) model type of transformers places its tokens, as data.

Read from each type's ``get_rope_index`` and text rotary module in transformers 5.23. Three
things differ between families that otherwise share one algorithm: whether a video is one block
or one block per frame (Qwen3-VL and GLM-4V give each frame its own ``[1, h, w]`` grid and carry
time in timestamp text), how a video's temporal ids are spaced (Qwen2.5-VL scales the frame index
by ``tokens_per_second · second_per_grid_t``; ERNIE merges ``temporal_merge_size`` frames), and
how the three ids share the rotary frequencies (chunked sections, Qwen3-VL's interleaving, GLM's
pairwise repeat, ERNIE's permutation). Qwen2.5-Omni and GLM-Image scan token ids instead: what
follows a block resumes at its largest id + 1 (Omni), and each medium needs the text tokens
around it. The types whose ``get_rope_index`` works otherwise are listed in :data:`UNANSWERED`
with the reason; one of them also in :data:`MROPE_FAMILIES` (Qwen3-Omni) has its sections, and
so its text rope, answered by ``/v1/rope/config``, but not its ids.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Video = Literal["block", "per_frame", "none"]
# A video's temporal ids: the frame index; int(i · (tokens_per_second · s)) (Qwen2.5-VL); or
# int((i · s) · position_id_per_seconds), images too scaled by the rate (Qwen2.5-Omni).
VideoTime = Literal["index", "tokens_per_second", "seconds"]
# Where what follows a vision block starts: its start + max(h, w) (transformers 5), or the
# largest id so far + 1 (the Qwen-Omni thinkers, and transformers 4).
Resume = Literal["grid", "max"]
# How cos/sin are assembled from the three ids' frequencies.
Rotary = Literal["chunked", "interleaved", "glm_pairs", "ernie"]


@dataclass(frozen=True)
class MRopeFamily:
    video: Video
    rotary: Rotary
    section: tuple[int, ...]  # the rotary module's default mrope_section
    video_time: VideoTime = "index"
    temporal_merge: bool = False  # a video's frames are merged by vision_config.temporal_merge_size
    resume: Resume = "grid"
    # Media found by scanning token ids: the text token before a placeholder run is read as its
    # start marker and the one after as its end marker, so each needs text on both sides.
    markers: bool = False
    zero_delta: bool = False  # GLM-Image returns a delta of 0 whatever the ids
    config_root: str = ""  # where the model keeps its text and vision configs (Omni: the thinker)
    merge: int = 2  # the vision config's default spatial_merge_size


def _omni(rotary: Rotary, section: tuple[int, ...]) -> MRopeFamily:
    """A Qwen-Omni thinker: a video one block on a clock of seconds, media found by the tokens
    around them, what follows resuming at the largest id + 1."""
    return MRopeFamily(
        "block",
        rotary,
        section,
        video_time="seconds",
        resume="max",
        markers=True,
        config_root="thinker_config",
    )


_QWEN2 = MRopeFamily("block", "chunked", (16, 24, 24))
_QWEN3 = MRopeFamily("per_frame", "interleaved", (24, 20, 20))
_QWEN3_5 = MRopeFamily("per_frame", "interleaved", (11, 11, 10))
_GLM4V = MRopeFamily("per_frame", "glm_pairs", (8, 12, 12))

MROPE_FAMILIES: dict[str, MRopeFamily] = {
    "qwen2_vl": _QWEN2,
    "paddleocr_vl": _QWEN2,
    "qwen2_5_vl": MRopeFamily("block", "chunked", (16, 24, 24), video_time="tokens_per_second"),
    "ernie4_5_vl_moe": MRopeFamily("block", "ernie", (22, 22, 20), temporal_merge=True),
    "qwen3_vl": _QWEN3,
    "qwen3_vl_moe": _QWEN3,
    "cosmos3_omni": _QWEN3,
    "cosmos3_edge": _QWEN3,
    "cohere_compass": _QWEN3,
    "qwen3_5": _QWEN3_5,
    "qwen3_5_moe": _QWEN3_5,
    "qwen4_exp": _QWEN3_5,
    "glm4v": _GLM4V,
    "glm46v": _GLM4V,
    "glm_ocr": _GLM4V,
    "glm4v_moe": MRopeFamily("per_frame", "chunked", (8, 12, 12)),
    "qwen2_5_omni": _omni("chunked", (16, 24, 24)),
    # Its ids are not answered (UNANSWERED); its sections are, for its text rope.
    "qwen3_omni_moe": _omni("interleaved", (24, 20, 20)),
    "glm_image": MRopeFamily(
        "none", "chunked", (8, 12, 12), markers=True, zero_delta=True, merge=1
    ),
}

UNANSWERED: dict[str, str] = {
    "qwen3_omni_moe": "its get_rope_index keeps ids in float32 (fractional temporal ids); "
    "not modelled yet",
    "hunyuan_vl": "its xdrope gives len(mrope_section) axes with absolute grid ids; "
    "not modelled yet",
    "minicpmv4_7": "its ids are laid on a canvas of thumbnails and slices; not modelled yet",
}

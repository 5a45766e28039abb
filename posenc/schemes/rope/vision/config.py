"""A model's ``config.json`` → its vision tower's rope: the family, the head width, θ, and what
orders the patches (the spatial merge, Qwen2.5-VL's windows, Llama 4's fixed grid).

θ is read where transformers reads it: the vision config's ``rope_parameters.rope_theta``, else
its legacy ``rope_theta``, else the vision config class's ``default_theta`` (10000 but for
LFM3-VL's 10^6). Other keys default to the vision config class's values
(:data:`~.families.VISION_FAMILIES`); the vision config is read where the family says it sits
(``thinker_config.vision_config`` for the Qwen-Omni thinkers).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from posenc.errors import InconsistentError, ParameterError
from posenc.schemes.rope.models.values import integer, number
from posenc.schemes.rope.vision.families import (
    PIXTRAL_TOWER,
    UNANSWERED,
    VISION_FAMILIES,
    VisionFamily,
)

# The rope types each family's module takes: the Qwen, Kimi and Pixtral modules raise on any
# other (transformers standardises "default" to "axial"); Llama 4's reads rope_theta alone.
_ROPE_TYPES = {
    "qwen": ("axial", "default"),
    "kimi": ("axial", "default"),
    "pixtral": ("axial", "default"),
    "llama4": ("default",),
}


@dataclass(frozen=True)
class VisionRope:
    model_type: str
    family: VisionFamily
    head_dim: int
    theta: float
    spatial_merge_size: int | None  # the merge blocks of the qwen and kimi families
    window: int | None  # Qwen2.5-VL: merged patches a side of an attention window
    side: int | None  # Llama 4: patches a side of its grid

    def describe(self) -> dict[str, Any]:
        """The ``vision`` member of an answer."""
        return {
            "family": self.family.kind,
            "head_dim": self.head_dim,
            "theta": self.theta,
            "layout": "interleaved" if self.family.kind == "llama4" else "split",
            "spatial_merge_size": self.spatial_merge_size,
            "window": self.window,
            "side": self.side,
        }


def _family(config: Mapping[str, Any]) -> tuple[str, VisionFamily, Mapping[str, Any], str]:
    """The model type, its family, the vision config and where it sits in the body."""
    model_type = config.get("model_type")
    if not isinstance(model_type, str):
        raise ParameterError("config.model_type", "is required: it names the vision tower")
    if model_type == PIXTRAL_TOWER:  # the tower's own config
        return model_type, VISION_FAMILIES[model_type], config, "config"
    family = VISION_FAMILIES.get(model_type)
    vision, at = _nested(config, family.at if family else ("vision_config",))
    if vision.get("model_type") == PIXTRAL_TOWER:
        return model_type, VISION_FAMILIES[PIXTRAL_TOWER], vision, at
    # A model type the document allows whose tower has no rope answered here: the config and
    # the operation disagree (as the contract's refusals of schema-valid bodies are typed).
    if model_type in UNANSWERED:
        raise InconsistentError("config.model_type", f"{model_type!r}: {UNANSWERED[model_type]}")
    if family is None:
        known = ", ".join(sorted(VISION_FAMILIES))
        raise InconsistentError(
            "config.model_type",
            f"{model_type!r} has no vision rope here (a Pixtral tower is read from any type "
            f"whose vision_config.model_type is 'pixtral'); known: {known}",
        )
    return model_type, family, vision, at


def _nested(config: Mapping[str, Any], keys: tuple[str, ...]) -> tuple[Mapping[str, Any], str]:
    """The sub-config at ``keys`` and its place in the body; a missing or null one is the config
    class's defaults, as transformers builds it."""
    found, at = config, "config"
    for key in keys:
        inner, at = found.get(key), f"{at}.{key}"
        if inner is not None and not isinstance(inner, Mapping):
            raise ParameterError(at, "must be an object")
        found = {} if inner is None else inner
    return found, at


def _key(vision: Mapping[str, Any], family: VisionFamily, name: str, at: str) -> int:
    found = integer(vision, name, at)
    return int(family.defaults[name]) if found is None else found


def _rope_dict(vision: Mapping[str, Any], at: str) -> tuple[Mapping[str, Any], str]:
    """The rope dict and its field: v5's rope_parameters, else the legacy rope_scaling."""
    for key in ("rope_parameters", "rope_scaling"):
        rope = vision.get(key)
        if rope is None:
            continue
        if not isinstance(rope, Mapping):
            raise ParameterError(f"{at}.{key}", "must be an object")
        return rope, f"{at}.{key}"
    return {}, f"{at}.rope_parameters"


def _theta(vision: Mapping[str, Any], family: VisionFamily, at: str) -> float:
    rope, where = _rope_dict(vision, at)
    kind = rope.get("rope_type", rope.get("type"))
    if kind is not None and kind not in _ROPE_TYPES[family.kind]:
        allowed = " or ".join(repr(k) for k in _ROPE_TYPES[family.kind])
        raise InconsistentError(
            f"{where}.rope_type",
            f"the tower's rotary module takes {allowed}, got {kind!r}: not answered",
        )
    theta, field = number(rope, "rope_theta", where), f"{where}.rope_theta"
    if theta is None:
        theta, field = number(vision, "rope_theta", at), f"{at}.rope_theta"
    if theta is None:
        return family.theta
    if not 1 < theta <= 1e12:
        raise ParameterError(field, f"must be in (1, 1e12], got {theta!r}")
    return theta


def _head_dim(vision: Mapping[str, Any], family: VisionFamily, at: str) -> int:
    given = None
    if family.reads_head_dim:
        given = integer(vision, "head_dim", at)
        if given is None and "head_dim" not in vision and "head_dim" in family.defaults:
            given = int(family.defaults["head_dim"])  # an explicit null divides, as the class
    if given is not None:
        head, field = given, f"{at}.head_dim"
    else:
        width = _key(vision, family, family.width, at)
        name = next((k for k in family.heads if vision.get(k) is not None), family.heads[0])
        heads = _key(vision, family, name, at)
        if width % heads:
            raise InconsistentError(
                f"{at}.{name}", f"{width} ({family.width}) is not a multiple of {heads} heads"
            )
        head, field = width // heads, f"{at}.{family.width}"
    if head % 4 or not 4 <= head <= 65536:
        raise InconsistentError(
            field,
            f"a head of {head} does not split into rotary pairs of two axes "
            "(a multiple of 4, from 4 to 65536)",
        )
    return head


def read(config: Mapping[str, Any]) -> VisionRope:
    model_type, family, vision, at = _family(config)
    head = _head_dim(vision, family, at)
    theta = _theta(vision, family, at)
    merge = window = side = None
    if family.merge is not None:
        merge = family.merge
    elif family.kind == "qwen":
        merge = _key(vision, family, "spatial_merge_size", at)
    if family.window:
        assert merge is not None
        size, patch = (_key(vision, family, k, at) for k in ("window_size", "patch_size"))
        window = size // merge // patch
        if window < 1:
            raise InconsistentError(
                f"{at}.window_size",
                f"{size} is under one merged patch ({merge} × {patch} pixels): no window",
            )
    if family.kind == "llama4":
        size, patch = (_key(vision, family, k, at) for k in ("image_size", "patch_size"))
        side = size // patch
        if side < 1:
            raise InconsistentError(f"{at}.image_size", f"{size} is under one {patch}-patch")
    return VisionRope(model_type, family, head, theta, merge, window, side)

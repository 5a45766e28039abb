"""A multimodal model's ``config.json`` → what its M-RoPE needs: the family, the sections of the
rotary frequencies each id turns, and the vision tower's merge sizes and time spacing.

``mrope_section`` is read where transformers' rotary module reads it: the text model's rope dict
(``rope_scaling or rope_parameters``, as its config class reads them; at the top of a v4
Qwen2-VL config), else the module's default. ``spatial_merge_size``, ``temporal_merge_size``
and ``tokens_per_second`` are the vision config's, with its class's defaults.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from posenc.errors import InconsistentError, ParameterError, against_model_type
from posenc.schemes.rope.models.params import MROPE_KEYS
from posenc.schemes.rope.models.values import ROPE_DICTS, integer, number, rope_dict, sections
from posenc.schemes.rope.mrope.families import MROPE_FAMILIES, UNANSWERED, MRopeFamily
from posenc.schemes.rope.mrope.layout import Vision

_DEFAULT_TEMPORAL_MERGE = 2  # ERNIE-4.5-VL's vision config
_DEFAULT_TOKENS_PER_SECOND = 4  # Qwen2.5-VL's vision config class (its Hub configs say 2)
_DEFAULT_IDS_PER_SECOND = 25  # Qwen2.5-Omni's thinker config class


@dataclass(frozen=True)
class MRope:
    model_type: str
    family: MRopeFamily
    section: tuple[int, ...]
    section_from: str  # the field it was read from, or "" for the family's default
    vision: Vision

    def describe(self) -> dict[str, Any]:
        """The ``mrope`` member of an answer."""
        return {
            "section": list(self.section),
            "section_from": self.section_from or None,
            "interleaved": self.family.rotary == "interleaved",
            "rotary": self.family.rotary,
            "video": self.family.video,
            "spatial_merge_size": self.vision.spatial_merge_size,
            "temporal_merge_size": self.vision.temporal_merge_size
            if self.family.temporal_merge
            else None,
            "tokens_per_second": self.vision.tokens_per_second,
            "position_id_per_seconds": self.vision.position_id_per_seconds,
        }


def family_of(config: Mapping[str, Any], where: str, ids: bool = True) -> tuple[str, MRopeFamily]:
    """The family of ``config``'s model type; ``ids``: its position ids are asked for, not only
    the sections its text rope is split by."""
    model_type = config.get("model_type")
    field = f"{where}.model_type" if where else "model_type"
    if not isinstance(model_type, str):
        raise ParameterError(field, "is required: it names the family whose ids are computed")
    if model_type in UNANSWERED and (ids or model_type not in MROPE_FAMILIES):
        raise InconsistentError(field, f"{model_type!r}: {UNANSWERED[model_type]}")
    if model_type not in MROPE_FAMILIES:
        known = ", ".join(sorted(MROPE_FAMILIES))
        raise ParameterError(field, f"{model_type!r} has no multimodal rope here; known: {known}")
    return model_type, MROPE_FAMILIES[model_type]


def read(
    config: Mapping[str, Any], where: str = "config", ids: bool = True, alone: bool = False
) -> MRope:
    """The model's M-RoPE. The operations' schemas type the config's keys they read only where
    they sit in every family; a value the model type's config class would not take, deeper in,
    is refused as a config inconsistent with its model type, the field named. ``ids``: as
    :func:`family_of`; ``alone``: ``config`` is the family's text model's, read alone (not under
    the family's ``config_root``)."""
    try:
        return _read(config, where, ids, alone)
    except ParameterError as error:
        raise against_model_type(error) from None


def _read(config: Mapping[str, Any], where: str, ids: bool, alone: bool) -> MRope:
    model_type, family = family_of(config, where, ids)
    root, where = (config, where) if alone else _root(config, family, where)
    section, section_from = _section(root, where, family)
    vision_config = root.get("vision_config") or {}
    if not isinstance(vision_config, Mapping):
        raise ParameterError(f"{where}.vision_config", "must be an object")
    at = f"{where}.vision_config" if where else "vision_config"
    merge = integer(vision_config, "spatial_merge_size", at) or family.merge
    temporal = integer(vision_config, "temporal_merge_size", at) or _DEFAULT_TEMPORAL_MERGE
    per_second = None
    if family.video_time == "tokens_per_second":
        per_second = _rate(vision_config, "tokens_per_second", at, _DEFAULT_TOKENS_PER_SECOND)
    per_position = None
    if family.video_time == "seconds":
        per_position = _rate(root, "position_id_per_seconds", where, _DEFAULT_IDS_PER_SECOND)
    vision = Vision(
        family, merge, temporal if family.temporal_merge else 1, per_second, per_position
    )
    return MRope(model_type, family, section, section_from, vision)


def _root(
    config: Mapping[str, Any], family: MRopeFamily, where: str
) -> tuple[Mapping[str, Any], str]:
    if not family.config_root:
        return config, where
    root = config.get(family.config_root) or {}
    field = f"{where}.{family.config_root}" if where else family.config_root
    if not isinstance(root, Mapping):
        raise ParameterError(field, "must be an object")
    return root, field


def _rate(source: Mapping[str, Any], key: str, where: str, default: float) -> float:
    given = number(source, key, where)
    rate = default if given is None else given
    if not 0 < rate <= 1e6:
        raise ParameterError(
            f"{where}.{key}" if where else key, f"must be in (0, 1e6], got {given}"
        )
    return rate


def _section(
    config: Mapping[str, Any], where: str, family: MRopeFamily
) -> tuple[tuple[int, ...], str]:
    text = config.get("text_config")
    places = [("text_config", text)] if isinstance(text, Mapping) else []
    places.append(("", config))
    for prefix, source in places:
        key, rope = rope_dict(source)  # the rope its text model reads: sections from it too
        found = _sections_in(rope)
        path = ".".join(p for p in (where, prefix, key) if p)
        values = list(found.values())
        if any(value != values[0] for value in values):
            raise InconsistentError(
                path, "its layer types give different mrope_section values: not answered"
            )
        if found:
            (name, given), *_ = found.items()
            return sections(given, f"{path}{name}.mrope_section"), f"{path}{name}"
    return family.section, ""


def _sections_in(rope: Mapping[str, Any]) -> dict[str, Any]:
    """``mrope_section`` of a flat rope dict, or of each layer type's (``""`` or ``.type``)."""
    if "mrope_section" in rope:
        return {"": _tupled(rope["mrope_section"])}
    return {
        f".{name}": _tupled(inner["mrope_section"])
        for name, inner in rope.items()
        if isinstance(inner, Mapping) and "mrope_section" in inner
    }


def _tupled(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def text_rope_of(config: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` without its M-RoPE keys, and with the legacy rope type ``mrope`` read as
    ``default`` (as transformers standardises it): the rope a text token turns by, all three
    of its ids being equal. A Qwen2-VL config of transformers 4, flat, is its own text model's
    (``qwen2_vl_text``), as transformers 5 reads it."""
    plain = _without_mrope(config)
    model_type = config.get("model_type")
    family = MROPE_FAMILIES.get(model_type) if isinstance(model_type, str) else None
    if "text_config" not in config and family is not None and not family.config_root:
        plain["model_type"] = f"{model_type}_text"
    return plain


# Where a rope dict may sit: the body, its text model's config (a thinker's, a VLM's), and
# nothing deeper; the walk goes no further, whatever nesting a client sends.
_CONFIG_DEPTH = 3


def _without_mrope(config: Mapping[str, Any], depth: int = 0) -> dict[str, Any]:
    plain: dict[str, Any] = {}
    for key, value in config.items():
        if key in ROPE_DICTS and isinstance(value, Mapping):
            plain[key] = _plain_rope(value)
        elif isinstance(value, Mapping) and depth < _CONFIG_DEPTH:
            plain[key] = _without_mrope(value, depth + 1)
        else:
            plain[key] = value
    return plain


def _plain_rope(rope: Mapping[str, Any], per_layer: bool = True) -> dict[str, Any]:
    """A rope dict without its M-RoPE keys; a per-layer-type one, each type's too."""
    plain: dict[str, Any] = {}
    for key, value in rope.items():
        if key in MROPE_KEYS:
            continue
        if key in ("type", "rope_type") and value == "mrope":
            value = "default"
        nested = per_layer and isinstance(value, Mapping)
        plain[key] = _plain_rope(value, per_layer=False) if nested else value
    return plain


def check_widths(mrope: MRope, rotary_dims: Sequence[int]) -> None:
    """Sections that split the frequencies in chunks must cover them exactly, or transformers'
    rotary module fails; interleaved sections only choose among them."""
    if mrope.family.rotary == "interleaved":
        return
    field = f"{mrope.section_from}.mrope_section" if mrope.section_from else "mrope_section"
    if mrope.family.rotary == "ernie" and mrope.section[0] != mrope.section[1]:
        # ERNIE's rotary module interleaves the height and width chunks pairwise (torch.stack).
        raise InconsistentError(
            field, f"{list(mrope.section)}: ERNIE-4.5-VL's height and width sections must be equal"
        )
    for rotary in rotary_dims:
        check_cover(mrope.section, rotary, field)


def check_cover(section: tuple[int, ...], rotary: int, field: str) -> None:
    """Chunked sections must split a ``rotary``-wide rope's frequencies exactly."""
    if 2 * sum(section) != rotary:
        raise InconsistentError(
            field,
            f"{list(section)} sums to {sum(section)}, not the {rotary // 2} frequencies of a "
            f"{rotary}-wide rotary dimension",
        )

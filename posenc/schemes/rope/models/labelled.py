"""Ropes keyed by rope type rather than by layer type (DeepSeek-V4's ``main`` and ``compress``),
read as the per-layer-type form the reader knows.

DeepSeek-V4's config class (transformers' ``DeepseekV4Config``) keeps one rope per *label*:
``main`` (the default rope at ``rope_theta``) for its ``sliding_attention`` layers, ``compress``
(``compress_rope_theta``, default 160000, with the rope dict's scaling; a YaRN one with
``attention_factor`` 1.0 unless given) for its compressed ones. Given nested (``main`` and
``compress`` both objects), the two are read as they are, each turning
``partial_rotary_factor`` of the head (1.0 when the dict has none, as its rotary module reads
it); given flat, both turn ``partial_rotary_factor`` of the head, or the legacy
``qk_rope_head_dim / head_dim``, or its class's 64 / 512. Its layer types are ``layer_types``,
else the legacy ``compress_ratios`` (0, 4, 128 per layer), else two heavily compressed layers
then compressed-sparse and heavily compressed ones in turn; cut to ``num_hidden_layers``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from posenc.errors import ParameterError
from posenc.schemes.rope.models.families import Family
from posenc.schemes.rope.models.values import ROPE_DICTS, first, integer, number, rope_dict

_DEFAULT_LAYERS = 43
_LEGACY_TYPES = {
    0: "sliding_attention",
    4: "compressed_sparse_attention",
    128: "heavily_compressed_attention",
}


def text_rope_of(text: Mapping[str, Any], family: Family) -> dict[str, Any]:
    """``text`` with its ropes keyed by the layer types that apply them, and its layer types
    as its config class derives them."""
    labels = dict(family.rope_labels)
    where, rope = rope_dict(text)
    head = integer(text, "head_dim", "") or 512
    main, compress = rope.get("main"), rope.get("compress")
    if isinstance(main, Mapping) and isinstance(compress, Mapping):
        by_label = {
            label: {"partial_rotary_factor": 1.0, **own}
            for label, own in (("main", main), ("compress", compress))
        }
    else:
        legacy = integer(text, "qk_rope_head_dim", "")
        partial = first(
            number(text, "partial_rotary_factor", ""),
            None if legacy is None else legacy / head,
            64 / 512,
        )
        scaled = {k: v for k, v in rope.items() if k not in ("main", "compress")}
        scaled = {**scaled, "rope_theta": first(number(text, "compress_rope_theta", ""), 160000.0)}
        scaled.setdefault("rope_type", scaled.pop("type", "default"))
        if scaled["rope_type"] == "yarn":
            scaled.setdefault("attention_factor", 1.0)
        base = first(number(text, "rope_theta", ""), family.default_base)
        by_label = {
            "main": {"rope_type": "default", "rope_theta": base},
            "compress": scaled,
        }
        for own in by_label.values():
            own["partial_rotary_factor"] = partial
    # Its layer types follow from the count: its class's 43 where the config gives none.
    count = integer(text, "num_hidden_layers", "") or _DEFAULT_LAYERS
    rest = {
        key: value
        for key, value in text.items()
        if key not in (*ROPE_DICTS, "qk_rope_head_dim", "partial_rotary_factor", "rotary_dim")
    }
    rest["head_dim"], rest["num_hidden_layers"] = head, count
    rest["layer_types"] = _layer_types(text, count)
    rest[where] = {kind: by_label[label] for kind, label in labels.items()}
    return rest


def _layer_types(text: Mapping[str, Any], count: int) -> list[str]:
    types = text.get("layer_types")
    ratios = text.get("compress_ratios")
    if types is None and ratios is not None:
        if not isinstance(ratios, list) or any(
            type(r) is not int or r not in _LEGACY_TYPES for r in ratios
        ):
            raise ParameterError("compress_ratios", "must be a list of 0, 4 and 128")
        types = [_LEGACY_TYPES[r] for r in ratios]
    if types is None:
        interleave = [
            "compressed_sparse_attention" if i % 2 else "heavily_compressed_attention"
            for i in range(max(count - 2, 0))
        ]
        types = ["heavily_compressed_attention"] * min(count, 2) + interleave
    if not isinstance(types, list):
        raise ParameterError("layer_types", "must be a non-empty list of layer type names")
    return types[:count]

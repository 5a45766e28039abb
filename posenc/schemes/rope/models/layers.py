"""Which layers a config has, and which of them turn by no rope: the layer types it names
or its family derives (``sliding_window_pattern``, Bamba's ``attn_layer_indices``,
RecurrentGemma's ``block_types``), and its NoPE layers (``no_rope_layers`` flags, a family's
interval, listed indices, and layer types without attention or rope)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from posenc.errors import InconsistentError, ParameterError
from posenc.schemes.rope.models.families import (
    ATTENTION_FREE,
    LAYER_COUNTS,
    NOPE_LAYER_LISTS,
    Family,
)
from posenc.schemes.rope.models.layer_rules import CycledLayers, IndexedLayers
from posenc.schemes.rope.models.values import integer

# No model has come near this many layers; a bound keeps an answer's lists small.
MAX_LAYERS = 4096


def count_and_types(
    text: Mapping[str, Any], family: Family
) -> tuple[int | None, tuple[str, ...] | None]:
    """How many layers the config has, and their types where it names or its family derives
    them (the two must agree)."""
    count = next((n for key in LAYER_COUNTS if (n := integer(text, key, "")) is not None), None)
    if family.blocks is not None and integer(text, "num_hidden_layers", "") is None:
        key, sublayers = family.blocks
        blocks = integer(text, key, "")
        count = None if blocks is None else blocks * sublayers
    if count is not None and count > MAX_LAYERS:
        raise ParameterError("num_hidden_layers", f"must be at most {MAX_LAYERS}, got {count}")
    types = (
        derived_layer_types(text, family, count)
        or layer_types(text)
        or lettered_layer_types(text, family)
        or pattern_layer_types(text, family, count)
    )
    if types is None:
        return count, None
    if family.layer_names is not None and not set(types) <= family.layer_names:
        unknown = sorted(set(types) - family.layer_names)
        known = ", ".join(sorted(family.layer_names))
        raise ParameterError(
            "layer_types", f"names {unknown}: this family's model runs only {known}"
        )
    if count is not None and count != len(types):
        raise InconsistentError(
            "layer_types", f"must name num_hidden_layers = {count} layers, got {len(types)}"
        )
    return len(types), types


def layer_types(text: Mapping[str, Any]) -> tuple[str, ...] | None:
    types = text.get("layer_types")
    if types is None:
        return None
    if not isinstance(types, list) or not types or not all(isinstance(t, str) for t in types):
        raise ParameterError("layer_types", "must be a non-empty list of layer type names")
    if len(types) > MAX_LAYERS:
        raise ParameterError("layer_types", f"must name at most {MAX_LAYERS} layers")
    return tuple(types)


def pattern_layer_types(
    text: Mapping[str, Any], family: Family, count: int | None
) -> tuple[str, ...] | None:
    """The layer types a family's config class derives from ``sliding_window_pattern``."""
    if family.layer_pattern is None:
        return None
    if count is None:
        raise InconsistentError("num_hidden_layers", "is required: the layers' types differ")
    pattern = integer(text, "sliding_window_pattern", "") or family.layer_pattern
    return tuple(
        "sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(count)
    )


def lettered_layer_types(text: Mapping[str, Any], family: Family) -> tuple[str, ...] | None:
    """The layer types a family's config class spells in letters, or its default."""
    rule = family.lettered_layers
    if rule is None:
        return None
    if rule.key not in text:
        return rule.default
    pattern = text[rule.key]  # null: its config class's pattern-to-list fails on it
    letters = dict(rule.letters)
    if not isinstance(pattern, str) or not pattern or not set(pattern) <= set(letters):
        raise ParameterError(rule.key, f"must be a string of the letters {''.join(letters)}")
    if len(pattern) > MAX_LAYERS:
        raise ParameterError(rule.key, f"must name at most {MAX_LAYERS} layers")
    return tuple(letters[letter] for letter in pattern)


def derived_layer_types(
    text: Mapping[str, Any], family: Family, count: int | None
) -> tuple[str, ...] | None:
    """The layer types a family's config class derives from keys of its own (it has no
    ``layer_types`` of its own to set: a config.json that gives them does not load)."""
    rule = family.derived_layers
    if rule is None:
        return None
    for key in ("layer_types", "layers_block_type"):
        if text.get(key) is not None:
            raise ParameterError(
                key,
                f"{text.get('model_type')}'s config class derives its layer types from "
                f"{rule.key}; transformers does not load a config that gives them",
            )
    if count is None:
        raise InconsistentError("num_hidden_layers", "is required: the layers' types differ")
    if isinstance(rule, IndexedLayers):
        listed = text.get(rule.key) or []
        if not isinstance(listed, list) or not all(type(i) is int for i in listed):
            raise ParameterError(rule.key, "must be a list of layer indices")
        return tuple(rule.listed if i in listed else rule.other for i in range(count))
    return _cycled(text, rule, count)


def _cycled(text: Mapping[str, Any], rule: CycledLayers, count: int) -> tuple[str, ...]:
    # Absent, its config class's default; null, its list(None) fails.
    blocks = text[rule.key] if rule.key in text else list(rule.default)
    if not isinstance(blocks, list) or not blocks or not all(isinstance(b, str) for b in blocks):
        raise ParameterError(rule.key, "must be a non-empty list of block kinds")
    if count > rule.repeats * len(blocks):
        # Its config class repeats them this many times, then cuts: the model lacks layers.
        raise InconsistentError(
            rule.key, f"covers at most {rule.repeats} × {len(blocks)} layers, not {count}"
        )
    kinds = (blocks * rule.repeats)[:count]
    return tuple(rule.named if kind == rule.block else rule.other for kind in kinds)


def nope_layers(
    text: Mapping[str, Any], family: Family, count: int | None, types: tuple[str, ...] | None
) -> tuple[int, ...]:
    flags = text.get("no_rope_layers")
    if flags == [] and family.empty_nope_flags_unset:
        flags = None
    if flags is not None:
        if not isinstance(flags, list) or not all(
            type(flag) is int and flag in (0, 1) for flag in flags
        ):
            raise ParameterError("no_rope_layers", "must be a list of 0 (no rope) and 1 (rope)")
        if len(flags) > MAX_LAYERS:
            raise ParameterError("no_rope_layers", f"must flag at most {MAX_LAYERS} layers")
        if count is not None and len(flags) != count:
            raise InconsistentError("no_rope_layers", f"must flag {count} layers, got {len(flags)}")
        count = len(flags) if count is None else count
        nope = {i for i, flag in enumerate(flags) if flag == 0}
    elif family.nope_interval is not None:
        if "no_rope_layer_interval" in text and text["no_rope_layer_interval"] is None:
            # Its config class takes the remainder by it: a null fails there.
            raise ParameterError("no_rope_layer_interval", "must be an integer, not null")
        interval = integer(text, "no_rope_layer_interval", "") or family.nope_interval
        if count is None:
            raise InconsistentError("num_hidden_layers", "is required: some layers have no rope")
        nope = {i for i in range(count) if (i + 1) % interval == 0}
    else:
        nope = set()
    for key in NOPE_LAYER_LISTS:
        listed = text.get(key)
        if listed is None and family.default_nope_list:
            listed = [i for i in family.default_nope_list if count is None or i < count]
        if listed is not None:
            top = MAX_LAYERS if count is None else count
            if not isinstance(listed, list) or not all(
                type(i) is int and 0 <= i < top for i in listed
            ):
                raise ParameterError(key, f"must be a list of layer indices below {top}")
            nope |= set(listed)
    if family.nope_types and types is None:
        raise InconsistentError("layer_types", "is required: some layer types have no rope")
    if types is not None:
        free = attention_free(family) | family.nope_types
        nope |= {i for i, kind in enumerate(types) if kind in free}
    return tuple(sorted(nope))


def attention_free(family: Family) -> frozenset[str]:
    return ATTENTION_FREE if family.attention_free is None else family.attention_free

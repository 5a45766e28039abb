"""One rope of a model: a rope dict of its text config → :class:`RopeParams`, as transformers
reads it.

Both forms are read: transformers 5's ``rope_parameters`` (``rope_type``, ``rope_theta`` and the
scaling's own keys) and the older top-level ``rope_theta`` with a ``rope_scaling`` dict (``type``
or ``rope_type``). The head is ``head_dim``, or ``hidden_size // num_attention_heads``; the
rotary dimension is ``int(head · partial_rotary_factor)`` (GPT-NeoX's ``rotary_pct`` and
``rotary_emb_base`` are its older names; GPT-J's ``rotary_dim`` gives it directly). As in
transformers, ``original_max_position_embeddings`` defaults to ``max_position_embeddings`` for
yarn, llama3 and longrope (a top-level value wins, as Phi-3 writes it), dynamic scaling takes
``max_position_embeddings`` as the trained length, and yarn's and longrope's missing ``factor``
is ``max_position_embeddings / original_max_position_embeddings``. transformers'
``proportional`` rope type turns ``int(partial_rotary_factor · head // 2)`` pairs of the whole
head (``rotary_pairs``), its ``factor`` as linear scaling. :func:`layer_heads` reads the head
widths a layer's own config gives (``per_layer_config``, Gemma 4's ``global_head_dim``). Unknown
rope types or keys are refused with the field named.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from posenc.errors import InconsistentError, ParameterError
from posenc.schemes.rope.models import xdrope
from posenc.schemes.rope.models.families import Family
from posenc.schemes.rope.models.values import class_defaults, first, integer, number
from posenc.schemes.rope.params import RopeParams, Scaling

# transformers' rope_type → our scaling.
SCALINGS: dict[str, Scaling] = {
    "default": "none",
    "linear": "linear",
    "dynamic": "dynamic",
    "yarn": "yarn",
    "llama3": "llama3",
    "longrope": "longrope",
    "su": "longrope",  # Phi-3's name for longrope before transformers renamed it
}
# A rope over the first int(partial_rotary_factor · head / 2) pairs of the whole head, its
# exponents divided by the head (2i/head), the other pairs at frequency 0, then divided by
# ``factor`` (default 1): RopeParams' rotary_pairs, with linear scaling when a factor is given.
PROPORTIONAL = "proportional"
NUMBERS = (
    "factor",
    "low_freq_factor",
    "high_freq_factor",
    "beta_fast",
    "beta_slow",
    "attention_factor",
    "mscale",
    "mscale_all_dim",
)
# Keys transformers keeps in a rope dict that do not change cos/sin: its validation ignores the
# first; Llama 4's query scaling (reported beside the rope) multiplies q, not the cache.
IGNORED = ("max_position_embeddings", "llama_4_scaling_beta")
# A multimodal model's keys (read by .mrope.config, removed before the text rope is read).
MROPE_KEYS = ("mrope_section", "mrope_interleaved", "interleaved")
# What a layer's entry in per_layer_config may say of its heads' width (read), and the keys of
# a rope of its own (not read: refused, naming them).
_HEAD_KEYS = ("head_dim", "hidden_size", "num_attention_heads")
_LAYER_ROPE_KEYS = (
    "rope_parameters",
    "rope_scaling",
    "rope_theta",
    "rotary_emb_base",
    "partial_rotary_factor",
    "rotary_pct",
    "rotary_dim",
    "qk_rope_head_dim",
    "max_position_embeddings",
    "original_max_position_embeddings",
    "layer_types",
)
_KNOWN = frozenset(
    {
        "rope_type",
        "type",
        "rope_theta",
        "partial_rotary_factor",
        "original_max_position_embeddings",
        "truncate",
        "short_factor",
        "long_factor",
        *NUMBERS,
        *IGNORED,
    }
)


# HunYuan's keys, which the body's schema types for every config: refused elsewhere as a
# config inconsistent with its model type.
_HUNYUAN_KEYS = {
    "alpha": "is HunYuan's stretch of the base: no other family reads it",
    "xdrope_section": "is HunYuan-VL's: no other family reads it",
}


def rope_params(
    text: Mapping[str, Any], where: str, rope: Mapping[str, Any], family: Family
) -> tuple[RopeParams, float]:
    """The rope that ``rope`` (found at field ``where`` of the text config ``text``) describes,
    and the fraction of the head it turns.

    >>> llama2 = {"hidden_size": 4096, "num_attention_heads": 32, "rope_theta": 10000.0}
    >>> rope_params(llama2, "rope_parameters", {}, Family())[0]
    RopeParams(d_model=128, base=10000.0, layout='split', scaling='none', ...)
    """
    defaults = class_defaults(text)
    rope_type = _rope_type(text, where, rope, family)
    proportional = rope_type == PROPORTIONAL
    if proportional:
        scaling: Scaling = "none" if number(rope, "factor", where) is None else "linear"
    else:
        scaling = SCALINGS[rope_type]
    _check_keys(where, rope, family)
    if family.ntk_alpha and scaling == "dynamic" and number(rope, "alpha", where):
        return xdrope.ntk_alpha(text, where, rope, family)

    base = first(
        number(rope, "rope_theta", where),
        number(text, "rope_theta", ""),
        number(text, "rotary_emb_base", ""),
        defaults.get("rope_theta"),
        family.default_base,
    )
    max_positions = integer(text, "max_position_embeddings", "")
    head = head_dim(text, family)
    if rotary_given := (integer(text, "rotary_dim", "") or integer(text, "qk_rope_head_dim", "")):
        if rotary_given > head:
            raise InconsistentError(
                "rotary_dim", f"turns {rotary_given} dimensions of a {head}-wide head"
            )
    partial = number(rope, "partial_rotary_factor", where)
    # 0 is a given value (refused below), not a missing one: test for None, not truth.
    for field in ("partial_rotary_factor", "rotary_pct"):
        partial = number(text, field, "") if partial is None else partial
    if partial is None:
        partial = first(family.partial_rotary_factor, defaults.get("partial_rotary_factor"))
    if family.default_whole_head and rope_type == "default":
        partial = None
    # GPT-J's rotary_dim, or multi-latent attention's rope part of each head (DeepSeek).
    rotary = integer(text, "rotary_dim", "") or integer(text, "qk_rope_head_dim", "")
    if proportional and rotary is not None:
        named = "rotary_dim" if integer(text, "rotary_dim", "") else "qk_rope_head_dim"
        raise ParameterError(named, "does not apply to rope_type=proportional")
    pairs = None
    if rotary is None:
        partial = 1.0 if partial is None else partial
        if not 0 < partial <= 1:
            raise ParameterError("partial_rotary_factor", f"must be in (0, 1], got {partial}")
        rotary = int(head * partial)
        if proportional:
            # The cache spans the whole head, of which int(p · head // 2) pairs turn.
            rotary, pairs = head, int(partial * head // 2)
            if pairs < 1:
                raise InconsistentError(
                    "partial_rotary_factor", f"turns no pair of a {head}-wide head: {partial}"
                )
            pairs = None if pairs == head // 2 else pairs
    else:
        partial = rotary / head
    if family.whole_head_apply and rotary != head:
        raise InconsistentError(
            "partial_rotary_factor",
            f"turns {rotary} of a {head}-wide head under rope_type={rope_type}, but "
            f"{text.get('model_type')}'s attention turns the whole head by the cache: its model "
            "cannot apply that rope",
        )
    if rotary < 2 or rotary % 2:
        raise InconsistentError(
            "partial_rotary_factor",
            f"gives a rotary dimension of {rotary} (head {head}): it must be even and ≥ 2",
        )

    values: dict[str, Any] = {name: number(rope, name, where) for name in NUMBERS}
    for name in ("short_factor", "long_factor"):
        values[name] = _factors(rope, name, where, rotary)
    if "truncate" in rope:
        if not isinstance(rope["truncate"], bool):
            raise ParameterError(
                f"{where}.truncate", f"must be true or false, got {rope['truncate']!r}"
            )
        values["truncate"] = rope["truncate"]
    original = integer(rope, "original_max_position_embeddings", where)
    if scaling in ("yarn", "llama3", "longrope"):
        original = integer(text, "original_max_position_embeddings", "") or original
        original = original or max_positions
        if original is None:
            raise InconsistentError(
                f"{where}.original_max_position_embeddings",
                f"is required with rope_type={rope_type} (or max_position_embeddings)",
            )
        if scaling != "llama3" and values["factor"] is None and max_positions:
            values["factor"] = max_positions / original
    elif scaling == "dynamic":
        original = max_positions  # transformers' dynamic scaling reads the trained length here
        if original is None:
            raise InconsistentError("max_position_embeddings", "is required with rope_type=dynamic")
    else:
        original = None
    values["original_max_position_embeddings"] = original
    values["rotary_pairs"] = pairs
    given = {k: v for k, v in values.items() if v is not None}
    try:
        params = RopeParams(
            d_model=rotary,
            base=base,
            layout=family.layout,
            scaling=scaling,
            framework_precision=family.framework_precision,
            **given,
        )
    except ParameterError as error:
        config_name = {"d_model": "head_dim", "base": "rope_theta"}
        raise type(error)(
            config_name.get(error.param, f"{where}.{error.param}"), error.message
        ) from None
    return params, partial


def _rope_type(text: Mapping[str, Any], where: str, rope: Mapping[str, Any], family: Family) -> str:
    """The rope dict's type, one the service reads and the family's rotary module takes."""
    rope_type = rope.get("rope_type", rope.get("type", "default"))
    named = f"{where}.{'rope_type' if 'rope_type' in rope else 'type'}"
    if rope_type == "mrope" or any(key in rope for key in MROPE_KEYS):
        key = next((f"{where}.{key}" for key in MROPE_KEYS if key in rope), named)
        raise InconsistentError(
            key,
            "multimodal rope (M-RoPE) belongs to the multimodal model types "
            "POST /v1/rope/positions names, not to this model_type",
        )
    if rope_type == "xdrope":
        raise InconsistentError(named, "is HunYuan-VL's: no other family reads it")
    if not isinstance(rope_type, str) or rope_type not in {*SCALINGS, PROPORTIONAL}:
        known = ", ".join(sorted({*SCALINGS, PROPORTIONAL}))
        raise ParameterError(named, f"must be one of {known}, got {rope_type!r}")
    if family.rope_types is not None and rope_type not in family.rope_types:
        known = ", ".join(sorted(family.rope_types))
        raise ParameterError(
            named,
            f"must be {known} for {text.get('model_type')}: its rotary module refuses "
            f"{rope_type!r}",
        )
    return rope_type


def _check_keys(where: str, rope: Mapping[str, Any], family: Family) -> None:
    """Every key of the rope dict one the service reads (HunYuan's alpha for its families)."""
    readable = _KNOWN | {"alpha"} if family.ntk_alpha else _KNOWN
    for key, value in rope.items():
        if key in readable:
            continue
        if value is None or isinstance(value, Mapping):
            # Transformers 5's rope per layer type, whose types' ropes are all null here:
            # a layer type this config's layers do not have.
            raise InconsistentError(
                f"{where}.{key}", "names a layer type without a rope, and no layer has a rope"
            )
        if key in _HUNYUAN_KEYS:  # typed by the body's schema for every config
            raise InconsistentError(f"{where}.{key}", _HUNYUAN_KEYS[key])
        raise ParameterError(f"{where}.{key}", "is not a rope parameter the service models")


def head_dim(config: Mapping[str, Any], family: Family) -> int:
    """The attention head's width: the family's own key (JetMoE's ``kv_channels``), else
    ``head_dim``, else multi-latent attention's rope part (DeepSeek's config classes set
    ``head_dim`` to it), else the config class's default, else ``hidden_size /
    num_attention_heads``."""
    for key in (family.head_key, "head_dim", "qk_rope_head_dim"):
        head = integer(config, key, "")
        if head is not None:
            return head
    default = class_defaults(config).get("head_dim")
    if default is not None:
        return int(default)
    hidden = integer(config, "hidden_size", "") or integer(config, "n_embd", "")
    heads = integer(config, "num_attention_heads", "") or integer(config, "n_head", "")
    if hidden is None or heads is None:
        raise InconsistentError(
            "head_dim", "is required, or hidden_size and num_attention_heads to derive it"
        )
    return hidden // heads


def layer_heads(
    text: Mapping[str, Any], family: Family, layers: int, types: tuple[str, ...] | None
) -> dict[int, int]:
    """The layers whose heads are not the model's ``head_dim`` wide, and their width: as
    transformers 5's ``per_layer_config`` says (layer index → the keys that differ), else by
    the family's rule for a config without one (Gemma 4's ``global_head_dim``); ``layers``
    bounds the indices."""
    if "per_layer_config" not in text:
        wide = family.wide_layers
        if wide is None or types is None:
            return {}
        head = integer(text, wide.head_key, "") or wide.default_head
        return {i: head for i, kind in enumerate(types) if kind == wide.layer_type}
    given = text["per_layer_config"]
    if given is None:
        return {}
    if not isinstance(given, Mapping):
        raise ParameterError("per_layer_config", "must be an object of layer index → keys")
    heads: dict[int, int] = {}
    for key, own in given.items():
        # JSON writes the indices as strings ("05"); transformers reads them as integers.
        index = int(key) if isinstance(key, str) and key.isdigit() else key
        if type(index) is not int or not 0 <= index < layers:
            raise ParameterError(f"per_layer_config.{key}", f"must be a layer index below {layers}")
        if not isinstance(own, Mapping):
            raise ParameterError(f"per_layer_config.{key}", "must be an object of the layer's keys")
        for name in own:
            if name in _LAYER_ROPE_KEYS:
                raise ParameterError(
                    f"per_layer_config.{key}.{name}", "a layer's own rope is not read"
                )
        widths = {name: own[name] for name in (*_HEAD_KEYS, family.head_key) if name in own}
        if widths and (head := head_dim({**text, **widths}, family)) != head_dim(text, family):
            heads[index] = head
    return heads


def _factors(
    rope: Mapping[str, Any], name: str, where: str, rotary: int
) -> tuple[float, ...] | None:
    values = rope.get(name)
    if values is None:
        return None
    if not isinstance(values, list) or not all(
        isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and v > 0
        for v in values
    ):
        raise ParameterError(f"{where}.{name}", "must be a list of positive numbers")
    if len(values) != rotary // 2:
        raise InconsistentError(
            f"{where}.{name}",
            f"must hold rotary dimension / 2 = {rotary // 2} numbers, got {len(values)}",
        )
    return tuple(float(v) for v in values)

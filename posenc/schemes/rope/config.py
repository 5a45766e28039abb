"""A model's ``config.json`` → the rope parameters it uses, as transformers reads them.

Both forms are read: transformers 5's ``rope_parameters`` (``rope_type``, ``rope_theta`` and the
scaling's own keys) and the older top-level ``rope_theta`` with a ``rope_scaling`` dict (``type``
or ``rope_type``). The head is ``head_dim``, or ``hidden_size // num_attention_heads``; the
rotary dimension is ``int(head · partial_rotary_factor)`` (GPT-NeoX's ``rotary_pct`` and
``rotary_emb_base`` are its older names; GPT-J's ``rotary_dim`` gives it directly). As in
transformers, ``original_max_position_embeddings`` defaults to ``max_position_embeddings`` for
yarn, llama3 and longrope (a top-level value wins, as Phi-3 writes it), dynamic scaling takes
``max_position_embeddings`` as the trained length, and yarn's and longrope's missing ``factor``
is ``max_position_embeddings / original_max_position_embeddings``.

Anything that would change the rope and that the service does not model (per-layer-type rope,
multimodal sections, unknown rope types or keys) is refused with the field named.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from posenc.errors import InconsistentError, ParameterError
from posenc.schemes.rope.params import Layout, RopeParams, Scaling

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
    }
)
# Models whose rotary module pairs (2i, 2i+1) rather than transformers' rotate_half.
_INTERLEAVED_MODELS = frozenset({"gptj", "codegen"})


@dataclass(frozen=True)
class RopeConfig:
    """What a config says about its rope: the parameters, and the sizes they came from."""

    params: RopeParams
    head_dim: int
    partial_rotary_factor: float
    max_position_embeddings: int | None


def from_config(config: Mapping[str, Any]) -> RopeConfig:
    """The canonical rope parameters of a model's ``config.json``.

    Raises :class:`ParameterError` naming the config field (``rope_parameters.factor``,
    ``head_dim`` …) that is missing, malformed or not something the service can honour.

    >>> llama2 = {"hidden_size": 4096, "num_attention_heads": 32, "rope_theta": 10000.0}
    >>> from_config(llama2).params
    RopeParams(d_model=128, base=10000.0, layout='split', scaling='none', ...)
    """
    if not isinstance(config, Mapping):
        raise ParameterError("config", "must be a JSON object, a model's config.json")
    where, rope = _rope_dict(config)
    rope_type = rope.get("rope_type", rope.get("type", "default"))
    if not isinstance(rope_type, str) or rope_type not in SCALINGS:
        known = ", ".join(sorted(SCALINGS))
        key = "rope_type" if "rope_type" in rope else "type"
        raise ParameterError(f"{where}.{key}", f"must be one of {known}, got {rope_type!r}")
    scaling = SCALINGS[rope_type]
    for key in rope:
        if key not in _KNOWN:
            raise ParameterError(f"{where}.{key}", "is not a rope parameter the service models")

    base = _number(rope, "rope_theta", where) or _number(config, "rope_theta", "")
    base = base or _number(config, "rotary_emb_base", "") or 10000.0
    max_positions = _integer(config, "max_position_embeddings", "")
    head = _head_dim(config)
    partial = _number(rope, "partial_rotary_factor", where)
    # 0 is a given value (refused below), not a missing one: test for None, not truth.
    for field in ("partial_rotary_factor", "rotary_pct"):
        partial = _number(config, field, "") if partial is None else partial
    if partial is None and config.get("model_type") == "gpt_neox":
        partial = 0.25  # transformers' default for GPT-NeoX
    rotary = _integer(config, "rotary_dim", "")
    if rotary is None:
        partial = 1.0 if partial is None else partial
        if not 0 < partial <= 1:
            raise ParameterError("partial_rotary_factor", f"must be in (0, 1], got {partial}")
        rotary = int(head * partial)
    else:
        partial = rotary / head
    if rotary < 2 or rotary % 2:
        raise InconsistentError(
            "partial_rotary_factor",
            f"gives a rotary dimension of {rotary} (head {head}): it must be even and ≥ 2",
        )

    values: dict[str, Any] = {name: _number(rope, name, where) for name in NUMBERS}
    for name in ("short_factor", "long_factor"):
        values[name] = _factors(rope, name, where, rotary)
    if "truncate" in rope:
        if not isinstance(rope["truncate"], bool):
            raise ParameterError(
                f"{where}.truncate", f"must be true or false, got {rope['truncate']!r}"
            )
        values["truncate"] = rope["truncate"]
    original = _integer(rope, "original_max_position_embeddings", where)
    if scaling in ("yarn", "llama3", "longrope"):
        original = _integer(config, "original_max_position_embeddings", "") or original
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
    layout: Layout = "interleaved" if config.get("model_type") in _INTERLEAVED_MODELS else "split"
    given = {k: v for k, v in values.items() if v is not None}
    try:
        params = RopeParams(d_model=rotary, base=base, layout=layout, scaling=scaling, **given)
    except ParameterError as error:
        config_name = {"d_model": "head_dim", "base": "rope_theta"}
        raise type(error)(
            config_name.get(error.param, f"{where}.{error.param}"), error.message
        ) from None
    return RopeConfig(params, head, partial, max_positions)


def _rope_dict(config: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]]:
    """The rope dict and the field it came from; ``{}`` for the plain rope of old configs."""
    for where in ("rope_parameters", "rope_scaling"):
        rope = config.get(where)
        if rope is None:
            continue
        if not isinstance(rope, Mapping):
            raise ParameterError(where, f"must be an object, got {type(rope).__name__}")
        nested = [k for k, v in rope.items() if isinstance(v, Mapping)]
        if nested:
            raise ParameterError(
                f"{where}.{nested[0]}",
                "per-layer-type rope is not supported: send one layer type's parameters",
            )
        return where, rope
    return "rope_parameters", {}


def _number(source: Mapping[str, Any], name: str, where: str) -> float | None:
    value = source.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        field = f"{where}.{name}" if where else name
        raise ParameterError(field, f"must be a finite number, got {value!r}")
    return float(value)


def _integer(source: Mapping[str, Any], name: str, where: str) -> int | None:
    value = _number(source, name, where)
    if value is None:
        return None
    if not value.is_integer() or not 1 <= value <= 2**31 - 1:
        field = f"{where}.{name}" if where else name
        raise ParameterError(field, f"must be an integer in [1, 2^31), got {source[name]!r}")
    return int(value)


def _head_dim(config: Mapping[str, Any]) -> int:
    head = _integer(config, "head_dim", "")
    if head is not None:
        return head
    hidden = _integer(config, "hidden_size", "") or _integer(config, "n_embd", "")
    heads = _integer(config, "num_attention_heads", "") or _integer(config, "n_head", "")
    if hidden is None or heads is None:
        raise InconsistentError(
            "head_dim", "is required, or hidden_size and num_attention_heads to derive it"
        )
    return hidden // heads


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

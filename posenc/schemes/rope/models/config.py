"""A model's ``config.json`` → the rope of every layer, as transformers reads it.

The text model's config is the body itself or, for a multimodal model, the one nested at one of
:data:`~.families.TEXT_CONFIGS` (``text_config`` …); errors name fields by their path there.
Its layers are ``num_hidden_layers`` (or ``layer_types``'s length), their types as the config
names them or as its family's config class derives them from keys of its own (Bamba's
``attn_layer_indices``, RecurrentGemma's ``block_types``). A flat ``rope_parameters``
(or the legacy ``rope_theta`` + ``rope_scaling``) is one rope for every layer, as in
transformers; ``rope_parameters`` keyed by layer type is one rope per type of ``layer_types``.
Layers without a rope: those ``no_rope_layers`` flags 0 (1 = rope, as transformers writes it),
or, for a family whose rule it is, every ``no_rope_layer_interval``-th; and layers whose type
has no attention (:data:`~.families.ATTENTION_FREE`, or the family's own); every layer, where
the family's switch is off (GraniteMoE-Hybrid's ``position_embedding_type``). Each rope is read by
:func:`.params.rope_params`; the family's pairing and defaults are data
(:mod:`.families`). What the service cannot honour is refused, naming the field.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from posenc.errors import InconsistentError, ParameterError, PosencError
from posenc.schemes.rope.models import labelled, xdrope
from posenc.schemes.rope.models import layers as model_layers
from posenc.schemes.rope.models.families import (
    FLAT_TEXT_TYPES,
    OWN_TEXT_CONFIGS,
    PER_LAYER,
    TEXT_CONFIGS,
    Family,
    LegacyLayers,
)
from posenc.schemes.rope.models.family_of import apply_of, family_of, rope_off
from posenc.schemes.rope.models.params import head_dim, layer_heads, rope_params
from posenc.schemes.rope.models.values import class_defaults, integer, number, rope_dict
from posenc.schemes.rope.mrope import config as mrope_config
from posenc.schemes.rope.mrope.families import MROPE_FAMILIES
from posenc.schemes.rope.params import RopeParams

T = TypeVar("T")


@dataclass(frozen=True)
class LayerRope:
    """One rope and the layers that apply it."""

    layer_types: tuple[str, ...]
    layers: tuple[int, ...] | None  # None: the config does not say how many layers there are
    params: RopeParams
    partial_rotary_factor: float
    apply: str | None = None  # the pairs q/k turn in, where they are not the cache's layout
    query_scaling: Mapping[str, float] | None = None  # Llama 4's scaling of q, beside the rope
    rotary_offset: int = 0  # the first dimension of the head that turns


@dataclass(frozen=True)
class ModelRope:
    """Every rope of a model, and the layers that have none."""

    model_type: str | None
    text_config: str  # where the text model's config was found ("" for the body itself)
    num_hidden_layers: int | None
    head_dim: int
    max_position_embeddings: int | None
    ropes: tuple[LayerRope, ...]
    nope_layers: tuple[int, ...]


@dataclass(frozen=True)
class RopeConfig:
    """A model with one rope: its parameters, and the sizes they came from."""

    params: RopeParams
    head_dim: int
    partial_rotary_factor: float
    max_position_embeddings: int | None


def read(config: Mapping[str, Any]) -> ModelRope:
    """The ropes of a model's ``config.json``.

    >>> llama2 = {"hidden_size": 4096, "num_attention_heads": 32, "num_hidden_layers": 2}
    >>> [(r.layers, r.params.d_model) for r in read(llama2).ropes]
    [((0, 1), 128)]
    """
    if not isinstance(config, Mapping):
        raise ParameterError("config", "must be a JSON object, a model's config.json")
    # A multimodal rope's sections are read where its model type says (.mrope.config), and
    # must cover the frequencies they split; the rope a text token turns by is the rest.
    mrope = None
    if config.get("model_type") in MROPE_FAMILIES:
        mrope = mrope_config.read(config, where="", ids=False)
        config = mrope_config.text_rope_of(config)
    path, text = _text_config(config)
    model = _within(path, lambda: _read_text(text, path, sectioned=mrope is not None))
    if mrope is not None:
        mrope_config.check_widths(mrope, [rope.params.d_model for rope in model.ropes])
    return model


def from_config(config: Mapping[str, Any]) -> RopeConfig:
    """The rope of a model whose attention layers all share one; refused (naming
    ``layer_types``) for a model with several.

    >>> llama2 = {"hidden_size": 4096, "num_attention_heads": 32, "rope_theta": 10000.0}
    >>> from_config(llama2).params
    RopeParams(d_model=128, base=10000.0, layout='split', scaling='none', ...)
    """
    model = read(config)
    if len(model.ropes) != 1:
        raise InconsistentError(
            "layer_types", f"the model has {len(model.ropes)} ropes: ask POST /v1/rope/config"
        )
    (rope,) = model.ropes
    return RopeConfig(
        rope.params, model.head_dim, rope.partial_rotary_factor, model.max_position_embeddings
    )


def _text_config(config: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]]:
    model_type = config.get("model_type")
    own = OWN_TEXT_CONFIGS.get(model_type) if isinstance(model_type, str) else None
    for path in TEXT_CONFIGS if own is None else (own,):
        found: Any = config
        for key in path.split("."):
            found = found.get(key) if isinstance(found, Mapping) else None
        if isinstance(found, Mapping):
            if not isinstance(found.get("model_type"), str):
                raise ParameterError(
                    f"{path}.model_type", "is required: it names the text model's family"
                )
            return path, found
    if own is not None:
        raise ParameterError(own, f"is required: {model_type}'s rope is read from it, an object")
    if isinstance(model_type, str) and model_type in FLAT_TEXT_TYPES:
        # Its text model's keys at its top, as older checkpoints write them: transformers folds
        # them into the text model's config.
        return "", {**config, "model_type": FLAT_TEXT_TYPES[model_type]}
    return "", config


def _within(path: str, read_text: Callable[[], T]) -> T:
    """``read_text()`` with the fields its errors name prefixed by ``path``."""
    if not path:
        return read_text()
    try:
        return read_text()
    except PosencError as error:
        param = getattr(error, "param", "config")
        raise type(error)(f"{path}.{param}", getattr(error, "message", str(error))) from None


def _read_text(text: Mapping[str, Any], path: str, sectioned: bool = False) -> ModelRope:
    """The text model's ropes; ``sectioned``: its M-RoPE sections were read (and taken out)
    from the multimodal config around it."""
    family = family_of(text)
    text, mrope = _as_family_reads(text, family, sectioned)
    count, layer_types = model_layers.count_and_types(text, family)
    if rope_off(text, family):
        if count is None:
            raise InconsistentError("num_hidden_layers", "is required: no layer has a rope")
        nope, ropes = tuple(range(count)), tuple[LayerRope, ...]()
    else:
        family = _with_null_ropes(text, family)
        nope = model_layers.nope_layers(text, family, count, layer_types)
        ropes = _ropes(text, family, count, layer_types, nope)
    if mrope is not None:
        mrope_config.check_widths(mrope, [rope.params.d_model for rope in ropes])
    return ModelRope(
        text.get("model_type") if isinstance(text.get("model_type"), str) else None,
        path,
        count,
        head_dim(text, family),
        integer(text, "max_position_embeddings", ""),
        ropes,
        nope,
    )


def _as_family_reads(
    text: Mapping[str, Any], family: Family, sectioned: bool
) -> tuple[dict[str, Any], mrope_config.MRope | None]:
    """``text`` as the family's config class reads it: its keys under their own names, those
    it never reads gone, its multimodal sections read (where a text model's config is read
    alone) and set aside, a text token's ids being equal; a flag it cannot answer refused."""
    for key, why in family.refused_flags:
        if text.get(key):
            raise ParameterError(key, why)
    read = {
        **{ours: text[theirs] for ours, theirs in family.aliases if theirs in text},
        **{
            key: value
            for key, value in text.items()
            if key not in family.ignored and (family.reads is None or key in family.reads)
        },
        **{ours: text[theirs] for ours, theirs in family.overrides if theirs in text},
    }
    for key in family.required:  # under the family's own names too (its aliases)
        if read.get(key) is None:
            raise ParameterError(
                key,
                f"is required: {text.get('model_type')}'s model reads it as the config gives "
                "it (its config class's default, null, leaves the model unable to run)",
            )
    if family.layer_count_key is not None and text.get(family.layer_count_key) is not None:
        read["num_hidden_layers"] = text[family.layer_count_key]
    mrope = None
    if family.mrope is not None and not sectioned:
        # The text model of an M-RoPE family, read alone: its rotary module still splits
        # the frequencies by the sections its config gives (or its family's default).
        mrope = mrope_config.read(
            {**read, "model_type": family.mrope}, where="", ids=False, alone=True
        )
        read = mrope_config.text_rope_of(read)
    if family.xdrope:
        read = xdrope.text_rope_of(read)
    if family.rope_labels:
        read = labelled.text_rope_of(read, family)
    return read, mrope


def _with_null_ropes(text: Mapping[str, Any], family: Family) -> Family:
    """The family, for a config whose ropes per layer type give some types none (a null, as
    Beam's full-attention layers): those types are then its NoPE types."""
    if not family.null_ropes:
        return family
    _, rope = rope_dict(text)
    if not any(isinstance(own, Mapping) for own in rope.values()):
        return family  # the flat form, refused by _ropes
    null = frozenset(kind for kind, own in rope.items() if own is None)
    return replace(family, nope_types=family.nope_types | null)


def _ropes(
    text: Mapping[str, Any],
    family: Family,
    count: int | None,
    types: tuple[str, ...] | None,
    nope: tuple[int, ...],
) -> tuple[LayerRope, ...]:
    where, rope = rope_dict(text)
    legacy = family.legacy_layers
    if legacy is not None and not any(isinstance(value, Mapping) for value in rope.values()):
        rope = _legacy_ropes(text, legacy, rope, family)
    elif text.get("rope_local_base_freq") is not None:
        raise ParameterError("rope_local_base_freq", "is not read for this family: " + PER_LAYER)
    elif (_builds_per_layer_type(text) or family.null_ropes) and not any(
        isinstance(v, Mapping) for v in rope.values()
    ):
        # Its config class turns this older form into ropes per layer type by keys of its own.
        raise ParameterError(
            where, "this family's rope is read in transformers 5's form: one per layer type"
        )
    skipped = set(nope)
    heads = layer_heads(text, family, model_layers.MAX_LAYERS if count is None else count, types)
    if not any(isinstance(value, Mapping) for value in rope.values()):
        if any(i not in skipped for i in heads):
            raise ParameterError(
                "per_layer_config", "gives some layers heads of their own under one rope"
            )
        params, partial = rope_params(text, where, rope, family)
        layers = None if count is None else tuple(i for i in range(count) if i not in skipped)
        if layers == ():
            return ()  # built, and applied by no layer (Bamba's default: Mamba layers only)
        turning = set(types or ()) - model_layers.attention_free(family) - family.nope_types
        scaling = _query_scaling(rope, where)
        return (
            LayerRope(
                tuple(sorted(turning)),
                layers,
                params,
                partial,
                apply_of(text, family),
                scaling,
                _offset(text, family, params),
            ),
        )
    if types is None:
        raise InconsistentError("layer_types", f"is required with a {where} per layer type")
    # One rope per layer type; types whose ropes are equal are one rope.
    by_rope: dict[tuple[RopeParams, float, Any, int], list[str]] = {}
    for kind in sorted(set(types) - model_layers.attention_free(family) - family.nope_types):
        own = rope.get(kind)
        if not isinstance(own, Mapping):
            raise ParameterError(f"{where}.{kind}", "is required: a rope for each layer type")
        widths = {heads.get(i) for i, t in enumerate(types) if t == kind}
        if len(widths) > 1:
            raise ParameterError(
                "per_layer_config", f"gives the {kind} layers heads of different widths"
            )
        (width,) = widths
        typed = text if width is None else {**text, family.head_key: width}
        params, partial = rope_params(typed, f"{where}.{kind}", own, family)
        scaling = _query_scaling(own, f"{where}.{kind}")
        scaled = None if scaling is None else tuple(sorted(scaling.items()))
        key = (params, partial, scaled, _offset(typed, family, params))
        by_rope.setdefault(key, []).append(kind)
    apply = apply_of(text, family)
    ropes = (
        LayerRope(
            tuple(kinds),
            tuple(i for i, t in enumerate(types) if t in kinds and i not in skipped),
            params,
            partial,
            apply,
            None if scaling is None else dict(scaling),
            offset,
        )
        for (params, partial, scaling, offset), kinds in by_rope.items()
    )
    return tuple(rope for rope in ropes if rope.layers)


def _offset(text: Mapping[str, Any], family: Family, params: RopeParams) -> int:
    """The first dimension of the head that turns: 0, or where the family's rope turns the
    head's trailing dimensions."""
    if not family.rope_at_end:
        return 0
    turned = params.d_model if params.rotary_pairs is None else 2 * params.rotary_pairs
    return head_dim(text, family) - turned


def _builds_per_layer_type(text: Mapping[str, Any]) -> bool:
    return bool(class_defaults(text).get("per_layer_type"))


def _legacy_ropes(
    text: Mapping[str, Any], legacy: LegacyLayers, rope: Mapping[str, Any], family: Family
) -> dict[str, Mapping[str, Any]]:
    """A family's pre-v5 per-layer form as transformers converts it: the full layers take the
    rope dict (and ``rope_theta``), the local ones the default rope of their own base."""
    full = dict(rope)
    full.setdefault("rope_theta", number(text, "rope_theta", "") or family.default_base)
    local = number(text, legacy.local_base_key, "") or legacy.default_local_base
    return {legacy.full: full, legacy.local: {"rope_type": "default", "rope_theta": local}}


def _query_scaling(rope: Mapping[str, Any], where: str) -> Mapping[str, float] | None:
    beta = number(rope, "llama_4_scaling_beta", where)
    if beta is None:
        return None
    original = integer(rope, "original_max_position_embeddings", where)
    if original is None:
        raise InconsistentError(
            f"{where}.original_max_position_embeddings",
            "is required with llama_4_scaling_beta: it scales q by 1 + β·ln(1 + ⌊p / it⌋)",
        )
    return {"llama_4_scaling_beta": beta, "original_max_position_embeddings": float(original)}

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

import dataclasses
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from posenc.cost import Cost
from posenc.declare import Limits, spec
from posenc.errors import InconsistentError, ParameterError
from posenc.numerics import costs
from posenc.schemes.rope import maths
from posenc.schemes.rope.params import Layout, RopeParams, Scaling
from posenc.schemes.rope.verify import verify_rope_cost

# transformers' rope_type → our scaling.
_SCALINGS: dict[str, Scaling] = {
    "default": "none",
    "linear": "linear",
    "dynamic": "dynamic",
    "yarn": "yarn",
    "llama3": "llama3",
    "longrope": "longrope",
    "su": "longrope",  # Phi-3's name for longrope before transformers renamed it
}
_NUMBERS = (
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
        *_NUMBERS,
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
    if not isinstance(rope_type, str) or rope_type not in _SCALINGS:
        known = ", ".join(sorted(_SCALINGS))
        key = "rope_type" if "rope_type" in rope else "type"
        raise ParameterError(f"{where}.{key}", f"must be one of {known}, got {rope_type!r}")
    scaling = _SCALINGS[rope_type]
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

    values: dict[str, Any] = {name: _number(rope, name, where) for name in _NUMBERS}
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


def query(params: RopeParams) -> str:
    """The canonical query string of ``params``: every parameter that differs from its default.

    >>> query(RopeParams(d_model=128, base=500000.0))
    'd_model=128&base=500000'
    """
    defaults = RopeParams(d_model=params.d_model)
    parts = [f"d_model={params.d_model}"]
    for name in (
        "base",
        "layout",
        "scaling",
        "factor",
        "original_max_position_embeddings",
        "low_freq_factor",
        "high_freq_factor",
        "beta_fast",
        "beta_slow",
        "attention_factor",
        "mscale",
        "mscale_all_dim",
        "truncate",
        "short_factor",
        "long_factor",
        "recipe",
    ):
        value = getattr(params, name)
        if value is None or value == getattr(defaults, name):
            continue
        if isinstance(value, tuple):
            text = ",".join(_number_text(v) for v in value)
        elif isinstance(value, bool):
            text = str(value).lower()
        elif isinstance(value, float):
            text = _number_text(value)
        else:
            text = str(value)
        parts.append(f"{name}={text}")
    return "&".join(parts)


def _number_text(value: float) -> str:
    """The shortest text that reads back as the same float: ``500000``, ``0.25``, ``1e-05``."""
    return str(int(value)) if value.is_integer() and abs(value) < 1e16 else repr(value)


def servable_rows(limits: Limits) -> Any:
    """The most rows, up to ``wanted``, of a cos/sin table served as ``.npy`` (or of its
    verify) that ``limits`` admit, 0 when not even one row is: the estimate
    ``app/serving.py`` and ``app/handlers.py`` make of those requests, with its values, work
    and bytes held to the limits as ``app/admission.decide`` holds them."""

    def fits(params: RopeParams, n: int, verify: bool) -> bool:
        values = 2 * n * params.d_model
        # The exact table and the framework's: the links offer both.
        framework = dataclasses.replace(params, recipe="framework")
        cost = costs.larger(
            maths.cost(params, n, "float32", "cos_sin"),
            maths.cost(framework, n, "float32", "cos_sin"),
        )
        # verify adds its checks; a table its serialisation (a header, then a view).
        cost = cost + (verify_rope_cost(params, n) if verify else Cost(2**16, values))
        return (
            values <= limits.max_values
            and cost.work <= limits.max_work
            and cost.bytes <= limits.max_bytes
        )

    def servable(params: RopeParams, wanted: int, verify: bool) -> int:
        if not fits(params, 1, verify):
            return 0
        low, high = 1, wanted  # costs grow with the rows: the largest that fits, by bisection
        while low < high:
            middle = (low + high + 1) // 2
            low, high = (middle, high) if fits(params, middle, verify) else (low, middle - 1)
        return low

    return servable


def describe(
    config: Mapping[str, Any], servable: Callable[[RopeParams, int, bool], int]
) -> dict[str, Any]:
    """What ``POST /v1/rope/config`` answers: the model's rope parameters, its rotary
    dimension, and the cacheable GETs of its table (as ``.npy``) and verify, exact and as the
    framework computes it, for ``max_position_embeddings`` positions (else 4096) — or for
    fewer where the service would refuse that many: ``servable(params, n, verify)`` is the
    most rows up to ``n`` it serves (Llama 3.1's 131072 × 128 cos/sin are 2^25 values, over
    the default limit of 2^24; verifying them all is more work than one request may do), and a
    URL the service would refuse even for one row is left out."""
    if not isinstance(config, Mapping):
        raise ParameterError("body", f"must be a JSON object, got {type(config).__name__}")
    found = from_config(config)
    params = found.params
    canonical = {k: v for k, v in dataclasses.asdict(params).items() if v is not None}
    wanted = found.max_position_embeddings or 4096
    table_rows, verify_rows = servable(params, wanted, False), servable(params, wanted, True)
    rows, checked = f"seq_len={table_rows}", f"seq_len={verify_rows}"
    given = query(params)
    return {
        "scheme": "rope",
        "params": canonical,
        "head_dim": found.head_dim,
        "rotary_dim": params.d_model,
        "partial_rotary_factor": found.partial_rotary_factor,
        "max_position_embeddings": found.max_position_embeddings,
        "seq_len": {"table": table_rows, "verify": verify_rows},
        "urls": {
            **(
                {
                    "table": f"/v1/rope/table?{given}&{rows}&format=npy",
                    "table_framework": (
                        f"/v1/rope/table?{given}&recipe=framework&{rows}&format=npy"
                    ),
                    "alias_table": f"/v1/table?scheme=rope&{given}&{rows}&format=npy",
                    "alias_table_framework": (
                        f"/v1/table?scheme=rope&{given}&recipe=framework&{rows}&format=npy"
                    ),
                }
                if table_rows
                else {}
            ),
            **(
                {
                    "verify": f"/v1/rope/verify?{given}&{checked}",
                    "alias_verify": f"/v1/verify?scheme=rope&{given}&{checked}",
                }
                if verify_rows
                else {}
            ),
        },
    }


_NUMBER = {"type": "number"}


def _ranged(name: str) -> dict[str, Any]:
    """A scaling number as RopeParams declares its range: one source, so that a config the
    schema admits is never refused for a range the schema did not state."""
    limits = spec(next(f for f in dataclasses.fields(RopeParams) if f.name == name))
    schema: dict[str, Any] = {"type": "number"}
    for key, bound in (
        ("minimum", limits.ge),
        ("exclusiveMinimum", limits.gt),
        ("maximum", limits.le),
        ("exclusiveMaximum", limits.lt),
    ):
        if bound is not None:
            schema[key] = bound
    return schema


_ROPE: dict[str, Any] = {
    "type": ["object", "null"],
    "additionalProperties": False,
    "properties": {
        "rope_type": {"type": "string", "enum": sorted(_SCALINGS)},
        "type": {"type": "string", "enum": sorted(_SCALINGS)},
        "rope_theta": {"type": "number", "exclusiveMinimum": 1, "maximum": 1e12},
        "partial_rotary_factor": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
        "original_max_position_embeddings": {
            "type": "integer",
            "minimum": 1,
            "maximum": 2**31 - 1,
        },
        "truncate": {"type": "boolean"},
        "short_factor": {"type": "array", "items": _ranged("short_factor")},
        "long_factor": {"type": "array", "items": _ranged("long_factor")},
        **{name: _ranged(name) for name in _NUMBERS},
    },
}
# What the document says of a config.json: the fields read, and a real one as the example.
BODY_SCHEMA: dict[str, Any] = {
    "description": "a model's config.json (transformers); fields not listed here are ignored",
    "properties": {
        "head_dim": {"type": ["integer", "null"], "minimum": 2, "maximum": 65536},
        "hidden_size": {"type": ["integer", "null"], "minimum": 2, "maximum": 2**31 - 1},
        "num_attention_heads": {"type": ["integer", "null"], "minimum": 1, "maximum": 65536},
        "rope_theta": {"type": ["number", "null"], "exclusiveMinimum": 1, "maximum": 1e12},
        "rope_scaling": _ROPE,
        "rope_parameters": _ROPE,
        "partial_rotary_factor": {"type": ["number", "null"], "exclusiveMinimum": 0, "maximum": 1},
        "max_position_embeddings": {
            "type": ["integer", "null"],
            "minimum": 1,
            "maximum": 2**31 - 1,
        },
    },
    "examples": [
        {
            "model_type": "llama",
            "hidden_size": 4096,
            "num_attention_heads": 32,
            "max_position_embeddings": 4096,
            "rope_theta": 10000.0,
            "rope_scaling": None,
        }
    ],
}
ANSWER_SCHEMA: dict[str, Any] = {
    "required": ["scheme", "params", "rotary_dim", "seq_len", "urls"],
    "properties": {
        "scheme": {"type": "string"},
        "params": {"type": "object"},
        "head_dim": {"type": "integer"},
        "rotary_dim": {"type": "integer"},
        "partial_rotary_factor": _NUMBER,
        "max_position_embeddings": {"type": ["integer", "null"]},
        "seq_len": {
            "type": "object",
            "description": "the positions the table and verify URLs ask for: "
            "max_position_embeddings (else 4096), or fewer where the service's limits "
            "(POSENC_MAX_ELEMENTS, POSENC_MAX_WORK, POSENC_MEMORY_BYTES) would refuse that many; "
            "0 when they refuse even one row, and that URL is left out",
            "required": ["table", "verify"],
            "properties": {"table": {"type": "integer"}, "verify": {"type": "integer"}},
        },
        "urls": {"type": "object", "additionalProperties": {"type": "string"}},
    },
}

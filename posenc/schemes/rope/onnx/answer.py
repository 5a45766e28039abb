"""What ``POST /v1/rope/onnx`` answers for a model: each cos/sin pair the graph reads (one per
alternative an ``If`` or an offset chooses), the nodes and layers that read it, and what its
sampled rows are (:mod:`.fit`), in the shape of ``/v1/rope/gguf``'s answer."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import numpy.typing as npt

from posenc.schemes.rope.onnx import fit, genai, graph, rows, rules
from posenc.schemes.rope.onnx.fit import Measured
from posenc.schemes.rope.onnx.graph import MAX_ROPES, Cache, Choice, Use
from posenc.schemes.rope.onnx.reader import Model
from posenc.schemes.rope.onnx.wire import GraphTooLargeError, ONNXError
from posenc.schemes.rope.params import RopeParams

# Pairs of one cache at most (a head of 8192 dimensions; the widest model's turns 256 pairs),
# and values measured in one request (rows sampled × pairs, over every rope).
MAX_PAIRS = 4096
MAX_ROPE_VALUES = 48 * MAX_PAIRS
MAX_VALUES = 1 << 19
# The model's rope for a rope's layers at a sequence length, where a config is given.
Hint = Callable[[list[int], int], RopeParams | None]


@dataclass
class Rope:
    """One cos/sin pair as the nodes that read it use it, and what its rows are."""

    uses: list[Use]
    interleaved: bool
    rotary_dim: int
    served: tuple[int, int | None] | None  # sequence lengths it serves; None: not known
    positions: npt.NDArray[np.int64]
    measured: Measured | None = None
    params: RopeParams | None = None
    listed: dict[str, Any] | None = None

    @property
    def cos(self) -> Cache:
        return self.uses[0].cos

    @cached_property
    def layers(self) -> list[int]:
        return sorted({use.layer for use in self.uses if use.layer is not None})

    @property
    def length(self) -> int:
        first, end = self.cos.rows
        return end - first

    @property
    def dtype(self) -> str:
        return rules.FLOAT_TYPES.get(self.cos.tensor.data_type, "unknown")

    @property
    def seq_len(self) -> int:
        """The shortest sequence it serves: what picks a length-dependent rope's side."""
        return self.served[0] if self.served is not None else 1


def ropes(model: Model, stated: genai.Stated) -> tuple[list[Rope], list[Any]]:
    """The graph's ropes (rows not yet read) and its attention nodes."""
    found, attention = graph.uses(model, stated.concat_offset)
    grouped: dict[tuple[Any, ...], list[Use]] = {}
    for use in found:
        attributes = use.node.ints
        interleaved = attributes.get(use.op.interleaved, 0) == 1
        width = use.op.rotary_dim and attributes.get(use.op.rotary_dim, 0)
        key = (use.cos, use.sin, use.op.name, interleaved, width or 0, use.choices)
        grouped.setdefault(key, []).append(use)
    made = []
    for (cos, sin, _, interleaved, width, choices), uses in grouped.items():
        if cos.tensor.dims != sin.tensor.dims or cos.tensor.data_type != sin.tensor.data_type:
            raise ONNXError(
                f"the caches {cos.tensor.name!r} and {sin.tensor.name!r} differ in shape or type"
            )
        if cos.tensor.data_type not in rules.FLOAT_TYPES:
            raise ONNXError(
                f"the rope cache {cos.tensor.name!r} has data type "
                f"{cos.tensor.data_type}: not a float type (float32, float16, "
                "bfloat16, float64)"
            )
        pairs = cos.tensor.dims[1]
        if cos.rows[1] - cos.rows[0] < 2 or pairs > MAX_PAIRS:
            raise ONNXError(
                f"the rope cache {cos.tensor.name!r} has shape "
                f"{list(cos.tensor.dims)}: 2 rows or more of at most {MAX_PAIRS} "
                "pairs are read"
            )
        made.append(
            Rope(
                uses,
                interleaved,
                width or 2 * pairs,
                _served(choices),
                rows.positions(cos.rows[1] - cos.rows[0]),
            )
        )
    _bounded(made)
    return made, attention


def _bounded(found: list[Rope]) -> None:
    if len(found) > MAX_ROPES:
        raise GraphTooLargeError(
            f"the graph reads {len(found)} distinct rope caches: more than {MAX_ROPES}"
        )
    values = sum(len(rope.positions) * rope.cos.tensor.dims[1] for rope in found)
    if values > MAX_VALUES:
        raise GraphTooLargeError(
            f"its caches' sampled rows hold {values} values: more than "
            f"{MAX_VALUES} are measured in one request"
        )


def _served(choices: tuple[Choice, ...]) -> tuple[int, int | None] | None:
    low, high = 1, None
    for choice in choices:
        if choice.above is None:
            return None
        if choice.holds:
            low = max(low, choice.above + 1)
        else:
            high = choice.above if high is None else min(high, choice.above)
    return low, high


def needed(found: list[Rope]) -> list[rows.Needed]:
    wanted: dict[tuple[str, int], rows.Needed] = {}
    for rope in found:
        for cache in (rope.uses[0].cos, rope.uses[0].sin):
            for need in rows.needed(cache, rope.positions):
                wanted[(need.location, need.offset)] = need
    return list(wanted.values())


def measure(model: Model, found: list[Rope], parts: rows.Parts, hint: Hint | None) -> None:
    """Read each rope's sampled rows, fit them and list what they are (every external range is
    in ``parts``); the rows themselves are dropped once listed."""
    for rope in found:
        stored = (
            rows.read(model, rope.uses[0].cos, rope.positions, parts),
            rows.read(model, rope.uses[0].sin, rope.positions, parts),
        )
        rope.measured = fit.measure(*stored, rope.positions, rope.dtype)
        expected = None if hint is None else hint(rope.layers, rope.seq_len)
        rope.params = fit.fit(rope.measured, expected, rope.seq_len, rope.interleaved)
        rope.listed = _listed(rope, stored)


def _listed(
    rope: Rope, stored: tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]
) -> dict[str, Any]:
    """A rope as the answer lists it."""
    measured = rope.measured
    assert measured is not None
    attention = measured.attention_factor
    params = rope.params
    difference = recipe = None
    if params is not None:
        own = fit.exact(params, rope.seq_len)[1]
        if fit.factor_agrees(attention, own, rope.dtype):
            attention = own
        exact = fit.exact_rows(params, rope.seq_len, rope.positions, attention)
        worst = max(float(np.abs(a - b).max()) for a, b in zip(exact, stored, strict=True))
        difference = {
            "positions": [int(rope.positions[0]), int(rope.positions[-1])],
            "exact": worst,
        }
        recipe = fit.recipe_of(params, rope.seq_len, rope.positions, attention, stored, rope.dtype)
    use = rope.uses[0]
    return {
        "layers": rope.layers,
        "nodes": sorted({u.node.name for u in rope.uses}),
        "op": use.op.name,
        "interleaved": rope.interleaved,
        "rotary_dim": rope.rotary_dim,
        "cache_length": rope.length,
        "dtype": rope.dtype,
        "caches": {"cos": _cache(use.cos), "sin": _cache(use.sin)},
        "selected_by": [_choice(choice) for choice in use.choices],
        "sequence_lengths": None if rope.served is None else list(rope.served),
        "positions": rope.positions.tolist(),
        "params": None if params is None else canonical(params),
        "attention_factor": attention,
        "recipe": recipe,
        "max_abs_difference": difference,
    }


def canonical(params: RopeParams) -> dict[str, Any]:
    """The GET parameters of ``params``: ``d_model``, ``base``, ``layout`` and ``scaling``
    always, then each other that is set (not None), lists as lists; ``recipe`` never (the
    answer's own ``recipe`` says which float32 recipe the rows are).

    >>> canonical(RopeParams(d_model=8, rotary_pairs=2))
    {'d_model': 8, 'base': 10000.0, 'layout': 'split', 'scaling': 'none', 'rotary_pairs': 2}
    """
    given: dict[str, Any] = {
        "d_model": params.d_model,
        "base": params.base,
        "layout": params.layout,
        "scaling": params.scaling,
    }
    for name in RopeParams.__dataclass_fields__:
        value = getattr(params, name)
        if name not in given and value is not None and name != "recipe":
            given[name] = list(value) if isinstance(value, tuple) else value
    return given


def _cache(cache: Cache) -> dict[str, Any]:
    external = cache.tensor.external
    return {
        "tensor": cache.tensor.name,
        "source": cache.source,
        "rows": list(cache.rows),
        "location": None if external is None else external.location,
        "through": list(cache.through),
    }


def _choice(choice: Choice) -> dict[str, Any]:
    return {"by": choice.by, "node": choice.node, "test": choice.test, "holds": choice.holds}


def answer_of(
    model: Model, stated: genai.Stated, found: list[Rope], attention: list[Any]
) -> dict[str, Any]:
    """The answer for the measured ropes."""
    layers = _all_layers(found, attention)
    turning = {layer for rope in found for layer in rope.layers}
    return {
        "producer": {"name": model.producer_name, "version": model.producer_version},
        "opsets": dict(model.opsets),
        "num_hidden_layers": layer_count(stated, found, attention),
        "head_size": stated.head_size,
        "context_length": stated.context_length,
        "ropes": [rope.listed for rope in found],
        "nope_layers": [layer for layer in layers if layer not in turning],
    }


def _all_layers(found: list[Rope], attention: list[Any]) -> list[int]:
    named = (graph.layer_of(node.name) for node in attention)
    attending = [layer for layer in named if layer is not None]
    return sorted({*(layer for rope in found for layer in rope.layers), *attending})


def layer_count(stated: genai.Stated, found: list[Rope], attention: list[Any]) -> int | None:
    """genai_config.json's count of layers, else one past the last layer a node names."""
    if stated.num_hidden_layers is not None:
        return stated.num_hidden_layers
    layers = _all_layers(found, attention)
    return layers[-1] + 1 if layers else None

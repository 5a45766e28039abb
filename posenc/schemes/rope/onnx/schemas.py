"""The parts of ``POST /v1/rope/onnx``'s body and the JSON Schema of its answer, for the OpenAPI
document."""

from __future__ import annotations

import typing
from typing import Any

from posenc.declare import FileParam
from posenc.schemes.rope.models import schemas as config_schemas
from posenc.schemes.rope.params import Scaling
from posenc.schemes.rope.schemas import params_schema

FILES = (
    FileParam("model", "the .onnx file: its graph is read, never its weights", True),
    FileParam(
        "external",
        "a byte range of an external data file the graph refers to, as a 422 of type "
        "urn:posenc:problem:external-data-needed names it: the part's filename is "
        "<location>@<offset>",
        repeats=True,
    ),
)


# What answer.canonical gives: the parameters that are set, recipe left to the answer's own.
PARAMS_SCHEMA = params_schema(left_out=("recipe",))
_INTEGERS: dict[str, Any] = {"type": "array", "items": {"type": "integer"}}
_STRINGS: dict[str, Any] = {"type": "array", "items": {"type": "string"}}
_CACHE: dict[str, Any] = {
    "type": "object",
    "required": ["tensor", "source", "rows", "location", "through"],
    "additionalProperties": False,
    "properties": {
        "tensor": {"type": "string", "description": "the initializer's or Constant's name"},
        "source": {"type": "string", "enum": ["initializer", "constant"]},
        "rows": {**_INTEGERS, "description": "[first, end): the rows this rope reads"},
        "location": {
            "type": ["string", "null"],
            "description": "the external data file that holds it (null: in the graph)",
        },
        "through": {**_STRINGS, "description": "the Cast and Identity nodes between"},
    },
}
_CHOICE: dict[str, Any] = {
    "type": "object",
    "required": ["by", "node", "test", "holds"],
    "additionalProperties": False,
    "properties": {
        "by": {
            "type": "string",
            "enum": ["If", "position_offset", "genai_config"],
            "description": "an If's branch; DirectML's position ids offset by the short "
            "cache's length; or the offset genai_config.json gives the runtime",
        },
        "node": {"type": "string", "description": "the node, or the genai_config key"},
        "test": {"type": "string", "description": "the condition, as the graph computes it"},
        "holds": {"type": "boolean", "description": "this rope is read when the test holds"},
    },
}
_ROPE: dict[str, Any] = {
    "type": "object",
    "required": [
        "layers",
        "nodes",
        "op",
        "interleaved",
        "rotary_dim",
        "cache_length",
        "dtype",
        "caches",
        "selected_by",
        "sequence_lengths",
        "positions",
        "params",
        "attention_factor",
        "recipe",
        "max_abs_difference",
    ],
    "additionalProperties": False,
    "properties": {
        "layers": {**_INTEGERS, "description": "the layers whose nodes read it"},
        "nodes": _STRINGS,
        "op": {"type": "string", "description": "domain.op_type of the nodes"},
        "interleaved": {
            "type": "boolean",
            "description": "the nodes turn pairs (2i, 2i+1) (rotary_interleaved or "
            "interleaved = 1), else (i, i + d/2)",
        },
        "rotary_dim": {"type": "integer", "description": "the dimensions that turn"},
        "cache_length": {"type": "integer", "description": "the positions the cache holds"},
        "dtype": {"type": "string", "enum": ["float32", "float16", "bfloat16", "float64"]},
        "caches": {
            "type": "object",
            "required": ["cos", "sin"],
            "additionalProperties": False,
            "properties": {"cos": _CACHE, "sin": _CACHE},
        },
        "selected_by": {
            "type": "array",
            "items": _CHOICE,
            "description": "what picks this pair among others (outermost first); empty: read "
            "at every length",
        },
        "sequence_lengths": {
            "type": ["array", "null"],
            "items": {"type": ["integer", "null"]},
            "description": "[shortest, longest] sequence it is read for (longest null: any); "
            "null where a test is not one of the sequence length",
        },
        "positions": {**_INTEGERS, "description": "the rows sampled and measured"},
        "params": {
            "anyOf": [{"type": "null"}, PARAMS_SCHEMA],
            "description": "the canonical GET parameters of /v1/rope/table whose frequencies "
            "the rows hold (the model's own where a config is given and they agree), its layout "
            "the nodes' pairs; null where the rows are not one rope's cos and sin",
        },
        "attention_factor": {
            "type": "number",
            "description": "the factor of cos and sin, measured (the rope's own where it agrees)",
        },
        "recipe": {
            "type": ["string", "null"],
            "enum": ["framework", "onnxruntime-genai", None],
            "description": "the float32 recipe the rows equal within one ulp of their type: "
            "transformers' (framework) or the GenAI builder's own; null: neither",
        },
        "max_abs_difference": {
            "type": ["object", "null"],
            "required": ["positions", "exact"],
            "additionalProperties": False,
            "properties": {"positions": _INTEGERS, "exact": {"type": "number"}},
            "description": "the largest |cos − cos′| and |sin − sin′| of the sampled rows "
            "against the exact table of params (times attention_factor), positions first to "
            "last: recipe noise and the type's rounding",
        },
    },
}


def _evidence(**members: dict[str, Any]) -> dict[str, Any]:
    """An object of exactly these members, each present."""
    return {
        "type": "object",
        "required": list(members),
        "additionalProperties": False,
        "properties": members,
    }


def _finding(kinds: list[str], evidence: dict[str, Any]) -> dict[str, Any]:
    return _evidence(
        kind={"type": "string", "enum": kinds},
        detail={"type": "string"},
        layers={**_INTEGERS, "description": "the layers it shows at"},
        evidence=evidence,
    )


_NUMBER: dict[str, Any] = {"type": "number"}
_SCALING: dict[str, Any] = {"type": "string", "enum": list(typing.get_args(Scaling))}
_SIDE = _evidence(base=_NUMBER, scaling=_SCALING, factor={"type": ["number", "null"]})
# Frequencies that differ: the model's rope and the one the rows fit (null: none), and the
# pair that differs most, each side's frequency of it (radians per position).
_FREQUENCIES: dict[str, dict[str, Any]] = {
    "model": {**_SIDE, "description": "the model's rope"},
    "file": {"anyOf": [{"type": "null"}, _SIDE], "description": "the rope the rows fit"},
    "pair": {"type": "integer", "description": "the pair that differs most"},
    "model_frequency": _NUMBER,
    "file_frequency": _NUMBER,
}
_TWO: dict[str, Any] = {"type": "array", "items": {"type": ["integer", "null"]}}
_FINDING: dict[str, Any] = {
    "anyOf": [
        _finding(
            ["nope_layers"],
            _evidence(model_rotates={"type": "boolean"}, file_rotates={"type": "boolean"}),
        ),
        _finding(
            ["interleaved"],
            _evidence(
                model_layout={"type": "string", "enum": ["interleaved", "split"]},
                interleaved={"type": "boolean", "description": "the file's nodes' pairs"},
                op={"type": "string"},
            ),
        ),
        _finding(
            ["rotary_width"],
            _evidence(model={"type": "integer"}, file={"type": "integer"}),
        ),
        _finding(["not_a_rotation"], _evidence(attention_factor=_NUMBER)),
        _finding(["attention_factor"], _evidence(model=_NUMBER, file=_NUMBER)),
        _finding(
            ["cache_too_short"],
            _evidence(cache_length={"type": "integer"}, serves={"type": "integer"}),
        ),
        _finding(
            ["longrope_switch"],
            {
                "anyOf": [
                    _evidence(tests={"type": "array", "items": {"type": "string"}}),
                    _evidence(
                        sequence_lengths={**_TWO, "description": "[shortest, longest] served"},
                        original_max_position_embeddings={"type": "integer"},
                    ),
                    _evidence(**_FREQUENCIES),
                ],
            },
        ),
        _finding(
            ["frequencies_inverted", "scaling_dropped", "base"],
            _evidence(**_FREQUENCIES),
        ),
        _finding(
            ["sliding_layer"],
            _evidence(
                **_FREQUENCIES,
                fits={
                    **_evidence(base=_NUMBER, scaling=_SCALING),
                    "description": "the model's rope of other layers, which the rows hold",
                },
            ),
        ),
        _finding(
            ["scaling_changed"],
            _evidence(
                **_FREQUENCIES,
                pairs={**_INTEGERS, "description": "the pairs that turn at other frequencies"},
            ),
        ),
    ],
    "description": "one way the file's rope differs from the model's: its kind, the layers it "
    "shows at and its evidence, both sides' values (the members each kind gives)",
}
ANSWER_SCHEMA: dict[str, Any] = {
    "required": [
        "producer",
        "opsets",
        "num_hidden_layers",
        "head_size",
        "context_length",
        "ropes",
        "nope_layers",
    ],
    "additionalProperties": False,
    "properties": {
        "producer": {
            "type": "object",
            "required": ["name", "version"],
            "additionalProperties": False,
            "properties": {"name": {"type": "string"}, "version": {"type": "string"}},
            "description": "the model's producer_name and producer_version",
        },
        "opsets": {
            "type": "object",
            "additionalProperties": {"type": "integer"},
            "description": "opset_import: each domain's version ('' is ai.onnx)",
        },
        "num_hidden_layers": {
            "type": ["integer", "null"],
            "description": "genai_config.json's, else one past the last layer a node names",
        },
        "head_size": {"type": ["integer", "null"], "description": "genai_config.json's"},
        "context_length": {
            "type": ["integer", "null"],
            "description": "genai_config.json's model.context_length: what the runtime serves",
        },
        "ropes": {
            "type": "array",
            "items": _ROPE,
            "description": "every cos/sin pair a node reads, one per alternative an If or "
            "an offset picks",
        },
        "nope_layers": {**_INTEGERS, "description": "layers with attention and no rope"},
        "model": {
            "type": "object",
            **config_schemas.ANSWER_SCHEMA,
            "description": "with a config part: what POST /v1/rope/config answers for it",
        },
        "conforms": {
            "type": "boolean",
            "description": "with a config part: every cache is the model's rope for the "
            "layers and sequence lengths that read it (frequencies, attention factor, pairs, "
            "width, length)",
        },
        "findings": {
            "type": "array",
            "items": _FINDING,
            "description": "with a config part: each way a cache differs from the model's "
            "rope, with its layers and both sides' values",
        },
    },
}

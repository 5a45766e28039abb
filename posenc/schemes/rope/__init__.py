"""``rope``: the rotary embedding of RoFormer with the long-context scalings of transformers,
and the rope a model's ``config.json`` names."""

from __future__ import annotations

from typing import Any

import numpy.typing as npt

from posenc import adapters
from posenc.conformance import Conformance
from posenc.cost import Cost
from posenc.declare import Extra, Scheme
from posenc.schemes.rope import conformance, maths, verify
from posenc.schemes.rope.applied import loops as applied_loops
from posenc.schemes.rope.applied import operation as applied_operation
from posenc.schemes.rope.applied import schemas as applied_schemas
from posenc.schemes.rope.gguf import operation as gguf_operation
from posenc.schemes.rope.gguf import reader as gguf_reader
from posenc.schemes.rope.gguf import schemas as gguf_schemas
from posenc.schemes.rope.models import answer as config_answer
from posenc.schemes.rope.models import schemas as config_schemas
from posenc.schemes.rope.mrope import answer as mrope_answer
from posenc.schemes.rope.mrope import given as mrope_given
from posenc.schemes.rope.mrope import schemas as mrope_schemas
from posenc.schemes.rope.onnx import operation as onnx_operation
from posenc.schemes.rope.onnx import schemas as onnx_schemas
from posenc.schemes.rope.params import COMPONENTS, RopeParams
from posenc.schemes.rope.recipes import mlx
from posenc.schemes.rope.vision import answer as vision_answer
from posenc.schemes.rope.vision import schemas as vision_schemas


def _conformance(
    params: Any, array: npt.NDArray[Any], component: str, offset: int, tolerance: float
) -> Conformance:
    # Its diagnoses read cos/sin caches and angles; frequencies alone are only compared.
    if component == "inv_freq":
        compared: Conformance = adapters.conformance_of(maths.encode)(
            params, array, component, offset, tolerance
        )
        return compared
    return conformance.check(params, array, component, offset, tolerance)


def _conformance_cost(params: Any, count: int, component: str) -> Cost:
    if component == "inv_freq":
        compared: Cost = adapters.conformance_cost_of(maths.cost)(params, count, component)
        return compared
    return conformance.conformance_cost(params, count, component)


_CONFIG = Extra(
    "config",
    "The rope a model uses, from its config.json: canonical parameters and the URLs of its "
    "table and verify",
    lambda body, limits: config_answer.describe(body, config_answer.servable_rows(limits)),
    config_schemas.BODY_SCHEMA,
    config_schemas.ANSWER_SCHEMA,
)

_POSITIONS = Extra(
    "positions",
    "The (3, n) position ids a multimodal (M-RoPE) model gives a layout of text, images and "
    "videos, as its get_rope_index computes them",
    mrope_answer.positions,
    mrope_schemas.BODY_SCHEMA,
    mrope_schemas.ANSWER_SCHEMA,
    size=mrope_answer.size,
    array=mrope_answer.positions_array,
)

_POSITIONS_VERIFY = Extra(
    "positions/verify",
    "A client's M-RoPE position ids for a layout, held to the model's and diagnosed: text "
    "resuming at max + 1, height and width exchanged, frames on the wrong clock, no spatial "
    "merge, packed sequences not restarting, decode steps without the delta, one row for three",
    mrope_answer.verify,
    mrope_schemas.VERIFY_BODY_SCHEMA,
    mrope_schemas.VERIFY_ANSWER_SCHEMA,
    max_body_bytes=4 * 2**20,
    size=mrope_answer.verify_size,
)

_VISION = Extra(
    "vision",
    "The 2-D rope a vision tower (Qwen2-VL, Qwen2.5-VL, Qwen3-VL, GLM-4V, Pixtral, Llama 4) "
    "applies to a patch grid: cos/sin per patch in the order its attention sees them",
    vision_answer.answer,
    vision_schemas.BODY_SCHEMA,
    vision_schemas.ANSWER_SCHEMA,
    size=vision_answer.size,
)

_GGUF = Extra(
    "gguf",
    "What llama.cpp applies at each layer of a GGUF file, read from the file's first bytes "
    "(its header and rope tensors) under llama.cpp's own rules for its architecture",
    gguf_operation.handle,
    {},
    gguf_schemas.ANSWER_SCHEMA,
    size=gguf_operation.size,
    binary=True,
    query=(gguf_schemas.N_CTX,),
    parts=("config",),
    incomplete="prefix",
)

_APPLIED = Extra(
    "applied",
    "Which rope a kernel applied, read from what went into it and what came out: the pairs, "
    "the dimensions, the angles against the model's rope under each recipe, and what is wrong",
    applied_operation.handle,
    {},
    applied_schemas.ANSWER_SCHEMA,
    size=applied_operation.size,
    binary=True,
    query=applied_schemas.QUERY,
    parts=("config",),
    files=applied_schemas.FILES,
)

_ONNX = Extra(
    "onnx",
    "The rope an ONNX Runtime GenAI model applies, read from its graph and the rows of its "
    "cos/sin caches (asking for the external data ranges that hold them), and whether it is "
    "the model's",
    onnx_operation.handle,
    {},
    onnx_schemas.ANSWER_SCHEMA,
    size=onnx_operation.size,
    binary=True,
    parts=("genai_config", "config"),
    files=onnx_schemas.FILES,
    incomplete="external",
)

declaration = Scheme(
    "rope",
    "RoFormer rotary embedding with the long-context scalings of Hugging Face transformers",
    RopeParams,
    maths.shape,
    maths.encode,
    maths.cost,
    verify.verify_rope,
    verify.verify_rope_cost,
    examples=(
        {"d_model": 8},
        {"d_model": 8, "layout": "interleaved", "base": 500000.0},
        {
            "d_model": 8,
            "scaling": "yarn",
            "factor": 4.0,
            "original_max_position_embeddings": 64,
        },
        {"d_model": 8, "scaling": "llama3", "factor": 8.0},
        {"d_model": 8, "recipe": "framework", "scaling": "linear", "factor": 2.0},
        {"d_model": 8, "base": 1000000.0, "rotary_pairs": 2},
        {
            "d_model": 8,
            "recipe": "ggml",
            "scaling": "yarn",
            "factor": 4.0,
            "original_max_position_embeddings": 64,
        },
        {"d_model": 8, "recipe": "mlx", "scaling": "llama3", "factor": 8.0},
    ),
    table=maths.table,
    vectors=maths.vectors,
    conformance=_conformance,
    conformance_cost=_conformance_cost,
    components=COMPONENTS,
    rotate=maths.rotate,
    extras=(_CONFIG, _POSITIONS, _POSITIONS_VERIFY, _VISION, _GGUF, _APPLIED, _ONNX),
    magnitude=maths.magnitude,
    ids=mrope_given.IDS,
    loops=(mlx.compile_loops, gguf_reader.compile_loops, applied_loops.compile_loops),
)

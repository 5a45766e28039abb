"""Small ONNX graphs made with ``onnx.helper`` in the builder's shapes, for the tests that need
no builder: GroupQueryAttention layers reading one cos/sin pair (inline or as external data),
or LongRoPE's two pairs as Constants in an If's branches."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import onnx
from onnx import TensorProto, helper, numpy_helper

from tests.onnx.files import rope_caches

_INPUTS = ["qkv", "", "", "past_key", "past_value", "seqlens_k", "total_length"]


def attention(layer: int, cos: str = "cos_cache", sin: str = "sin_cache", **attrs: Any) -> Any:
    """A layer's GroupQueryAttention turning q and k by the named caches."""
    settings = {"num_heads": 4, "kv_num_heads": 2, "do_rotary": 1, "rotary_interleaved": 0}
    return helper.make_node(
        "GroupQueryAttention",
        [*_INPUTS, cos, sin],
        [f"/model/layers.{layer}/attn/output_0"],
        name=f"/model/layers.{layer}/attn/GroupQueryAttention",
        domain="com.microsoft",
        **{**settings, **attrs},
    )


def model(
    nodes: list[Any],
    initializers: list[TensorProto],
    inputs: tuple[str, ...] = ("qkv",),
    opset: int = 22,
) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes,
        "tiny",
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, None) for name in inputs],
        [helper.make_tensor_value_info(nodes[-1].output[0], TensorProto.FLOAT, None)],
        initializer=initializers,
    )
    made = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid("com.microsoft", 1)],
        producer_name="tests",
    )
    made.ir_version = 10
    return made


def plain(
    layers: int = 2, length: int = 256, pairs: int = 8, base: float = 10000.0
) -> onnx.ModelProto:
    """Layers reading one pair of float32 caches held in the graph."""
    made = rope_caches(length, pairs, base)
    initializers = [numpy_helper.from_array(values, name) for name, values in made.items()]
    return model([attention(il) for il in range(layers)], initializers)


def longrope(
    length: int = 256, original: int = 64, pairs: int = 8, depth: int = 1
) -> onnx.ModelProto:
    """Two layers reading the pair an If picks by attention_mask's length (Phi-3's subgraph);
    with ``depth`` above 1 the long pair sits ``depth`` Ifs deep, each then-branch holding the
    next If."""
    long, short = rope_caches(length, pairs, 10000.0, 1.2), rope_caches(original, pairs, 1e4)

    def branches(level: int) -> tuple[onnx.GraphProto, onnx.GraphProto]:
        made = []
        for caches, suffix in ((long, "large"), (short, "small")):
            constants = [
                helper.make_node(
                    "Constant",
                    [],
                    [f"{name}_{suffix}_{level}"],
                    value=numpy_helper.from_array(values),
                )
                for name, values in caches.items()
            ]
            if level + 1 < depth and suffix == "large":
                then, other = branches(level + 1)
                inner = [f"{name}_{suffix}_{level}" for name in caches]
                constants = [
                    helper.make_node("If", ["test"], inner, then_branch=then, else_branch=other)
                ]
            outputs = [
                helper.make_tensor_value_info(f"{name}_{suffix}_{level}", TensorProto.FLOAT, None)
                for name in caches
            ]
            made.append(helper.make_graph(constants, f"{suffix}{level}", [], outputs))
        return made[0], made[1]

    then, other = branches(0)
    nodes = [
        helper.make_node("Shape", ["attention_mask"], ["shape"]),
        helper.make_node("Gather", ["shape", "one"], ["length"], axis=0),
        helper.make_node("Greater", ["length", "original"], ["test"]),
        helper.make_node(
            "If",
            ["test"],
            ["cos_cache", "sin_cache"],
            name="/model/If",
            then_branch=then,
            else_branch=other,
        ),
        attention(0),
        attention(1),
    ]
    constants = [
        numpy_helper.from_array(np.array(1, dtype=np.int64), "one"),
        numpy_helper.from_array(np.array(original, dtype=np.int64), "original"),
    ]
    return model(nodes, constants, ("qkv", "attention_mask"))


def saved(made: onnx.ModelProto, folder: Path, external: bool) -> Path:
    """``made`` written in ``folder`` as model.onnx, its tensors in model.onnx.data or not."""
    folder.mkdir(parents=True, exist_ok=True)
    onnx.save_model(
        made,
        str(folder / "model.onnx"),
        save_as_external_data=external,
        all_tensors_to_one_file=True,
        location="model.onnx.data",
        size_threshold=0,
    )
    return folder


def serialised(made: onnx.ModelProto) -> bytes:
    data: bytes = made.SerializeToString()
    return data


def array(values: Any) -> npt.NDArray[np.float32]:
    return np.asarray(values, dtype=np.float32)


# SmolLM2-135M's shape (30 layers, head 64, 8192 positions, base 100000), as the builder writes
# it for the CPU: one cos/sin pair in external data, transformers' float32 table.
SMOLLM2 = {
    "model_type": "llama",
    "hidden_size": 576,
    "num_attention_heads": 9,
    "num_key_value_heads": 3,
    "num_hidden_layers": 30,
    "max_position_embeddings": 8192,
    "rope_theta": 100000,
}


def smollm2_folder(folder: Path) -> Path:
    """The builder's output folder for SmolLM2-135M's shape: model.onnx, model.onnx.data and
    genai_config.json (its weights left out: the check never reads them)."""
    from posenc.schemes.rope.params import RopeParams
    from posenc.schemes.rope.recipes import framework

    params = RopeParams(d_model=64, base=100000.0, recipe="framework")
    cos, sin, _ = framework.prepare(params, 8192)(np.arange(8192, dtype=np.int64))
    caches = [numpy_helper.from_array(cos, "cos_cache"), numpy_helper.from_array(sin, "sin_cache")]
    made = model([attention(il, num_heads=9, kv_num_heads=3) for il in range(30)], caches)
    made.producer_name, made.producer_version = "onnxruntime-genai", "0.18.0"
    saved(made, folder, True)
    genai = {
        "model": {
            "context_length": 8192,
            "type": "llama",
            "decoder": {"filename": "model.onnx", "head_size": 64, "num_hidden_layers": 30},
        }
    }
    (folder / "genai_config.json").write_text(json.dumps(genai, indent=4))
    return folder

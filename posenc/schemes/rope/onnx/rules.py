"""ONNX Runtime's operators that turn q and k by a cos/sin cache, as one table of rows (data,
not branches), and the names and keys the GenAI model builder writes, read from
onnxruntime 1.31's operator schemas (``get_all_operator_schema``) and onnxruntime-genai
0.18's ``models/builders/base.py`` and ``phi.py``."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class RopeOp:
    """An operator that reads a rope cache: the indexes of its ``cos_cache``, ``sin_cache`` and
    ``position_ids`` inputs, the attribute that turns the rope on (None: always on), the one
    that picks interleaved pairs, the one that states the rotary width (0 or absent: twice the
    cache's width), and whether the operator is the layer's attention itself."""

    domain: str
    op_type: str
    since: int
    cos: int
    sin: int
    position_ids: int | None
    enabled_by: str | None
    interleaved: str
    rotary_dim: str | None
    attention: bool

    @property
    def name(self) -> str:
        return f"{self.domain or 'ai.onnx'}.{self.op_type}"


ROPE_OPS: tuple[RopeOp, ...] = (
    RopeOp(
        "com.microsoft",
        "GroupQueryAttention",
        1,
        7,
        8,
        9,
        "do_rotary",
        "rotary_interleaved",
        None,
        True,
    ),
    RopeOp(
        "com.microsoft",
        "PagedAttention",
        1,
        8,
        9,
        None,
        "do_rotary",
        "rotary_interleaved",
        None,
        True,
    ),
    RopeOp(
        "com.microsoft",
        "SparseAttention",
        1,
        9,
        10,
        None,
        "do_rotary",
        "rotary_interleaved",
        None,
        True,
    ),
    RopeOp(
        "com.microsoft",
        "RotaryEmbedding",
        1,
        2,
        3,
        1,
        None,
        "interleaved",
        "rotary_embedding_dim",
        False,
    ),
    RopeOp(
        "com.microsoft",
        "MRotaryEmbedding",
        1,
        2,
        3,
        1,
        None,
        "interleaved",
        "rotary_embedding_dim",
        False,
    ),
    # The standard operator (opset 23) takes the caches before the position ids.
    RopeOp("", "RotaryEmbedding", 23, 1, 2, 3, None, "interleaved", "rotary_embedding_dim", False),
)
ROPE_OP_OF = {(op.domain, op.op_type): op for op in ROPE_OPS}

# Every operator that is a layer's attention: a layer with one and no rope is a NoPE layer.
ATTENTION_OPS = frozenset(
    {
        ("com.microsoft", "GroupQueryAttention"),
        ("com.microsoft", "MultiHeadAttention"),
        ("com.microsoft", "PagedAttention"),
        ("com.microsoft", "SparseAttention"),
        ("com.microsoft", "Attention"),
        ("", "Attention"),
    }
)
# Nodes the reader keeps besides those: what a cache's name may come from (a constant, a
# branch, a cast) and what a branch's condition or a position offset is computed by.
TRACED_OPS = frozenset(
    {
        "If",
        "Constant",
        "Cast",
        "Identity",
        "Greater",
        "GreaterOrEqual",
        "Less",
        "LessOrEqual",
        "Gather",
        "Shape",
        "ReduceMax",
        "Add",
        "Mul",
    }
)
# Operators whose graph attributes hold subgraphs (If's branches, loop bodies).
SUBGRAPH_OPS = frozenset({"If", "Loop", "Scan"})

# The builder names each layer's nodes /model/layers.{i}/…
LAYER = re.compile(r"/layers\.(\d{1,6})/")

# genai_config.json: the context the runtime serves, the layers and the head, and where the
# builder writes the row at which a concatenated cache's long rows start (WebGPU with graph
# capture, TensorRT-RTX; DirectML offsets the position ids in the graph instead).
CONTEXT_LENGTH = ("model", "context_length")
NUM_HIDDEN_LAYERS = ("model", "decoder", "num_hidden_layers")
HEAD_SIZE = ("model", "decoder", "head_size")
PROVIDER_OPTIONS = ("model", "decoder", "session_options", "provider_options")
CONCAT_OFFSET_KEYS = ("multiRotaryCacheConcatOffset", "multi_rotary_cache_concat_offset")

# ONNX's TensorProto.DataType: the float types a cache may hold, and the integer types of a
# threshold.
FLOAT_TYPES = {1: "float32", 10: "float16", 16: "bfloat16", 11: "float64"}
INT_TYPES = {6: "int32", 7: "int64", 12: "uint32", 13: "uint64", 2: "uint8", 3: "int8"}

"""Real kernels, run on random vectors, each giving a :class:`~tests.applied.dumps.Dump`:
transformers' rotary modules with their ``apply_rotary_pos_emb``; ggml's ``ggml_rope_ext`` and
``ggml_rope_multi`` (ggml-python, llama.cpp's ggml-cpu); MLX's ``mx.fast.rope``; ONNX Runtime's
``RotaryEmbedding`` (the standard opset-23 node and com.microsoft's), each a one-node graph.
Nothing here computes a rope itself: every rotation is the runtime's."""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np
import numpy.typing as npt

from posenc.schemes.rope.params import RopeParams
from posenc.schemes.rope.recipes import ggml as ggml_recipe
from tests.applied.dumps import Dump

F32 = npt.NDArray[np.float32]
Ids = npt.NDArray[np.int64]
NORMAL, NEOX, MROPE = 0, 2, 8


def vectors(shape: tuple[int, ...], seed: int = 0) -> F32:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def bfloat16_words(tensor: Any) -> npt.NDArray[np.uint16]:
    """A torch bfloat16 tensor's bits, as the service reads raw bfloat16."""
    import torch

    words: npt.NDArray[np.uint16] = tensor.contiguous().view(torch.int16).numpy().view(np.uint16)
    return words


# --- transformers -------------------------------------------------------------------------


def llama(
    rope_parameters: dict[str, Any],
    positions: Ids,
    heads: int = 4,
    head_dim: int = 64,
    dtype: str = "float32",
    seed: int = 0,
    table: str | None = None,
) -> Dump:
    """LlamaRotaryEmbedding and apply_rotary_pos_emb on q of shape (1, heads, n, head_dim), in
    ``dtype`` (float32 or bfloat16) as a model in that dtype runs them; ``table``: the module's
    cos and sin held in that torch dtype, then handed to the apply in ``dtype`` (a port that
    keeps its cache in the model's dtype and turns float32 q)."""
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb

    config = LlamaConfig(
        hidden_size=heads * head_dim,
        num_attention_heads=heads,
        head_dim=head_dim,
        rope_parameters=dict(rope_parameters),
        max_position_embeddings=max(int(positions.max()) + 1, 2048),
    )
    rotary = LlamaRotaryEmbedding(config)
    return _apply(
        rotary, apply_rotary_pos_emb, positions, heads, head_dim, dtype, seed, table=table
    )


def _apply(
    rotary: Any,
    apply: Any,
    positions: Ids,
    heads: int,
    head_dim: int,
    dtype: str,
    seed: int,
    ids: Any = None,
    table: str | None = None,
) -> Dump:
    import torch

    types = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
    torch_dtype = types[dtype]
    n = positions.shape[-1]
    q = torch.from_numpy(vectors((1, heads, n, head_dim), seed)).to(torch_dtype)
    given = torch.from_numpy(positions if ids is None else ids)
    with torch.no_grad():
        cos, sin = rotary(q, given[None] if ids is None else given[:, None])
        if table is not None:
            cos, sin = cos.to(types[table]).to(torch_dtype), sin.to(types[table]).to(torch_dtype)
        turned, _ = apply(q, q, cos, sin)
    if dtype == "bfloat16":
        return Dump(bfloat16_words(q), bfloat16_words(turned), 2, positions, "bfloat16")
    return Dump(q.numpy(), turned.numpy(), 2, positions)


def qwen2_vl(config: dict[str, Any], ids: Ids, heads: int = 2, seed: int = 0) -> Dump:
    """Qwen2-VL's text rotary module (M-RoPE, ``(3, n)`` ids) and its apply_rotary_pos_emb."""
    from transformers import Qwen2VLConfig
    from transformers.models.qwen2_vl.modeling_qwen2_vl import (
        Qwen2VLRotaryEmbedding,
        apply_rotary_pos_emb,
    )

    text = Qwen2VLConfig(**config).get_text_config()
    head_dim = text.hidden_size // text.num_attention_heads
    rotary = Qwen2VLRotaryEmbedding(text)  # type: ignore[arg-type]
    return _apply(rotary, apply_rotary_pos_emb, ids, heads, head_dim, "float32", seed, ids=ids)


def cohere(base: float, positions: Ids, heads: int = 2, head_dim: int = 32) -> Dump:
    """Cohere's rotary module and its interleaved apply (pairs (2i, 2i + 1))."""
    from transformers import CohereConfig
    from transformers.models.cohere.modeling_cohere import (
        CohereRotaryEmbedding,
        apply_rotary_pos_emb,
    )

    config = CohereConfig(
        hidden_size=heads * head_dim,
        num_attention_heads=heads,
        rope_parameters={"rope_type": "default", "rope_theta": base},
        max_position_embeddings=max(int(positions.max()) + 1, 2048),
    )
    rotary = CohereRotaryEmbedding(config)
    return _apply(rotary, apply_rotary_pos_emb, positions, heads, head_dim, "float32", 0)


# --- ggml ---------------------------------------------------------------------------------


def _ggml_compute(build: Any, x: F32, positions: npt.NDArray[np.int32]) -> F32:
    """``build(ctx, a, b)`` on x ``(n, heads, d)`` (ggml's ne0 = d, ne1 = heads, ne2 = n), run
    on one thread of ggml-cpu."""
    from ggml import ggml
    from ggml.utils import from_numpy, to_numpy

    memory = 32 * 2**20 + 16 * x.size
    ctx = ggml.ggml_init(ggml.ggml_init_params(mem_size=memory, mem_buffer=None))
    try:
        out = build(ctx, from_numpy(np.ascontiguousarray(x), ctx), from_numpy(positions, ctx))
        graph = ggml.ggml_new_graph(ctx)
        ggml.ggml_build_forward_expand(graph, out)
        ggml.ggml_graph_compute_with_ctx(ctx, graph, 1)
        return np.array(to_numpy(out)).reshape(x.shape).copy()
    finally:
        ggml.ggml_free(ctx)


def ggml_rope(
    params: RopeParams,
    x: F32,
    positions: Ids,
    mode: int | None = None,
    **changed: Any,
) -> F32:
    """``ggml_rope_ext`` with the arguments llama.cpp derives for ``params`` (its factor
    tensor, YaRN's ramp and attention factor), any of them ``changed``; ``mode`` NORMAL or NEOX
    (default: the layout's)."""
    from ggml import ggml
    from ggml.utils import from_numpy

    rope = ggml_recipe.derive(params)
    arguments = {
        "n_dims": rope.n_dims, "mode": rope.mode if mode is None else mode,
        "n_ctx_orig": rope.n_ctx_orig, "freq_base": rope.freq_base,
        "freq_scale": rope.freq_scale, "ext_factor": rope.ext_factor,
        "attn_factor": rope.attn_factor, "beta_fast": rope.beta_fast,
        "beta_slow": rope.beta_slow, "freq_factors": rope.freq_factors,
    }  # fmt: skip
    arguments.update(changed)

    def build(ctx: Any, a: Any, b: Any) -> Any:
        factors = arguments["freq_factors"]
        c = from_numpy(np.array(factors, np.float32), ctx) if factors else None
        return ggml.ggml_rope_ext(
            ctx, a, b, c, arguments["n_dims"], arguments["mode"], arguments["n_ctx_orig"],
            arguments["freq_base"], arguments["freq_scale"], arguments["ext_factor"],
            arguments["attn_factor"], arguments["beta_fast"], arguments["beta_slow"],
        )  # fmt: skip

    return _ggml_compute(build, x, positions.astype(np.int32))


def ggml_mrope(params: RopeParams, x: F32, ids: Ids, sections: tuple[int, ...]) -> F32:
    """``ggml_rope_multi`` in mode MROPE (Qwen2-VL's chunked sections) for ``(3, n)`` ids, the
    fourth row the temporal one as llama.cpp's mtmd fills it."""
    from ggml import ggml

    rope = ggml_recipe.derive(params)
    four = np.concatenate([ids, ids[:1]]).astype(np.int32).reshape(-1)
    sections_c = (ctypes.c_int * 4)(*sections, *([0] * (4 - len(sections))))

    def build(ctx: Any, a: Any, b: Any) -> Any:
        return ggml.ggml_rope_multi(
            ctx, a, b, None, rope.n_dims, sections_c, MROPE, rope.n_ctx_orig, rope.freq_base,
            rope.freq_scale, rope.ext_factor, rope.attn_factor, rope.beta_fast, rope.beta_slow,
        )  # fmt: skip

    return _ggml_compute(build, x, four)


# --- MLX ----------------------------------------------------------------------------------


def mlx_rope(
    x: F32,
    dims: int,
    offset: int,
    traditional: bool,
    base: float | None = 10000.0,
    scale: float = 1.0,
    freqs: F32 | None = None,
) -> F32:
    """``mx.fast.rope`` on ``(1, heads, n, d)``, positions ``offset …`` (its CPU backend)."""
    import mlx.core as mx

    given = None if freqs is None else mx.array(freqs)
    out = mx.fast.rope(
        mx.array(x), dims, traditional=traditional, base=base, scale=scale, offset=offset,
        freqs=given,
    )  # fmt: skip
    return np.array(out)


# --- ONNX Runtime -------------------------------------------------------------------------


def ort_rotary(
    x: F32,
    cos_cache: F32,
    sin_cache: F32,
    positions: Ids,
    interleaved: bool,
    microsoft: bool,
) -> F32:
    """One ``RotaryEmbedding`` node (opset 23, or com.microsoft's) on x ``(1, heads, n, d)``
    with caches ``(max position + 1, rotary_dim / 2)``, run by ONNX Runtime's CPU provider."""
    import onnx
    import onnxruntime
    from onnx import TensorProto, helper

    _, heads, n, _ = x.shape
    rotary = 2 * cos_cache.shape[1]
    ids = positions.reshape(1, n).astype(np.int64)
    attributes: dict[str, Any] = {"interleaved": int(interleaved)}
    if microsoft:
        inputs, domain, opset = ["X", "position_ids", "cos_cache", "sin_cache"], "com.microsoft", 1
        attributes.update(num_heads=heads, rotary_embedding_dim=rotary)
    else:
        inputs, domain, opset = ["X", "cos_cache", "sin_cache", "position_ids"], "", 23
        attributes.update(rotary_embedding_dim=rotary)
    node = helper.make_node("RotaryEmbedding", inputs, ["Y"], domain=domain, **attributes)
    shapes = {"X": x.shape, "position_ids": ids.shape, "cos_cache": cos_cache.shape}
    shapes["sin_cache"] = sin_cache.shape
    types = {"position_ids": TensorProto.INT64}
    graph = helper.make_graph(
        [node],
        "rope",
        [helper.make_tensor_value_info(name, types.get(name, TensorProto.FLOAT), shapes[name])
         for name in inputs],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, x.shape)],
    )  # fmt: skip
    imports = [helper.make_opsetid("", 23)]
    if microsoft:
        imports.append(helper.make_opsetid("com.microsoft", opset))
    model = helper.make_model(graph, opset_imports=imports, ir_version=10)
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    session = onnxruntime.InferenceSession(
        onnx.ModelProto.SerializeToString(model), options, providers=["CPUExecutionProvider"]
    )
    feeds = {"X": x, "position_ids": ids, "cos_cache": cos_cache, "sin_cache": sin_cache}
    (y,) = session.run(None, feeds)
    return np.asarray(y)

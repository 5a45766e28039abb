"""The runtimes themselves, as references: ggml (llama.cpp's ggml-cpu, through ggml-python) and
MLX (its CPU backend, with mlx-lm's ``initialize_rope``). Each rotates unit vectors — 1 in a
pair's first member, 0 in its second — so its output is the cos and sin it computed.

ggml is given llama.cpp's arguments, never posenc's: a rope node llama.cpp itself built
(tests/gguf/records) or :func:`.llama_cpp_args.call`, derived apart from posenc and held to
those records."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from posenc.schemes.rope.params import RopeParams
from tests.reference.llama_cpp_args import Call

Halves = tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]


def _unit_rows(count: int, d: int, interleaved: bool) -> npt.NDArray[np.float32]:
    x = np.zeros((count, d), dtype=np.float32)
    if interleaved:
        x[:, 0::2] = 1.0
    else:
        x[:, : d // 2] = 1.0
    return x


def _split(y: npt.NDArray[np.float32], interleaved: bool) -> Halves:
    half = y.shape[-1] // 2
    if interleaved:
        return y[:, 0::2].copy(), y[:, 1::2].copy()
    return y[:, :half].copy(), y[:, half:].copy()


def _computed(ctx: Any, out: Any, n: int, d: int) -> npt.NDArray[np.float32]:
    """The rows of ``out`` once ggml-cpu has computed its graph, on one thread."""
    from ggml import ggml
    from ggml.utils import to_numpy

    graph = ggml.ggml_new_graph(ctx)
    ggml.ggml_build_forward_expand(graph, out)
    ggml.ggml_graph_compute_with_ctx(ctx, graph, 1)
    return np.array(to_numpy(out)).reshape(n, d)


def ggml_halves(rope: Call, positions: npt.NDArray[np.int64]) -> Halves:
    """cos and sin ``(n, d/2)`` from ggml's ``ggml_rope_ext`` with llama.cpp's arguments."""
    from ggml import ggml
    from ggml.utils import from_numpy

    n, d = len(positions), rope.n_dims
    interleaved = rope.mode == 0  # GGML_ROPE_TYPE_NORMAL: pairs (2i, 2i+1)
    memory = 16 * 2**20 + 64 * n * d
    ctx = ggml.ggml_init(ggml.ggml_init_params(mem_size=memory, mem_buffer=None))
    try:
        x = _unit_rows(n, d, interleaved).reshape(n, 1, d)  # ne0 = d, ne1 = 1 head, ne2 = n
        a = from_numpy(x, ctx)
        b = from_numpy(positions.astype(np.int32), ctx)
        factors = rope.factors
        c = from_numpy(np.array(factors, dtype=np.float32), ctx) if factors else None
        out = ggml.ggml_rope_ext(
            ctx, a, b, c, d, rope.mode, rope.n_ctx_orig, rope.freq_base, rope.freq_scale,
            rope.ext_factor, rope.attn_factor, rope.beta_fast, rope.beta_slow,
        )  # fmt: skip
        y = _computed(ctx, out, n, d)
    finally:
        ggml.ggml_free(ctx)
    return _split(y, interleaved)


def mlx_rope(params: RopeParams) -> Any:
    """mlx-lm's rope module for ``params``, built as a model's config would build it."""
    from mlx_lm.models.rope_utils import initialize_rope

    config: dict[str, Any] | None = None
    if params.scaling != "none":
        config = {"rope_type": params.scaling, "factor": params.factor}
        for key in (
            "original_max_position_embeddings", "low_freq_factor", "high_freq_factor",
            "beta_fast", "beta_slow", "mscale", "mscale_all_dim",
        ):  # fmt: skip
            if getattr(params, key) is not None:
                config[key] = getattr(params, key)
        if params.scaling == "longrope":
            config["short_factor"] = list(params.short_factor or ())
            config["long_factor"] = list(params.long_factor or ())
    original = params.original_max_position_embeddings or 2048
    trained = int(original * (params.factor or 1.0)) if params.scaling == "longrope" else original
    return initialize_rope(
        params.d_model, params.base, params.layout == "interleaved", config, trained
    )


def mlx_halves(params: RopeParams, positions: npt.NDArray[np.int64]) -> Halves:
    """cos and sin ``(n, d/2)`` from MLX: each position a decode step (one row at its offset),
    all in one call with a per-batch offset."""
    import mlx.core as mx

    rope, d = mlx_rope(params), params.d_model
    interleaved = params.layout == "interleaved"
    x = _unit_rows(len(positions), d, interleaved).reshape(len(positions), 1, 1, d)
    y = rope(mx.array(x), offset=mx.array(positions.astype(np.int32)))
    return _split(np.array(y).reshape(len(positions), d), interleaved)


def mlx_prefill(params: RopeParams, n: int) -> Halves:
    """cos and sin of positions 0 … n − 1 from one MLX call (a prefill), as dynamic scaling
    needs: its base grows with the length the call sees."""
    import mlx.core as mx

    rope, d = mlx_rope(params), params.d_model
    interleaved = params.layout == "interleaved"
    x = _unit_rows(n, d, interleaved).reshape(1, 1, n, d)
    y = rope(mx.array(x), offset=0)
    return _split(np.array(y).reshape(n, d), interleaved)


def ggml_multi_halves(
    rope: Call, ids: npt.NDArray[np.int64], sections: tuple[int, ...], imrope: bool
) -> Halves:
    """cos and sin ``(n, d/2)`` from ggml's ``ggml_rope_multi`` for ``(3, n)`` ids: mode MROPE
    (Qwen2-VL's chunked sections) or IMROPE (Qwen3-VL's interleaved), the fourth row the
    temporal one, as mtmd's helpers fill it; or for ``(4, n)`` ids, the fourth row given."""
    import ctypes

    from ggml import ggml
    from ggml.utils import from_numpy

    n, d = ids.shape[1], rope.n_dims
    memory = 16 * 2**20 + 64 * n * d
    ctx = ggml.ggml_init(ggml.ggml_init_params(mem_size=memory, mem_buffer=None))
    try:
        x = _unit_rows(n, d, False).reshape(n, 1, d)
        a = from_numpy(x, ctx)
        four = (ids if len(ids) == 4 else np.concatenate([ids, ids[:1]])).astype(np.int32)
        b = from_numpy(four.reshape(-1), ctx)
        sections_c = (ctypes.c_int * 4)(*sections, *([0] * (4 - len(sections))))
        mode = 40 if imrope else 8
        out = ggml.ggml_rope_multi(
            ctx, a, b, None, d, sections_c, mode, rope.n_ctx_orig, rope.freq_base,
            rope.freq_scale, rope.ext_factor, rope.attn_factor, rope.beta_fast, rope.beta_slow,
        )  # fmt: skip
        y = _computed(ctx, out, n, d)
    finally:
        ggml.ggml_free(ctx)
    return _split(y, False)

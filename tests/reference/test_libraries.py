"""posenc over HTTP against the libraries users take their tables from.

torch, transformers and positional-encodings compute in float32: their inverse frequencies and
angles carry float32 rounding (relative ~2^-24, growing with the position for angles), while
posenc evaluates every formula at 60 digits and rounds once. So frequencies are compared to a
few float32 ulps, tables at modest positions to the float32 angle error ``2^-22·(pos·ω + 1)``,
and integer buckets exactly.
"""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import positional_encodings.torch_encodings as positional_encodings
import pytest
import torch
from transformers import LlamaConfig
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
from transformers.models.bloom.modeling_bloom import build_alibi_tensor
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding
from transformers.models.m2m_100.modeling_m2m_100 import M2M100SinusoidalPositionalEmbedding
from transformers.models.omdet_turbo.modeling_omdet_turbo import OmDetTurboHybridEncoder
from transformers.models.t5.modeling_t5 import T5Attention

from tests.conftest import Client

F32_ULP = 2.0**-23


def fetch(client: Client, query: str) -> np.ndarray:
    response = client.get(f"{query}&format=npy")
    assert response.status_code == 200, response.text
    return np.load(io.BytesIO(response.content))


ROPE_CASES: dict[str, dict[str, Any]] = {
    "linear": {"factor": 4.0},
    "dynamic": {"factor": 2.0},
    "yarn": {"factor": 8.0, "original_max_position_embeddings": 64},
    "yarn-mscale": {
        "factor": 4.0,
        "original_max_position_embeddings": 64,
        "mscale": 0.707,
        "mscale_all_dim": 1.0,
        "beta_fast": 16.0,
    },
    "yarn-untruncated": {"factor": 4.0, "original_max_position_embeddings": 128, "truncate": False},
    "llama3": {
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 64,
    },
    "longrope": {"original_max_position_embeddings": 64, "factor": 4.0},
}


def _hf_config(scaling: str, d: int, base: float, extra: dict[str, Any]) -> Any:
    rope_type = scaling.split("-")[0]
    parameters = {"rope_type": rope_type, "rope_theta": base, **extra}
    if rope_type == "longrope":
        rng = np.random.default_rng(0)
        parameters["short_factor"] = (1 + rng.random(d // 2)).tolist()
        parameters["long_factor"] = (1 + 4 * rng.random(d // 2)).tolist()
    # transformers' dynamic scaling reads max_position_embeddings as the trained length.
    return LlamaConfig(
        hidden_size=d * 2,
        num_attention_heads=2,
        head_dim=d,
        max_position_embeddings=256 if rope_type != "dynamic" else 64,
        rope_parameters=parameters,
    ), parameters


def _rope_query(scaling: str, d: int, base: float, parameters: dict[str, Any]) -> str:
    query = f"scheme=rope&d_model={d}&base={base}&scaling={scaling.split('-')[0]}"
    for key, value in parameters.items():
        if key in ("rope_type", "rope_theta"):
            continue
        text = ",".join(map(repr, value)) if isinstance(value, list) else str(value).lower()
        query += f"&{key}={text}"
    if scaling == "dynamic":
        query += "&original_max_position_embeddings=64"
    return query


@pytest.mark.parametrize("d", [16, 64])
@pytest.mark.parametrize("scaling", list(ROPE_CASES))
def test_rope_frequencies_and_attention_factor_match_transformers(
    client: Client, scaling: str, d: int
) -> None:
    config, parameters = _hf_config(scaling, d, 10000.0, ROPE_CASES[scaling])
    seq_len = 200  # past the trained length: dynamic and longrope switch regimes
    inv_freq, attention = ROPE_INIT_FUNCTIONS[parameters["rope_type"]](config, "cpu", seq_len)
    query = _rope_query(scaling, d, 10000.0, parameters)
    ours = client.get(f"/v1/table?{query}&seq_len={seq_len}&component=inv_freq&dtype=float64")
    assert ours.status_code == 200, ours.text
    ours_freq = np.array(ours.json()["data"])
    np.testing.assert_allclose(ours_freq, inv_freq.numpy(), rtol=8 * F32_ULP, atol=0)
    report = client.get(f"/v1/verify?{query}&seq_len=8").json()
    stats = {s["name"]: s["value"] for s in report["statistics"]}
    assert stats["attention_factor"] == pytest.approx(attention, rel=1e-15)


@pytest.mark.parametrize("scaling", ["none", "yarn", "llama3"])
def test_rope_cos_sin_match_llama_rotary_embedding(client: Client, scaling: str) -> None:
    d, n = 32, 48
    extra = {} if scaling == "none" else ROPE_CASES[scaling]
    if scaling == "none":
        config = LlamaConfig(
            hidden_size=2 * d,
            num_attention_heads=2,
            head_dim=d,
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        )
        query = f"scheme=rope&d_model={d}"
    else:
        config, parameters = _hf_config(scaling, d, 10000.0, extra)
        query = _rope_query(scaling, d, 10000.0, parameters)
    cos, sin = LlamaRotaryEmbedding(config)(torch.zeros(1, n, d), torch.arange(n)[None])
    ours = fetch(client, f"/v1/table?{query}&seq_len={n}")
    assert ours.shape == (2, n, d)
    # transformers forms pos·ω in float32: its angles are off by up to ~2^-24·pos·ω.
    bound = 4 * F32_ULP * (np.arange(n)[:, None] + 1)
    assert np.all(np.abs(ours[0] - cos[0].numpy()) <= bound)
    assert np.all(np.abs(ours[1] - sin[0].numpy()) <= bound)


def test_rope_interleaved_layout_is_gptj_repeat_interleave(client: Client) -> None:
    d, n = 16, 10
    config = LlamaConfig(
        hidden_size=2 * d,
        num_attention_heads=2,
        head_dim=d,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
    )
    cos, _ = LlamaRotaryEmbedding(config)(torch.zeros(1, n, d), torch.arange(n)[None])
    half = cos[0, :, : d // 2]
    gptj = torch.repeat_interleave(half, 2, dim=-1).numpy()
    ours = fetch(
        client, f"/v1/table?scheme=rope&d_model={d}&seq_len={n}&layout=interleaved&component=cos"
    )
    np.testing.assert_allclose(ours, gptj, atol=4 * F32_ULP * n)


@pytest.mark.parametrize("num_heads", [1, 3, 8, 12, 16, 40])
def test_alibi_slopes_match_bloom(client: Client, num_heads: int) -> None:
    n = 7
    alibi = build_alibi_tensor(torch.ones(1, n), num_heads, torch.float32)
    bloom_slopes = alibi[:, 0, 1].numpy().astype(np.float64)
    ours = fetch(
        client,
        f"/v1/table?scheme=alibi&num_heads={num_heads}&seq_len={n}&component=slopes&dtype=float64",
    )
    # Bloom raises a float32 base to integer powers: a few float32 ulps of drift.
    np.testing.assert_allclose(ours, bloom_slopes, rtol=8 * F32_ULP)
    bias = fetch(client, f"/v1/table?scheme=alibi&num_heads={num_heads}&seq_len={n}")
    # Bloom adds m·j to every logit of a row; softmax sees only differences, -m·|i−j| for j ≤ i.
    for i in range(n):
        shifted = alibi[:, 0, : i + 1].numpy() - alibi[:, 0, i : i + 1].numpy()
        np.testing.assert_allclose(bias[:, i, : i + 1], shifted, rtol=8 * F32_ULP, atol=1e-6)


@pytest.mark.parametrize(
    ("buckets", "distance", "bidirectional"),
    [(32, 128, True), (32, 128, False), (64, 256, True), (16, 40, False), (8, 10, True)],
)
def test_t5_buckets_equal_transformers_exactly(
    client: Client, buckets: int, distance: int, bidirectional: bool
) -> None:
    n = 300
    relative = torch.arange(n)[None, :] - torch.arange(n)[:, None]
    expected = T5Attention._relative_position_bucket(
        relative, bidirectional=bidirectional, num_buckets=buckets, max_distance=distance
    ).numpy()
    query = (
        f"/v1/table?scheme=t5&seq_len={n}&num_buckets={buckets}&max_distance={distance}"
        f"&bidirectional={str(bidirectional).lower()}"
    )
    ours = fetch(client, query)
    assert ours.dtype == np.int32
    assert np.array_equal(ours, expected)


@pytest.mark.parametrize("d", [6, 7, 64])
@pytest.mark.parametrize("convention", ["tensor2tensor", "fairseq"])
def test_tensor2tensor_and_fairseq_tables_match_the_fairseq_port(
    client: Client, convention: str, d: int
) -> None:
    n, padding = 40, 1
    reference = M2M100SinusoidalPositionalEmbedding.get_embedding(
        n, d, padding if convention == "fairseq" else None
    ).numpy()
    ours = fetch(client, f"/v1/table?d_model={d}&seq_len={n}&convention={convention}")
    np.testing.assert_allclose(ours, reference, atol=4 * F32_ULP * n)
    if convention == "fairseq":
        assert not ours[padding].any()


@pytest.mark.parametrize("d", [6, 10, 16])
def test_vaswani_split_layout_matches_the_fairseq_port_spacing_only_where_they_agree(
    client: Client, d: int
) -> None:
    # Vaswani spaces exponents 2i/d, tensor2tensor i/(h−1): the tables differ by design.
    ours = fetch(client, f"/v1/table?d_model={d}&seq_len=8&layout=split")
    t2t = M2M100SinusoidalPositionalEmbedding.get_embedding(8, d, None).numpy()
    np.testing.assert_allclose(ours[:, 0], t2t[:, 0], atol=F32_ULP)  # ω_0 = 1 in both
    assert not np.allclose(ours, t2t, atol=1e-3)


@pytest.mark.parametrize(("height", "width", "d"), [(3, 5, 16), (4, 4, 8), (7, 2, 32)])
def test_mae_2d_matches_transformers_2d_sincos_after_transposing_cells(
    client: Client, height: int, width: int, d: int
) -> None:
    # transformers' 2-D sin-cos builder (RT-DETR/OmDet) orders cells width-major and puts the
    # width coordinate first: the MAE layout of posenc with the cell order transposed.
    reference = OmDetTurboHybridEncoder.build_2d_sincos_position_embedding(width, height, d)[
        0
    ].numpy()
    by_cell = reference.reshape(width, height, d).transpose(1, 0, 2).reshape(-1, d)
    ours = fetch(client, f"/v1/table?scheme=sinusoidal2d&d_model={d}&grid={height},{width}")
    np.testing.assert_allclose(ours, by_cell, atol=4 * F32_ULP * max(height, width))


@pytest.mark.parametrize("d", [6, 8, 13, 32])
def test_positional_encodings_2d_package(client: Client, d: int) -> None:
    h, w = 5, 3
    reference = positional_encodings.PositionalEncoding2D(d)(torch.zeros(1, h, w, d))[0]
    ours = fetch(
        client,
        f"/v1/table?scheme=sinusoidal2d&d_model={d}&grid={h},{w}&convention=positional-encodings",
    )
    np.testing.assert_allclose(ours, reference.reshape(-1, d).numpy(), atol=4 * F32_ULP * h)


@pytest.mark.parametrize("d", [6, 12, 14])
def test_positional_encodings_3d_package(client: Client, d: int) -> None:
    x, y, z = 3, 2, 4
    reference = positional_encodings.PositionalEncoding3D(d)(torch.zeros(1, x, y, z, d))[0]
    ours = fetch(
        client,
        f"/v1/table?scheme=sinusoidal3d&d_model={d}&grid={x},{y},{z}"
        "&convention=positional-encodings",
    )
    np.testing.assert_allclose(ours, reference.reshape(-1, d).numpy(), atol=4 * F32_ULP * z)

"""``recipe=framework`` against the float32 computations it reproduces, run by the libraries.

transformers' ``LlamaRotaryEmbedding`` (its rope initialisation for every scaling, then its
forward) on torch's CPU; the sinusoid of the PyTorch module form, of fairseq (transformers'
port, ``M2M100SinusoidalPositionalEmbedding.get_embedding``) and of tensor2tensor (its TF ops
transcribed to torch: TensorFlow is not a test dependency).

torch's float32 ``pow``/``exp``/``sin``/``cos`` (SLEEF, 1 ulp) are not correctly rounded and we
take the correctly rounded value: a ``pow`` that differs by one ulp becomes up to 2 ulp in its
reciprocal ``inv_freq``, and changes that column's angles. The promises are therefore: every
other frequency bit-identical, and in every column whose frequency is bit-identical, cos/sin
within 1 ulp of torch's (2 where an attention factor multiplies), positions past 2^24 included.
"""

from __future__ import annotations

import io
import logging
import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import torch
from transformers import LlamaConfig
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding
from transformers.models.m2m_100.modeling_m2m_100 import M2M100SinusoidalPositionalEmbedding
from transformers.models.roformer.modeling_roformer import RoFormerSinusoidalPositionalEmbedding

from posenc.numerics import float32
from posenc.schemes.rope.params import RopeParams
from posenc.schemes.rope.recipes import framework
from posenc.schemes.sinusoidal import framework as sinusoidal_framework
from posenc.schemes.sinusoidal.params import SinusoidalParams
from tests.conftest import Client

ROWS = {
    "start": np.arange(0, 64),
    "2^24": np.arange(2**24 - 32, 2**24 + 32),
    "2^25": np.arange(2**25 - 32, 2**25 + 32),
    "2^31": np.arange(2**31 - 64, 2**31),
}
TRAINED = 4096  # the original context of every scaled case below
_rng = np.random.default_rng(0)
SCALINGS: dict[str, dict[str, Any]] = {
    "none": {},
    "linear": {"factor": 4.0},
    "dynamic": {"factor": 2.0},
    "yarn": {"factor": 8.0, "original_max_position_embeddings": TRAINED},
    "yarn-mscale-untruncated": {
        "factor": 4.0,
        "original_max_position_embeddings": TRAINED,
        "mscale": 0.707,
        "mscale_all_dim": 1.0,
        "beta_fast": 16.0,
        "truncate": False,
    },
    "llama3": {
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": TRAINED,
    },
    "longrope": {"original_max_position_embeddings": TRAINED},
}


def ulps(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Distance in float32 ulps, across zero too (sign-magnitude mapped to a monotone line)."""

    def line(x: np.ndarray) -> np.ndarray:
        bits = np.asarray(x, dtype=np.float32).view(np.int32).astype(np.int64)
        return np.where(bits < 0, -(bits & 0x7FFFFFFF), bits)

    return np.abs(line(a) - line(b))


def pow_differs(params: RopeParams, seq_len: int) -> np.ndarray:
    """Where torch's float32 pow of the base the frequencies come from (a dynamic rope's grown
    one, past its original context) is not the correctly rounded power: there alone may a
    frequency be 2 ulp from the model's (docs/numbers.md, the bounds the suite holds)."""
    base, exponents = np.float32(params.base), framework._exponents(params.d_model)
    if params.scaling == "dynamic" and seq_len > (params.original_max_position_embeddings or 0):
        base = framework._dynamic_base(params, seq_len)
    theirs = (torch.tensor(base) ** torch.from_numpy(exponents)).numpy()
    return np.asarray(ulps(float32.power(base, exponents), theirs) > 0)


def rope_pair(case: str, d: int, base: float) -> tuple[LlamaRotaryEmbedding, RopeParams]:
    """transformers' rotary module and our parameters for the same rope."""
    scaling = case.split("-")[0]
    extra = dict(SCALINGS[case])
    if scaling == "longrope":
        extra["short_factor"] = (1 + _rng.random(d // 2)).tolist()
        extra["long_factor"] = (1 + 4 * _rng.random(d // 2)).tolist()
    rope_type = "default" if scaling == "none" else scaling
    config = LlamaConfig(
        hidden_size=2 * d,
        num_attention_heads=2,
        head_dim=d,
        # dynamic reads max_position_embeddings as the trained length; longrope its ratio.
        max_position_embeddings=TRAINED if scaling == "dynamic" else 32 * TRAINED,
        rope_parameters={"rope_type": rope_type, "rope_theta": base, **extra},
    )
    ours = {k: tuple(v) if isinstance(v, list) else v for k, v in extra.items()}
    if scaling == "dynamic":
        ours["original_max_position_embeddings"] = TRAINED
    if scaling == "longrope":
        ours["factor"] = 32.0  # transformers: max_position_embeddings / original
    params = RopeParams(d_model=d, base=base, scaling=scaling, recipe="framework", **ours)  # type: ignore[arg-type]
    return LlamaRotaryEmbedding(config), params


@pytest.fixture(autouse=True)
def _quiet_transformers() -> Iterator[None]:
    logging.disable(logging.WARNING)  # its config validation warns about test-sized contexts
    yield
    logging.disable(logging.NOTSET)


@pytest.mark.parametrize("rows", list(ROWS))
@pytest.mark.parametrize("base", [10000.0, 500000.0, 1e6])
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("case", list(SCALINGS))
def test_rope_framework_recipe_matches_llama_rotary_embedding(
    case: str, d: int, base: float, rows: str
) -> None:
    module, params = rope_pair(case, d, base)
    positions = ROWS[rows]
    cos, sin = module(torch.zeros(1, 1, d), torch.from_numpy(positions)[None])
    theirs_freq = module.inv_freq.numpy()  # after the forward's dynamic/longrope update
    ours_freq, attention = framework.frequencies(params, int(positions[-1]) + 1)
    assert attention == module.attention_scaling

    # Where our correctly rounded pow agrees with torch's, every later float32 step is exact.
    base_used = np.float32(base)
    if params.scaling == "dynamic" and positions[-1] + 1 > TRAINED:
        base_used = framework._dynamic_base(params, int(positions[-1]) + 1)
    torch_pow = (torch.tensor(base_used) ** (torch.arange(0, d, 2).float() / d)).numpy()
    pow_differs = ulps(float32.power(base_used, framework._exponents(d)), torch_pow)
    assert pow_differs.max() <= 1
    freq_ulps = ulps(ours_freq, theirs_freq)
    assert not freq_ulps[pow_differs == 0].any()
    assert freq_ulps.max() <= 2

    table = framework.encode(params, positions, "float32", "cos_sin")
    same = np.concatenate([freq_ulps == 0, freq_ulps == 0])
    bound = 1 if attention == 1.0 else 2
    assert ulps(table[0], cos[0].numpy())[:, same].max() <= bound
    assert ulps(table[1], sin[0].numpy())[:, same].max() <= bound


@pytest.mark.parametrize("rows", list(ROWS))
@pytest.mark.parametrize("factor", [None, 4.0])
@pytest.mark.parametrize(("d", "partial"), [(512, 0.25), (128, 0.5), (64, 0.3), (256, 1.0)])
def test_rope_framework_recipe_matches_proportional_rope(
    d: int, partial: float, factor: float | None, rows: str
) -> None:
    # transformers' proportional rope (Gemma 4, LFM 3): int(p·d // 2) pairs at base^(-2i/d),
    # the others at frequency 0, over a cache the whole head wide; then divided by factor.
    rope = {"rope_type": "proportional", "rope_theta": 1e6, "partial_rotary_factor": partial}
    config = LlamaConfig(
        hidden_size=2 * d,
        num_attention_heads=2,
        head_dim=d,
        rope_parameters={**rope, **({} if factor is None else {"factor": factor})},
    )
    module = LlamaRotaryEmbedding(config)
    pairs = int(partial * d // 2)
    scaling: dict[str, Any] = {} if factor is None else {"scaling": "linear", "factor": factor}
    params = RopeParams(
        d_model=d,
        base=1e6,
        rotary_pairs=None if pairs == d // 2 else pairs,
        recipe="framework",
        **scaling,
    )
    positions = ROWS[rows]
    cos, sin = module(torch.zeros(1, 1, d), torch.from_numpy(positions)[None])
    theirs_freq = module.inv_freq.numpy()
    ours_freq, attention = framework.frequencies(params, int(positions[-1]) + 1)
    assert attention == module.attention_scaling == 1.0
    assert len(ours_freq) == len(theirs_freq) == d // 2
    assert not ours_freq[pairs:].any() and not theirs_freq[pairs:].any()

    torch_pow = (torch.tensor(np.float32(1e6)) ** (torch.arange(0, d, 2).float() / d)).numpy()
    pow_differs = ulps(float32.power(np.float32(1e6), framework._exponents(d)), torch_pow)
    freq_ulps = ulps(ours_freq, theirs_freq)
    assert not freq_ulps[pow_differs == 0].any()
    assert freq_ulps.max() <= 2

    table = framework.encode(params, positions, "float32", "cos_sin")
    same = np.concatenate([freq_ulps == 0, freq_ulps == 0])
    assert ulps(table[0], cos[0].numpy())[:, same].max() <= 1
    assert ulps(table[1], sin[0].numpy())[:, same].max() <= 1
    # The pairs that hold still are exactly the identity, in both.
    still = np.concatenate([np.arange(d // 2) >= pairs] * 2)
    assert (table[0][:, still] == 1).all() and (table[1][:, still] == 0).all()
    assert np.array_equal(table[:, :, still], np.stack([cos[0], sin[0]])[:, :, still])


@pytest.mark.parametrize("d", [2, 64, 128])
def test_float64_framework_recipe_is_roformers_table(d: int) -> None:
    # RoFormer's create_weight: NumPy float64 angles pos / 10000^(2i/d), float64 sin and cos,
    # rounded once to float32 into [sin | cos]; its apply call repeats each pairwise.
    n = 1536
    table = RoFormerSinusoidalPositionalEmbedding(n, d).create_weight().numpy()
    theirs_sin, theirs_cos = table[:, : d // 2], table[:, d // 2 :]
    params = RopeParams(
        d_model=d, layout="interleaved", recipe="framework", framework_precision="float64"
    )
    positions = np.arange(n)
    ours = framework.encode(params, positions, "float32", "cos_sin")
    assert np.array_equal(ours[0][:, 0::2], theirs_cos)
    assert np.array_equal(ours[1][:, 0::2], theirs_sin)
    assert np.array_equal(ours[:, :, 0::2], ours[:, :, 1::2])
    inv_freq = framework.encode(params, positions, "float32", "inv_freq")
    angles = framework.encode(params, positions, "float64", "angle")
    assert np.array_equal(inv_freq, angles[1].astype(np.float32))
    # transformers' float32 recipe is another table: the reason RoFormer has its own.
    float32_recipe = RopeParams(d_model=d, layout="interleaved", recipe="framework")
    if d > 2:
        assert not np.array_equal(
            framework.encode(float32_recipe, positions, "float32", "sin"), ours[1]
        )


def test_float64_framework_recipe_over_http(client: Client) -> None:
    query = "/v1/rope/table?d_model=64&layout=interleaved&seq_len=1536"
    recipe = fetch(client, query + "&recipe=framework&framework_precision=float64")
    table = RoFormerSinusoidalPositionalEmbedding(1536, 64).create_weight().numpy()
    assert np.array_equal(recipe[1][:, 0::2], table[:, :32])
    assert np.array_equal(recipe[0][:, 0::2], table[:, 32:])
    for refused in ("&scaling=linear&factor=2", "&rotary_pairs=8"):
        response = client.get(f"{query}&recipe=framework&framework_precision=float64{refused}")
        assert response.status_code == 422, response.text
        assert "framework_precision" in response.text


def test_correctly_rounded_cos_differs_from_torch_by_at_most_one_ulp() -> None:
    # Why we round the float64 value rather than call np.cos on float32: measured here.
    angles = torch.rand(200_000, generator=torch.Generator().manual_seed(0)) * 2.0**24
    ours_sin, ours_cos = float32.sincos(angles.numpy())
    assert ulps(ours_cos, torch.cos(angles).numpy()).max() <= 1
    assert ulps(ours_sin, torch.sin(angles).numpy()).max() <= 1


def fetch(client: Client, query: str) -> np.ndarray:
    response = client.get(f"{query}&format=npy")
    assert response.status_code == 200, response.text
    return np.load(io.BytesIO(response.content))


def test_rope_recipe_over_http_serves_the_float32_recipe(client: Client) -> None:
    d, offset, n = 128, 2**24 - 8, 16
    query = f"/v1/table?scheme=rope&d_model={d}&base=500000&seq_len={n}&offset={offset}"
    exact = fetch(client, query)
    recipe = fetch(client, query + "&recipe=framework&dtype=float64")
    config = LlamaConfig(
        hidden_size=2 * d,
        num_attention_heads=2,
        head_dim=d,
        rope_parameters={"rope_type": "default", "rope_theta": 500000.0},
    )
    positions = torch.arange(offset, offset + n)[None]
    cos, sin = LlamaRotaryEmbedding(config)(torch.zeros(1, 1, d), positions)
    assert recipe.dtype == np.float64 and np.array_equal(recipe, recipe.astype(np.float32))
    assert ulps(recipe[0], cos[0].numpy()).max() <= 1
    assert ulps(recipe[1], sin[0].numpy()).max() <= 1
    # At 2^24 the float32 recipe is far from exact: the reason both are served.
    assert np.abs(recipe - exact).max() > 1e-2
    inv_freq = fetch(client, query + "&recipe=framework&component=inv_freq")
    assert np.array_equal(inv_freq, framework.frequencies(RopeParams(d_model=d, base=5e5), n)[0])


SIN_ROWS = np.concatenate([ROWS["start"], ROWS["2^24"], ROWS["2^31"]])


Pair = tuple[np.ndarray, np.ndarray]


def _columns_agree(ours: Pair, theirs: Pair, same_sin: np.ndarray, same_cos: np.ndarray) -> None:
    """Sines and cosines within 1 ulp wherever the frequency is bit-identical."""
    assert ulps(ours[0], theirs[0])[:, same_sin].max() <= 1
    assert ulps(ours[1], theirs[1])[:, same_cos].max() <= 1


@pytest.mark.parametrize("base", [10000.0, 100.0])
@pytest.mark.parametrize("d", [7, 64, 512])
def test_vaswani_recipe_matches_the_pytorch_module_form(d: int, base: float) -> None:
    params = SinusoidalParams(d_model=d, base=base, recipe="framework")
    div_term = torch.exp(torch.arange(0, d, 2) * (-math.log(base) / d))
    angles = torch.from_numpy(SIN_ROWS)[:, None] * div_term
    theirs = (torch.sin(angles).numpy(), torch.cos(angles).numpy()[:, : d // 2])
    ours = sinusoidal_framework.encode(params, SIN_ROWS, "float32")
    same = ulps(sinusoidal_framework.frequencies(params), div_term.numpy()) == 0
    assert ulps(sinusoidal_framework.frequencies(params), div_term.numpy()).max() <= 1
    _columns_agree((ours[:, 0::2], ours[:, 1::2]), theirs, same, same[: d // 2])


def _fairseq_ops(positions: np.ndarray, d: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """fairseq's ``get_embedding`` at chosen rows (its own builds every row from 0)."""
    half = d // 2
    step = math.log(10000) / (half - 1)
    omega = torch.exp(torch.arange(half, dtype=torch.float) * -step)
    angles = torch.from_numpy(positions).float()[:, None] * omega[None]
    return torch.sin(angles).numpy(), torch.cos(angles).numpy(), omega.numpy()


@pytest.mark.parametrize("d", [6, 7, 64, 512])
def test_fairseq_recipe_matches_get_embedding(d: int) -> None:
    params = SinusoidalParams(d_model=d, convention="fairseq", recipe="framework")
    n = 64
    port = M2M100SinusoidalPositionalEmbedding.get_embedding(n, d, 1).numpy()
    ours = sinusoidal_framework.encode(params, np.arange(n), "float32")
    *_, omega = _fairseq_ops(SIN_ROWS, d)
    same = ulps(sinusoidal_framework.frequencies(params), omega) == 0
    h = d // 2
    _columns_agree((ours[:, :h], ours[:, h : 2 * h]), (port[:, :h], port[:, h : 2 * h]), same, same)
    assert not ours[1].any() and not ours[:, 2 * h :].any()  # padding row, odd column
    sin, cos, _ = _fairseq_ops(SIN_ROWS, d)
    far = sinusoidal_framework.encode(params, SIN_ROWS, "float32")
    keep = SIN_ROWS != 1  # the padding row is zero by design
    _columns_agree((far[keep, :h], far[keep, h : 2 * h]), (sin[keep], cos[keep]), same, same)


@pytest.mark.parametrize("base", [10000.0, 100.0])
@pytest.mark.parametrize("d", [6, 7, 64, 512])
def test_tensor2tensor_recipe_matches_its_timing_signal_ops(d: int, base: float) -> None:
    params = SinusoidalParams(d_model=d, base=base, convention="tensor2tensor", recipe="framework")
    h = d // 2
    # get_timing_signal_1d: log(max/min) / maximum(to_float(h) - 1, 1), all float32 tensors.
    step = torch.tensor(math.log(base)).float() / torch.clamp(torch.tensor(float(h)) - 1, min=1)
    omega = 1.0 * torch.exp(torch.arange(h).float() * -step)
    angles = torch.from_numpy(SIN_ROWS).float()[:, None] * omega[None]
    ours = sinusoidal_framework.encode(params, SIN_ROWS, "float32")
    same = ulps(sinusoidal_framework.frequencies(params), omega.numpy()) == 0
    theirs = (torch.sin(angles).numpy(), torch.cos(angles).numpy())
    _columns_agree((ours[:, :h], ours[:, h : 2 * h]), theirs, same, same)
    assert not ours[:, 2 * h :].any()

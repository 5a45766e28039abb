"""POST /v1/rope/applied against real kernels: what transformers' rotary modules with their
apply_rotary_pos_emb, ggml's ggml_rope_ext and ggml_rope_multi (llama.cpp's ggml-cpu, through
ggml-python), MLX's mx.fast.rope and ONNX Runtime's RotaryEmbedding (opset 23 and
com.microsoft) return for random vectors. Each faithful kernel holds at long positions with its
own recipe named; each fault of issue 40's table, planted on a real kernel's output or
parameters, is named. The core answers in process (tests/applied/test_api.py sends dumps over
HTTP)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from posenc.schemes.rope import maths
from posenc.schemes.rope.params import RopeParams
from posenc.schemes.rope.recipes import framework
from tests.applied import kernels
from tests.applied.dumps import Dump, analyse, names
from tests.hub_configs import llama_31_rope_scaling, tiny_qwen2_vl_config
from tests.reference import runtimes

pytest.importorskip("ggml", reason="ggml-python is part of the reference extra")
pytest.importorskip("mlx.core", reason="mlx[cpu] is part of the reference extra")
pytest.importorskip("onnxruntime", reason="onnxruntime is part of the reference extra")

FAR = np.arange(1_000_000, 1_000_064)  # where the float32 recipes are 0.03–0.07 rad apart
YARN = {"scaling": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096}
LLAMA3 = {
    "scaling": "llama3",
    "factor": 8.0,
    "original_max_position_embeddings": 8192,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
}


def _image_ids() -> np.ndarray[Any, np.dtype[np.int64]]:
    """Text, a 4 × 6 image (height and width ids apart), text: Qwen2-VL's ids from 1000 on."""
    text = np.arange(1000, 1008)
    rows, columns = np.meshgrid(np.arange(4), np.arange(6), indexing="ij")
    image = np.stack([np.full(24, 1008), 1008 + rows.ravel(), 1008 + columns.ravel()])
    after = np.arange(1014, 1022)
    return np.concatenate([np.stack([text] * 3), image, np.stack([after] * 3)], axis=1)


def _holds(answer: dict[str, Any], recipe: str) -> None:
    measured = answer["measured"]
    assert answer["holds"] is True, (names(answer), measured["recipes"])
    assert measured["recipe"] == recipe, measured["recipes"]
    assert measured["max_angle_error"] <= 4 * measured["resolution"]


# --- transformers -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def llama_far() -> Dump:
    return kernels.llama({"rope_type": "default", "rope_theta": 500000.0}, FAR)


def test_transformers_llama_holds_as_transformers_float32_recipe(llama_far: Dump) -> None:
    answer = analyse(llama_far, d_model=64, base=500000.0, offset=FAR[0])
    _holds(answer, "framework")
    recipes = answer["measured"]["recipes"]
    assert not recipes["exact"]["holds"] and recipes["exact"]["max_angle_error"] > 0.01


def test_transformers_yarn_holds_with_its_attention_factor() -> None:
    rope = {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0}
    dump = kernels.llama({**rope, "original_max_position_embeddings": 4096}, FAR)
    answer = analyse(dump, d_model=64, offset=FAR[0], **YARN)
    _holds(answer, "framework")
    assert answer["measured"]["magnitude"] == pytest.approx(0.1 * np.log(4.0) + 1, rel=1e-6)


def test_transformers_llama3_in_bfloat16_is_not_blamed_for_bfloat16() -> None:
    rope = {"rope_type": "llama3", "rope_theta": 500000.0, **llama_31_rope_scaling()}
    dump = kernels.llama(rope, FAR, dtype="bfloat16")
    answer = analyse(dump, d_model=64, base=500000.0, offset=FAR[0], **LLAMA3)
    _holds(answer, "framework")
    assert answer["measured"]["resolution"] > 1e-3  # bfloat16's, not float32's


def test_transformers_cohere_turns_interleaved_pairs() -> None:
    answer = analyse(kernels.cohere(10000.0, FAR), d_model=32, layout="interleaved")
    _holds(answer, "framework")
    assert answer["measured"]["pairs"] == "interleaved"


def test_transformers_qwen2_vl_holds_for_an_images_three_ids() -> None:
    ids = _image_ids()
    answer = analyse(kernels.qwen2_vl(tiny_qwen2_vl_config(), ids), tiny_qwen2_vl_config())
    _holds(answer, "framework")
    assert answer["expected"]["mrope"] == {"rotary": "chunked", "section": [2, 3, 3]}


def test_a_rope_applied_twice_by_transformers_is_named(llama_far: Dump) -> None:
    import torch
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb

    config = LlamaConfig(
        hidden_size=256,
        num_attention_heads=4,
        head_dim=64,
        rope_parameters={"rope_type": "default", "rope_theta": 500000.0},
        max_position_embeddings=2**21,
    )
    rotary = LlamaRotaryEmbedding(config)
    after = torch.from_numpy(llama_far.after)
    with torch.no_grad():
        cos, sin = rotary(after, torch.from_numpy(FAR)[None])
        twice, _ = apply_rotary_pos_emb(after, after, cos, sin)
    answer = analyse(llama_far.with_after(twice.numpy()), d_model=64, base=500000.0, offset=FAR[0])
    assert answer["holds"] is False
    assert names(answer) == ["double_rotation"]
    assert answer["diagnosis"][0]["evidence"]["recipe"] == "framework"


def test_a_lost_yarn_attention_factor_is_named() -> None:
    rope = {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0}
    dump = kernels.llama({**rope, "original_max_position_embeddings": 4096}, FAR)
    lost = dump.with_after(dump.after / np.float32(0.1 * np.log(4.0) + 1))
    answer = analyse(lost, d_model=64, offset=FAR[0], **YARN)
    assert names(answer) == ["attention_factor_mismatch"]
    evidence = answer["diagnosis"][0]["evidence"]
    assert evidence["fitted_factor"] == pytest.approx(1.0, abs=1e-6)
    assert answer["measured"]["recipe"] == "framework"  # the angles are transformers'


# --- ggml -----------------------------------------------------------------------------------


@pytest.mark.parametrize("layout", ["interleaved", "split"])
def test_ggml_yarn_holds_in_normal_and_neox_modes(layout: str) -> None:
    params = RopeParams(d_model=64, layout=layout, **YARN)  # type: ignore[arg-type]
    x = kernels.vectors((64, 4, 64))
    dump = Dump(x, kernels.ggml_rope(params, x, FAR), 0, FAR)
    answer = analyse(dump, d_model=64, layout=layout, **YARN)
    _holds(answer, "ggml")
    assert answer["measured"]["pairs"] == layout


def test_ggml_with_llamas_factor_tensor_holds() -> None:
    params = RopeParams(d_model=64, base=500000.0, **LLAMA3)  # type: ignore[arg-type]
    x = kernels.vectors((64, 4, 64))
    dump = Dump(x, kernels.ggml_rope(params, x, FAR), 0, FAR)
    _holds(analyse(dump, d_model=64, base=500000.0, **LLAMA3), "ggml")


def test_ggml_mrope_holds_for_an_images_three_ids() -> None:
    ids = _image_ids()
    params = RopeParams(d_model=16, base=1000000.0)
    x = kernels.vectors((ids.shape[1], 4, 16))
    dump = Dump(x, kernels.ggml_mrope(params, x, ids, (2, 3, 3)), 0, ids)
    _holds(analyse(dump, tiny_qwen2_vl_config()), "ggml")


def test_the_other_pairs_turned_by_ggml_normal_mode_are_named() -> None:
    params = RopeParams(d_model=64, base=500000.0)
    x = kernels.vectors((64, 4, 64))
    dump = Dump(x, kernels.ggml_rope(params, x, FAR, mode=kernels.NORMAL), 0, FAR)
    answer = analyse(dump, d_model=64, base=500000.0)
    assert names(answer) == ["pairing_mismatch"]
    assert answer["measured"]["pairs"] == "interleaved" and answer["measured"]["recipe"] == "ggml"


def test_llama3_scaling_missing_in_ggml_is_named() -> None:
    x = kernels.vectors((64, 4, 64))
    dropped = kernels.ggml_rope(RopeParams(d_model=64, base=500000.0), x, FAR)
    answer = analyse(Dump(x, dropped, 0, FAR), d_model=64, base=500000.0, **LLAMA3)
    assert names(answer) == ["scaling_mismatch"]
    assert answer["diagnosis"][0]["evidence"]["fitted_scaling"] == "none"


def test_mrope_height_and_width_rows_dropped_by_ggml_are_named() -> None:
    ids = _image_ids()
    params = RopeParams(d_model=16, base=1000000.0)
    x = kernels.vectors((ids.shape[1], 4, 16))
    temporal_only = kernels.ggml_rope(params, x, ids[0])
    answer = analyse(Dump(x, temporal_only, 0, ids), tiny_qwen2_vl_config())
    assert names(answer) == ["mrope_section_mismatch"]
    evidence = answer["diagnosis"][0]["evidence"]
    assert evidence["pairs"] == [2, 3, 4, 5, 6, 7]  # the height and width sections
    assert set(evidence["measured_rows"]) == {0}


def test_a_partial_rotary_heads_other_dims_turned_by_ggml_are_named() -> None:
    x = kernels.vectors((64, 4, 64))
    whole_head = kernels.ggml_rope(RopeParams(d_model=64), x, FAR)
    answer = analyse(Dump(x, whole_head, 0, FAR), d_model=32)
    assert "partial_rotary" in names(answer) and answer["holds"] is False
    assert answer["measured"]["rotated_dims"] == [0, 64]


def test_a_partial_rotary_head_faithfully_turned_by_ggml_holds() -> None:
    x = kernels.vectors((64, 4, 64))
    partial = kernels.ggml_rope(RopeParams(d_model=64), x, FAR, n_dims=32)
    answer = analyse(Dump(x, partial, 0, FAR), d_model=32)
    _holds(answer, "ggml")
    assert answer["measured"]["rotated_dims"] == [0, 32]


# --- MLX ------------------------------------------------------------------------------------


@pytest.mark.parametrize("traditional", [False, True])
def test_mlx_fast_rope_holds_traditional_or_not(traditional: bool) -> None:
    x = kernels.vectors((1, 4, 64, 64))
    y = kernels.mlx_rope(x, 64, int(FAR[0]), traditional)
    layout = "interleaved" if traditional else "split"
    _holds(analyse(Dump(x, y, 2), d_model=64, layout=layout, offset=FAR[0]), "mlx")


def test_mlx_fast_rope_with_mlx_lms_llama3_freqs_holds() -> None:
    import mlx.core as mx

    params = RopeParams(d_model=64, base=500000.0, **LLAMA3)  # type: ignore[arg-type]
    x = kernels.vectors((1, 4, 64, 64))
    y = np.array(runtimes.mlx_rope(params)(mx.array(x), offset=int(FAR[0])))
    answer = analyse(Dump(x, y, 2), d_model=64, base=500000.0, offset=FAR[0], **LLAMA3)
    _holds(answer, "mlx")


def test_another_base_in_mlx_is_named() -> None:
    x = kernels.vectors((1, 4, 64, 64))
    y = kernels.mlx_rope(x, 64, 4096, False, base=10000.0)
    answer = analyse(Dump(x, y, 2), d_model=64, base=500000.0, offset=4096)
    assert names(answer) == ["base_mismatch"]
    assert answer["diagnosis"][0]["evidence"]["fitted_base"] == 10000.0


def test_a_position_offset_ignored_by_mlx_is_named() -> None:
    x = kernels.vectors((1, 4, 64, 64))
    y = kernels.mlx_rope(x, 64, 0, False)  # the cache holds 1000 tokens: it should be 1000
    answer = analyse(Dump(x, y, 2), d_model=64, offset=1000)
    assert names(answer) == ["offset_mismatch"]
    assert answer["diagnosis"][0]["evidence"]["shift"] == -1000


# --- ONNX Runtime ----------------------------------------------------------------------------


def _caches(params: RopeParams, length: int) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    half = params.d_model // 2
    positions = np.arange(length)
    cos = maths.encode(params, positions, "float32", "cos")
    sin = maths.encode(params, positions, "float32", "sin")
    pick = slice(0, half) if params.layout == "split" else slice(0, None, 2)
    return np.ascontiguousarray(cos[:, pick]), np.ascontiguousarray(sin[:, pick])


@pytest.mark.parametrize(
    ("microsoft", "layout"), [(False, "split"), (True, "interleaved"), (False, "interleaved")]
)
def test_onnx_runtime_rotary_embedding_holds_with_exact_caches(
    microsoft: bool, layout: str
) -> None:
    params = RopeParams(d_model=64, layout=layout)  # type: ignore[arg-type]
    cos, sin = _caches(params, int(FAR[-1]) + 1)
    x = kernels.vectors((1, 4, 64, 64))
    y = kernels.ort_rotary(x, cos, sin, FAR, layout == "interleaved", microsoft)
    _holds(analyse(Dump(x, y, 2, FAR), d_model=64, layout=layout), "exact")


def test_an_angle_table_built_in_bfloat16_is_named() -> None:
    """candle #3698: the table of angles pos·ω held in bfloat16, then turned faithfully."""
    import torch

    params = RopeParams(d_model=64)
    inv_freq, _ = framework.frequencies(replace(params, recipe="framework"), 1)
    positions = np.arange(4096, 4160)
    product = torch.from_numpy(positions)[:, None].float() * torch.from_numpy(inv_freq)
    angle = product.bfloat16().float()
    cos = np.zeros((int(positions[-1]) + 1, 32), np.float32)
    sin = np.zeros_like(cos)
    cos[positions], sin[positions] = angle.cos().numpy(), angle.sin().numpy()
    x = kernels.vectors((1, 4, 64, 64))
    y = kernels.ort_rotary(x, cos, sin, positions, False, False)
    answer = analyse(Dump(x, y, 2, positions), d_model=64)
    assert names(answer) == ["angle_precision"]
    assert 6 <= answer["diagnosis"][0]["evidence"]["implied_bits"] <= 10


@pytest.mark.parametrize("table", ["bfloat16", "float16"])
def test_a_cos_sin_table_held_in_a_narrower_type_than_the_data_is_named(table: str) -> None:
    """A port that keeps transformers' cos and sin in the model's dtype and turns float32 q
    (vLLM's cos_sin_cache.to(dtype)): no pairing keeps float32's lengths, and the table's type
    is named, with the rope it holds."""
    rope = {"rope_type": "llama3", "rope_theta": 500000.0, **llama_31_rope_scaling()}
    dump = kernels.llama(rope, FAR, table=table)
    answer = analyse(dump, d_model=64, base=500000.0, offset=FAR[0], **LLAMA3)
    assert answer["holds"] is False
    assert names(answer) == ["table_precision"], answer["diagnosis"]
    evidence = answer["diagnosis"][0]["evidence"]
    assert evidence["table_dtype"] == table and evidence["values_on_grid"] >= 1000
    assert max(evidence["lengths_kept"].values()) < 0.5  # to float32's resolution
    # The rotations are the model's rope, to the table's resolution, under transformers' recipe
    # (the exact one is as close: the table's rounding is coarser than the recipes' distance).
    measured = answer["measured"]
    assert measured["recipe"] is not None and measured["pairs"] == "split"
    # Read to the table's resolution: two epsilons of its type, not float32's.
    floor = 2.0 ** (2 - (11 if table == "float16" else 8))
    assert floor <= measured["resolution"] < 2 * floor


def test_a_narrower_table_of_another_base_names_both() -> None:
    dump = kernels.llama({"rope_type": "default", "rope_theta": 10000.0}, FAR, table="bfloat16")
    answer = analyse(dump, d_model=64, base=500000.0, offset=FAR[0])
    assert names(answer) == ["table_precision", "base_mismatch"], answer["diagnosis"]


def test_a_float32_kernel_that_is_no_rotation_is_not_taken_for_a_narrower_table(
    llama_far: Dump,
) -> None:
    noise = kernels.vectors(llama_far.after.shape, seed=1) * np.float32(2.0**-10)
    turned = llama_far.with_after(llama_far.after + noise)
    answer = analyse(turned, d_model=64, base=500000.0, offset=FAR[0])
    assert names(answer) == ["not_a_rotation"]


# --- any width, base, scaling, dtype and position ---------------------------------------------


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    half=st.integers(1, 48),
    base=st.floats(100.0, 1e7),
    scaling=st.sampled_from(["none", "linear", "yarn", "llama3"]),
    layout=st.sampled_from(["split", "interleaved"]),
    dtype=st.sampled_from(["float32", "float16"]),
    last=st.integers(2**16, 2**24),
    seed=st.integers(0, 2**16),
)
def test_ggml_holds_for_any_rope_at_any_position(
    half: int, base: float, scaling: str, layout: str, dtype: str, last: int, seed: int
) -> None:
    scaled: dict[str, Any] = {}
    if scaling != "none":
        scaled = {"factor": 8.0}
    if scaling in ("yarn", "llama3"):
        scaled["original_max_position_embeddings"] = 4096
    query: dict[str, Any] = {
        "d_model": 2 * half, "base": base, "layout": layout, "scaling": scaling, **scaled
    }  # fmt: skip
    params = RopeParams(**query)
    rng = np.random.default_rng(seed)
    positions = np.unique(np.concatenate([rng.integers(0, last, 31), [last]])).astype(np.int64)
    x = kernels.vectors((len(positions), 3, 2 * half), seed).astype(dtype)
    y = kernels.ggml_rope(params, x.astype(np.float32), positions).astype(dtype)
    answer = analyse(Dump(x, y, 0, positions), **query)
    assert answer["holds"] is True, (names(answer), answer["measured"]["recipes"])
    measured = answer["measured"]
    assert "ggml" in [measured["recipe"], *measured["also_within"]]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    half=st.integers(1, 48),
    base=st.floats(100.0, 1e7),
    factor=st.sampled_from([1.0, 2.0, 8.0]),
    traditional=st.booleans(),
    dtype=st.sampled_from(["float32", "float16", "bfloat16"]),
    offset=st.integers(0, 2**24 - 32),
    seed=st.integers(0, 2**16),
)
def test_mlx_holds_for_any_rope_at_any_offset(
    half: int, base: float, factor: float, traditional: bool, dtype: str, offset: int, seed: int
) -> None:
    import mlx.core as mx

    x = mx.array(kernels.vectors((1, 3, 32, 2 * half), seed)).astype(getattr(mx, dtype))
    y = mx.fast.rope(
        x, 2 * half, traditional=traditional, base=base, scale=1 / factor, offset=offset
    )
    if dtype == "bfloat16":
        dump = Dump(np.array(x.view(mx.uint16)), np.array(y.view(mx.uint16)), 2, dtype=dtype)
    else:
        dump = Dump(np.array(x), np.array(y), 2)
    scaled = {"scaling": "linear", "factor": factor} if factor != 1 else {}
    layout = "interleaved" if traditional else "split"
    answer = analyse(dump, d_model=2 * half, base=base, layout=layout, offset=offset, **scaled)
    assert answer["holds"] is True, (names(answer), answer["measured"]["recipes"])
    measured = answer["measured"]
    assert "mlx" in [measured["recipe"], *measured["also_within"]]

"""POST /v1/rope/vision gives the cos/sin a vision tower's own rotary module (transformers 5.23)
applies, patch by patch in the order its attention sees them: the framework recipe within 1 ulp
wherever the frequency is torch's, the exact one within the float32 rounding of the formula; the
towers not answered, and grids too large, are refused by name."""

from __future__ import annotations

import tracemalloc
from typing import Any

import mpmath
import numpy as np
import numpy.typing as npt
import pytest

from posenc.declare import Limits
from posenc.errors import LimitError
from posenc.schemes.rope.params import RopeParams
from posenc.schemes.rope.recipes.framework import frequencies
from posenc.schemes.rope.vision import answer as vision_answer
from posenc.schemes.rope.vision.families import UNANSWERED
from tests.conftest import Client
from tests.reference.test_framework_recipe import ulps
from tests.reference.transformers_vision import pair_frequencies, reference

# Per family: configs as the Hub writes them (or the config class's defaults alone) and grids.
_QWEN2_5 = {
    "hidden_size": 1280,
    "num_heads": 16,
    "window_size": 112,
    "patch_size": 14,
    "spatial_merge_size": 2,
}
CASES: dict[str, tuple[dict[str, Any], list[list[int]]]] = {
    "qwen2_vl": (
        {"model_type": "qwen2_vl", "vision_config": {"embed_dim": 1280, "num_heads": 16}},
        [[1, 2, 2], [1, 4, 6], [3, 6, 4], [1, 36, 50]],
    ),
    "qwen2_vl defaults": ({"model_type": "qwen2_vl"}, [[2, 8, 8]]),
    # Windows of 4 merge blocks a side: grids inside one window, exactly two, cut short.
    "qwen2_5_vl": (
        {"model_type": "qwen2_5_vl", "vision_config": _QWEN2_5},
        [[1, 4, 6], [1, 16, 8], [2, 20, 12], [1, 34, 50], [4, 10, 18]],
    ),
    "qwen2_5_vl θ": (
        {"model_type": "qwen2_5_vl", "vision_config": {**_QWEN2_5, "rope_theta": 500.0}},
        [[1, 18, 10]],
    ),
    "qwen2_5_vl defaults": ({"model_type": "qwen2_5_vl"}, [[1, 12, 20]]),
    "qwen3_vl": ({"model_type": "qwen3_vl"}, [[1, 4, 6], [2, 30, 22]]),
    "qwen3_vl_moe": ({"model_type": "qwen3_vl_moe"}, [[1, 8, 6]]),
    "glm4v": ({"model_type": "glm4v"}, [[1, 4, 6], [2, 12, 18]]),
    "glm4v_moe": ({"model_type": "glm4v_moe"}, [[1, 8, 6]]),
    "glm_ocr": ({"model_type": "glm_ocr"}, [[1, 10, 14]]),
    "pixtral": (
        {"model_type": "pixtral", "head_dim": 64, "hidden_size": 1024, "rope_theta": 10000.0},
        [[1, 1, 1], [1, 5, 7], [2, 3, 3], [1, 64, 48]],
    ),
    "mistral3": (
        {
            "model_type": "mistral3",
            "vision_config": {"model_type": "pixtral", "head_dim": 64, "rope_theta": 10000.0},
        },
        [[1, 110, 72]],
    ),
    "llava (Pixtral-12B)": (
        {
            "model_type": "llava",
            "vision_config": {"model_type": "pixtral", "head_dim": 64, "image_size": 1024},
        },
        [[1, 4, 9]],
    ),
    "llama4": (
        {
            "model_type": "llama4",
            "vision_config": {
                "hidden_size": 1408,
                "num_attention_heads": 16,
                "image_size": 336,
                "patch_size": 14,
                "rope_theta": 10000,
            },
        },
        [[1, 24, 24]],
    ),
    "llama4 defaults": ({"model_type": "llama4"}, [[1, 32, 32]]),
    # Qwen2.5-Omni-7B's tower, in its thinker: Qwen2.5-VL's windows.
    "qwen2_5_omni": (
        {"model_type": "qwen2_5_omni", "thinker_config": {"vision_config": _QWEN2_5}},
        [[1, 4, 6], [2, 20, 12], [1, 34, 50]],
    ),
    "qwen2_5_omni defaults": ({"model_type": "qwen2_5_omni"}, [[1, 12, 20]]),
    "qwen3_omni_moe": (
        {
            "model_type": "qwen3_omni_moe",
            "thinker_config": {
                "vision_config": {"hidden_size": 1152, "num_heads": 16, "patch_size": 16}
            },
        },
        [[1, 4, 6], [2, 30, 22]],
    ),
    "qwen3_omni_moe defaults": ({"model_type": "qwen3_omni_moe"}, [[1, 8, 6]]),
    "exaone4_5": ({"model_type": "exaone4_5"}, [[1, 16, 8], [2, 20, 12]]),
    "exaone4_5 windows": (
        {"model_type": "exaone4_5", "vision_config": {**_QWEN2_5, "window_size": 56}},
        [[1, 14, 10]],
    ),
    "ernie4_5_vl_moe": (
        {"model_type": "ernie4_5_vl_moe", "vision_config": {"hidden_size": 1280, "num_heads": 16}},
        [[1, 4, 6], [2, 12, 18]],
    ),
    "cohere_compass": ({"model_type": "cohere_compass"}, [[1, 4, 6], [1, 30, 22]]),
    # LFM3-VL's vision config defaults θ to 10^6.
    "lfm3_vl": ({"model_type": "lfm3_vl"}, [[1, 4, 6], [2, 32, 24]]),
    "lfm3_vl θ": (
        {"model_type": "lfm3_vl", "vision_config": {"rope_parameters": {"rope_theta": 10000.0}}},
        [[1, 8, 6]],
    ),
    # Blocks of 1, whatever spatial_merge_size says: odd grids too.
    "paddleocr_vl": (
        {
            "model_type": "paddleocr_vl",
            "vision_config": {"hidden_size": 1152, "num_attention_heads": 16, "patch_size": 14},
        },
        [[1, 1, 1], [1, 5, 7], [1, 28, 40]],
    ),
    "kimi_k25": ({"model_type": "kimi_k25"}, [[1, 1, 1], [1, 5, 7], [3, 6, 4], [1, 32, 44]]),
    "kimi_k25 narrow": (
        {"model_type": "kimi_k25", "vision_config": {"hidden_size": 64, "num_attention_heads": 4}},
        [[1, 3, 9]],
    ),
}


def _post(client: Client, config: dict[str, Any], grid: list[int], **rest: str) -> dict[str, Any]:
    response = client.post("/v1/rope/vision", json={"config": config, "grid": grid, **rest})
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def _expanded(vision: dict[str, Any], per_pair: npt.NDArray[Any]) -> npt.NDArray[Any]:
    if vision["layout"] == "interleaved":
        return np.repeat(per_pair, 2)
    return np.concatenate([per_pair, per_pair])


def _same_frequencies(config: dict[str, Any], vision: dict[str, Any]) -> npt.NDArray[np.bool_]:
    """Columns whose frequency is bit-identical to the module's (§6.3 bounds cos/sin there)."""
    ours, _ = frequencies(RopeParams(**vision["rope"]), 1)
    same = ulps(ours[vision["frequency"]], pair_frequencies(config)) == 0
    return _expanded(vision, same)


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_framework_table_is_the_tower_s_rotary_module_s_in_its_order(
    client: Client, case: str
) -> None:
    config, grids = CASES[case]
    for grid in grids:
        answer = _post(client, config, grid, recipe="framework")
        cos, sin, ids = reference(config, grid)
        assert np.array_equal(answer["positions"], ids), grid
        table = np.array(answer["table"], dtype=np.float32)
        assert table.shape == (2, *cos.shape) and answer["shape"] == list(table.shape)
        same = _same_frequencies(config, answer["vision"])
        assert same.mean() > 0.5, "too few frequencies are torch's for the bound to say much"
        worst = max(ulps(table[0], cos)[:, same].max(), ulps(table[1], sin)[:, same].max())
        assert worst <= 1, (grid, worst)


@pytest.mark.parametrize("case", sorted(CASES))
def test_framework_angles_are_torch_s_float32_products(client: Client, case: str) -> None:
    config, grids = CASES[case]
    answer = _post(client, config, grids[0], recipe="framework", component="angle")
    vision, ids = answer["vision"], np.array(answer["positions"])
    theirs = pair_frequencies(config)
    chosen = ids[:, vision["axis"]].astype(np.float32)
    expected = (chosen * theirs[None, :]).astype(np.float32)
    same = ulps(frequencies(RopeParams(**vision["rope"]), 1)[0][vision["frequency"]], theirs) == 0
    angles = np.array(answer["table"], dtype=np.float32)
    assert np.array_equal(angles[:, same], expected[:, same])


def _exact(vision: dict[str, Any], ids: npt.NDArray[np.int64]) -> tuple[Any, Any]:
    """cos and sin of id · θ^(-2i/d) for every patch and pair, to 40 digits (mpf objects)."""
    rope, d = vision["rope"], vision["rope"]["d_model"]
    cos, sin = {}, {}
    with mpmath.workdps(40):
        omega = [mpmath.mpf(rope["base"]) ** (-2 * mpmath.mpf(i) / d) for i in vision["frequency"]]
        for position in np.unique(ids):
            for pair, w in enumerate(omega):
                angle = int(position) * w
                cos[position, pair], sin[position, pair] = mpmath.cos(angle), mpmath.sin(angle)
    shape = (len(ids), len(omega))
    out = [np.empty(shape, dtype=object), np.empty(shape, dtype=object)]
    for row, patch in enumerate(ids):
        for pair, axis in enumerate(vision["axis"]):
            key = (patch[axis], pair)
            out[0][row, pair], out[1][row, pair] = cos[key], sin[key]
    return out[0], out[1]


def _ulps_from_exact(ours: npt.NDArray[np.float32], exact: Any) -> float:
    """|ours − exact| in float32 ulps of the exact value."""
    worst = 0.0
    for value, truth in zip(ours.reshape(-1), exact.reshape(-1), strict=True):
        magnitude = abs(float(truth))
        ulp = float(np.spacing(np.float32(magnitude))) if magnitude else 2.0**-149
        worst = max(worst, float(abs(mpmath.mpf(float(value)) - truth)) / ulp)
    return worst


@pytest.mark.parametrize(
    ("case", "grid"),
    [
        ("qwen2_5_vl", [1, 16, 8]),
        ("pixtral", [1, 12, 20]),
        ("llama4", [1, 24, 24]),
        ("glm4v", [1, 8, 6]),
        ("qwen2_5_omni", [1, 4, 6]),
        ("lfm3_vl", [1, 4, 6]),
        ("paddleocr_vl", [1, 5, 7]),
        ("kimi_k25", [1, 5, 7]),
    ],
)
def test_the_exact_table_is_the_formula_rounded_once(
    client: Client, case: str, grid: list[int]
) -> None:
    config, _ = CASES[case]
    answer = _post(client, config, grid)
    vision, ids = answer["vision"], np.array(answer["positions"])
    _, _, theirs = reference(config, grid)
    assert np.array_equal(ids, theirs)
    table = np.array(answer["table"], dtype=np.float32)
    half = vision["head_dim"] // 2
    pairs = table[..., 0::2] if vision["layout"] == "interleaved" else table[..., :half]
    cos, sin = _exact(vision, ids)
    assert _ulps_from_exact(pairs[0], cos) <= 0.5 + 2**-20
    assert _ulps_from_exact(pairs[1], sin) <= 0.5 + 2**-20
    # and the module's own table is that formula in float32 (the pairs read the same ids)
    module_cos, _, _ = reference(config, grid)
    assert np.abs(table[0] - module_cos).max() < 1e-4


def test_components_are_the_parts_of_cos_sin_and_float64_keeps_its_digits(
    client: Client,
) -> None:
    config, grids = CASES["qwen2_5_vl"]
    grid = grids[2]
    both = np.array(_post(client, config, grid, dtype="float64")["table"])
    cos = np.array(_post(client, config, grid, dtype="float64", component="cos")["table"])
    sin = np.array(_post(client, config, grid, dtype="float64", component="sin")["table"])
    assert np.array_equal(both[0], cos) and np.array_equal(both[1], sin)
    angle = _post(client, config, grid, dtype="float64", component="angle")
    half = np.array(angle["table"])
    assert angle["shape"] == [both.shape[1], both.shape[2] // 2]
    assert np.abs(np.cos(np.concatenate([half, half], axis=1)) - cos).max() < 1e-14
    narrow = np.array(_post(client, config, grid)["table"], dtype=np.float32)
    assert np.array_equal(narrow, both.astype(np.float32))


@pytest.mark.parametrize("model_type", sorted(UNANSWERED))
def test_a_tower_not_answered_is_refused_by_name(client: Client, model_type: str) -> None:
    body = {"config": {"model_type": model_type}, "grid": [1, 4, 4]}
    response = client.post("/v1/rope/vision", json=body)
    assert response.status_code == 422
    assert response.json()["detail"].startswith(f"config.model_type: {model_type!r}")


@pytest.mark.parametrize(
    ("config", "grid", "field"),
    [
        ({"model_type": "gpt2"}, [1, 4, 4], "config.model_type"),
        ({"model_type": "llava"}, [1, 4, 4], "config.model_type"),  # a CLIP tower: no rope
        ({"vision_config": {}}, [1, 4, 4], "config.model_type"),
        ({"model_type": "qwen2_vl"}, [1, 5, 4], "grid"),
        ({"model_type": "llama4"}, [1, 24, 24], "grid"),  # its grid is 32 × 32
        (
            {"model_type": "qwen2_vl", "vision_config": {"rope_scaling": {"rope_type": "linear"}}},
            [1, 4, 4],
            "config.vision_config.rope_scaling.rope_type",
        ),
        (
            {"model_type": "qwen2_vl", "vision_config": {"rope_parameters": {"rope_type": "yarn"}}},
            [1, 4, 4],
            "config.vision_config.rope_parameters.rope_type",
        ),
        (
            {"model_type": "qwen2_vl", "vision_config": {"embed_dim": 1281}},
            [1, 4, 4],
            "config.vision_config.num_heads",
        ),
        (
            {"model_type": "pixtral", "head_dim": 66},
            [1, 4, 4],
            "config.head_dim",
        ),
        (
            {"model_type": "qwen2_5_vl", "vision_config": {"window_size": 20}},
            [1, 4, 4],
            "config.vision_config.window_size",
        ),
        (
            {"model_type": "qwen3_vl", "vision_config": {"rope_theta": 0.5}},
            [1, 4, 4],
            "config.vision_config.rope_theta",
        ),
        (
            {"model_type": "qwen2_5_omni", "thinker_config": {"vision_config": [1]}},
            [1, 4, 4],
            "config.thinker_config.vision_config",
        ),
        (
            {"model_type": "qwen3_omni_moe", "thinker_config": "thinker"},
            [1, 4, 4],
            "config.thinker_config",
        ),
        (
            {"model_type": "qwen3_omni_moe", "thinker_config": {"vision_config": {"num_heads": 7}}},
            [1, 4, 4],
            "config.thinker_config.vision_config.num_heads",
        ),
        (
            {"model_type": "kimi_k25", "vision_config": {"rope_parameters": {"rope_type": "yarn"}}},
            [1, 4, 4],
            "config.vision_config.rope_parameters.rope_type",
        ),
    ],
)
def test_a_config_or_grid_the_tower_cannot_take_is_refused_naming_the_field(
    client: Client, config: dict[str, Any], grid: list[int], field: str
) -> None:
    response = client.post("/v1/rope/vision", json={"config": config, "grid": grid})
    assert response.status_code == 422, response.text[:200]
    assert response.json()["detail"].startswith(f"{field}:"), response.json()["detail"]


def test_a_huge_grid_is_refused_before_anything_is_allocated(client: Client) -> None:
    body = {"config": {"model_type": "qwen2_vl"}, "grid": [2**20, 2**20, 2**20]}
    response = client.post("/v1/rope/vision", json=body)
    assert response.status_code == 422
    assert response.json()["detail"].startswith("grid:")
    limits = Limits(max_values=2**24, max_work=2**40, max_bytes=2**30)
    tracemalloc.start()
    try:
        with pytest.raises(LimitError):
            vision_answer.size(body, limits)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2**20


def test_the_declared_cost_holds_the_answer_s_peak() -> None:
    limits = Limits(max_values=2**26, max_work=2**50, max_bytes=2**34)
    for recipe in ("exact", "framework"):
        body = {
            "config": {"model_type": "qwen2_5_vl", "vision_config": _QWEN2_5},
            "grid": [2, 64, 96],
            "recipe": recipe,
        }
        declared = vision_answer.size(body, limits).cost.bytes
        tracemalloc.start()
        try:
            vision_answer.answer(body, limits)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert peak <= declared, (recipe, peak, declared)


def test_a_window_wider_than_the_grid_leaves_the_merge_order(client: Client) -> None:
    """One window covers the grid: the order is the merge blocks' (and no padding the size of
    the window is made, as transformers' would be)."""
    wide = {**_QWEN2_5, "window_size": 2**31 - 1}
    config = {"model_type": "qwen2_5_vl", "vision_config": wide}
    plain = {"model_type": "qwen2_vl", "vision_config": {"embed_dim": 1280, "num_heads": 16}}
    windowed = _post(client, config, [2, 8, 12])
    assert windowed["vision"]["window"] == (2**31 - 1) // 28
    assert windowed["positions"] == _post(client, plain, [2, 8, 12])["positions"]
    assert windowed["table"] == _post(client, plain, [2, 8, 12])["table"]

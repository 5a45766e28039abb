"""POST /v1/rope/positions gives the ids transformers' own get_rope_index gives, for every
multimodal-rope model type, on many generated layouts; and refuses by name what it does not
model."""

from __future__ import annotations

import io
import random
from typing import Any

import numpy as np
import pytest

from posenc.schemes.rope.mrope.families import MROPE_FAMILIES, UNANSWERED
from tests.conftest import Client
from tests.reference.transformers_mrope import (
    MROPE_MODEL_TYPES,
    NOT_EXPRESSIBLE,
    hub_config,
    reference_positions,
)

LAYOUTS_PER_TYPE = 40
ANSWERED = sorted(set(MROPE_MODEL_TYPES) & set(MROPE_FAMILIES) - set(UNANSWERED))


def _layout(rng: random.Random, model_type: str, config: dict[str, Any]) -> list[dict[str, Any]]:
    """Text, images and videos in a random order, as a processor would lay them out: vision
    segments of one kind are never adjacent (the processor's start and end tokens are text)."""
    family = MROPE_FAMILIES[model_type]
    root = config.get(family.config_root, {}) if family.config_root else config
    merge = root.get("vision_config", {}).get("spatial_merge_size", 2)
    temporal = root.get("vision_config", {}).get("temporal_merge_size", 2)
    # Families that scan token ids read the text token on each side of a medium as its start
    # and end marker: each needs one of its own.
    least = 2 if family.markers else 1
    segments: list[dict[str, Any]] = []
    for _ in range(rng.randint(1, 4)):
        if not segments or rng.random() < 0.6 or "text" not in segments[-1] or family.markers:
            segments.append({"text": rng.randint(least, 9)})
        grid = [1, merge * rng.randint(1, 6), merge * rng.randint(1, 6)]
        if rng.random() < 0.5 or family.video == "none":
            segments.append({"image": grid})
            continue
        frames = rng.randint(1, 5)
        if family.temporal_merge:
            frames = temporal * rng.randint(1, 3)
        video: dict[str, Any] = {"video": [frames, *grid[1:]]}
        if rng.random() < 0.8:
            video["second_per_grid_t"] = rng.choice([0.5, 1.0, 2.0, 0.7, 1 / 3, 0.25, 1.5])
        if family.video == "per_frame" and rng.random() < 0.7:
            video["frame_prefix"] = rng.randint(1, 4)
            video["frame_suffix"] = rng.randint(0, 2)
        segments.append(video)
    if rng.random() < 0.7 or family.markers:
        segments.append({"text": rng.randint(1, 9)})
    return segments


@pytest.mark.parametrize("model_type", ANSWERED)
def test_the_ids_are_get_rope_index_s_on_generated_layouts(client: Client, model_type: str) -> None:
    config = hub_config(model_type)
    rng = random.Random(model_type)
    for _ in range(LAYOUTS_PER_TYPE):
        segments = _layout(rng, model_type, config)
        expected, delta = reference_positions(config, segments)
        response = client.post("/v1/rope/positions", json={"config": config, "segments": segments})
        assert response.status_code == 200, (segments, response.text)
        answer = response.json()
        assert answer["model_type"] == model_type
        got = np.array(answer["position_ids"], dtype=np.int64)
        assert got.shape == expected.shape, segments
        assert np.array_equal(got, expected), (segments, got, expected)
        assert answer["next_position_delta"] == delta, segments
    # format=npy: the same ids as int64 (3, n), the delta in a header.
    body = {"config": config, "segments": segments}
    npy = client.post("/v1/rope/positions?format=npy", json=body)
    assert npy.status_code == 200 and npy.headers["content-type"] == "application/x-npy"
    array = np.load(io.BytesIO(npy.content), allow_pickle=False)
    assert array.dtype == np.int64 and np.array_equal(array, expected)
    assert npy.headers["x-array-shape"] == f"3,{expected.shape[1]}"
    assert int(npy.headers["x-next-position-delta"]) == delta


def test_several_sequences_each_get_their_own_ids(client: Client) -> None:
    config = hub_config("qwen2_5_vl")
    first: list[dict[str, Any]] = [
        {"text": 3},
        {"video": [4, 4, 6], "second_per_grid_t": 0.7},
        {"text": 2},
    ]
    second: list[dict[str, Any]] = [{"image": [1, 6, 4]}, {"text": 5}]
    answer = client.post(
        "/v1/rope/positions", json={"config": config, "sequences": [first, second]}
    ).json()
    for segments, got in zip((first, second), answer["sequences"], strict=True):
        expected, delta = reference_positions(config, segments)
        assert np.array_equal(np.array(got["position_ids"]), expected)
        assert got["next_position_delta"] == delta
    assert "position_ids" not in answer  # only a single sequence's ids are also at the top


def test_every_multimodal_type_of_transformers_is_answered_or_refused_by_name(
    client: Client,
) -> None:
    known = set(MROPE_MODEL_TYPES) | set(NOT_EXPRESSIBLE)
    assert known <= set(MROPE_FAMILIES) | set(UNANSWERED), known - set(MROPE_FAMILIES)
    for model_type in sorted(UNANSWERED):
        response = client.post(
            "/v1/rope/positions",
            json={"config": {"model_type": model_type}, "segments": [{"text": 1}]},
        )
        assert response.status_code == 422
        assert response.json()["detail"].startswith("config.model_type:"), response.text


@pytest.mark.parametrize(
    ("config", "segments", "field"),
    [
        ({"model_type": "llama"}, [{"text": 1}], "config.model_type"),
        ({"model_type": "qwen2_vl"}, [{"image": [1, 3, 4]}], "segments[0].image"),
        ({"model_type": "qwen2_vl"}, [{"image": [1, 2, 2]}, {"image": [1, 2, 2]}], "segments[1]"),
        (
            {"model_type": "qwen2_vl"},
            [{"video": [2, 2, 2], "frame_prefix": 1}],
            "segments[0].frame_prefix",
        ),
        (
            {"model_type": "qwen3_vl"},
            [{"video": [2, 2, 2], "frame_prefix": 0, "frame_suffix": 0}],
            "segments[0].frame_prefix",
        ),
        ({"model_type": "ernie4_5_vl_moe"}, [{"video": [3, 2, 2]}], "segments[0].video"),
        ({"model_type": "qwen2_vl"}, [{"text": 2**30}], "segments"),
        ({"model_type": "qwen2_5_omni"}, [{"image": [1, 2, 2]}, {"text": 1}], "segments[0]"),
        (
            {"model_type": "qwen2_5_omni"},
            [{"text": 1}, {"image": [1, 2, 2]}, {"text": 1}, {"image": [1, 2, 2]}, {"text": 1}],
            "segments[3]",
        ),
        ({"model_type": "glm_image"}, [{"text": 1}, {"video": [1, 2, 2]}], "segments[1].video"),
        # Qwen2.5-Omni resumes at the largest id + 1: every video's temporal reach adds up.
        (
            {"model_type": "qwen2_5_omni", "thinker_config": {"position_id_per_seconds": 1e6}},
            [
                {"text": 1},
                {"video": [2, 2, 2], "second_per_grid_t": 1500},
                {"text": 2},
                {"video": [2, 2, 2], "second_per_grid_t": 1500},
                {"text": 1},
            ],
            "segments",
        ),
        # The segment the body was meant as is the one named, not the first choice's key.
        (
            {"model_type": "qwen2_vl"},
            [{"video": [2, 2, 2], "frame_prefix": -1}],
            "segments[0].frame_prefix",
        ),
        (
            {"model_type": "qwen2_vl", "rope_scaling": {"mrope_section": [16, 24]}},
            [{"text": 1}],
            "config.rope_scaling.mrope_section",
        ),
    ],
)
def test_a_layout_transformers_cannot_read_is_a_422_naming_the_field(
    client: Client, config: dict[str, Any], segments: list[dict[str, Any]], field: str
) -> None:
    response = client.post("/v1/rope/positions", json={"config": config, "segments": segments})
    assert response.status_code == 422, response.text
    assert response.json()["detail"].startswith(field + ":"), response.text


def test_a_config_nested_past_any_text_model_s_is_read_without_recursing_into_it(
    client: Client,
) -> None:
    deep = '{"a": 1}'
    for _ in range(1000):  # orjson takes 1024 levels; Python's recursion stops near 1000
        deep = '{"a": ' + deep + "}"
    body = '{"model_type": "qwen2_vl", "head_dim": 128, "x": ' + deep + "}"
    response = client.post(
        "/v1/rope/config", content=body, headers={"content-type": "application/json"}
    )
    assert response.status_code == 200, response.text
    assert response.json()["mrope"]["section"] == [16, 24, 24]


@pytest.mark.parametrize(
    ("path", "body", "param"),
    [
        ("/v1/rope/positions?offset=3", {}, "offset"),  # the body carries everything else
        ("/v1/rope/positions?format=csv", {}, "format"),
        ("/v1/rope/positions?format=npy", {"component": "cos"}, "format"),  # ids alone
        ("/v1/rope/positions?format=npy&format=npy", {"sequences": [[{"text": 1}]]}, "format"),
        ("/v1/rope/config?format=npy", None, "format"),  # JSON only
    ],
)
def test_a_query_parameter_is_refused_not_ignored(
    client: Client, path: str, body: dict[str, Any] | None, param: str
) -> None:
    config = {"model_type": "qwen2_vl", "head_dim": 128}
    given = config if body is None else {"config": config, "segments": [{"text": 1}], **body}
    if "sequences" in given:
        del given["segments"]
    response = client.post(path, json=given)
    assert response.status_code == 422, response.text
    assert response.json()["detail"].startswith(f"{param}:"), response.text


@pytest.mark.parametrize(
    "body",
    [
        # A long per-frame video: its frames' ids are assembled from several copies.
        {
            "config": {"model_type": "qwen3_vl"},
            "segments": [{"video": [200_000, 2, 2], "frame_prefix": 0, "frame_suffix": 1}],
        },
        # Many small runs: their Python objects outweigh their ids.
        {
            "config": {"model_type": "qwen2_vl"},
            "segments": [{"text": 1}, {"image": [1, 2, 2]}] * 10_000,
        },
        # Several sequences with their tables: each held, one computed at a time.
        {
            "config": hub_config("qwen2_vl"),
            "sequences": [[{"text": 40}, {"image": [1, 8, 8]}]] * 20,
            "component": "cos_sin",
            "recipe": "framework",
        },
    ],
    ids=["per-frame video", "many runs", "sequences with tables"],
)
def test_the_declared_cost_holds_the_measured_peak(body: dict[str, Any]) -> None:
    import tracemalloc

    import orjson

    from posenc.declare import Limits
    from posenc.schemes.rope.mrope import answer

    limits = Limits(2**24, 2 * 10**9, 2**32)
    declared = answer.size(body, limits).cost.bytes
    tracemalloc.start()
    try:
        orjson.dumps(answer.positions(body, limits), option=orjson.OPT_SERIALIZE_NUMPY)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak <= declared, (peak, declared)
    # And not so loose that a modest request is refused: an order of magnitude at most (the
    # table's cost is the rope's general bound for listed positions, with its scratch).
    assert declared <= 16 * peak + 32 * 2**20, (peak, declared)

"""POST /v1/rope/positions/verify: each diagnosis fires on ids built the way the reported bugs
built them, and stays silent on the model's own ids (transformers' get_rope_index)."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from tests.conftest import Client
from tests.reference.transformers_mrope import hub_config, reference_positions

QWEN25 = hub_config("qwen2_5_vl")
QWEN2 = hub_config("qwen2_vl")
QWEN3 = hub_config("qwen3_vl")
# Text, an image, text, a video whose temporal ids run past its grid, text.
LAYOUT: list[dict[str, Any]] = [
    {"text": 4},
    {"image": [1, 4, 6]},
    {"text": 3},
    {"video": [6, 4, 4], "second_per_grid_t": 2.0},
    {"text": 5},
]


def _verify(
    client: Client, config: dict[str, Any], ids: npt.NDArray[Any], **body: Any
) -> dict[str, Any]:
    body.setdefault("segments", LAYOUT)
    body = {key: value for key, value in body.items() if value is not None}
    response = client.post(
        "/v1/rope/positions/verify",
        json={"config": config, "position_ids": np.asarray(ids).tolist(), **body},
    )
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def _names(answer: dict[str, Any]) -> list[str]:
    return [finding["name"] for finding in answer["diagnosis"]]


def _transformers_4_ids(segments: list[dict[str, Any]], config: dict[str, Any]) -> Any:
    """Qwen2.5-VL's get_rope_index as transformers 4 wrote it (and vLLM): every run starts at
    the largest id so far + 1; frames at int(index · second_per_grid_t · tokens_per_second)."""
    merge = config["vision_config"]["spatial_merge_size"]
    per_second = config["vision_config"]["tokens_per_second"]
    parts: list[npt.NDArray[np.int64]] = []
    for segment in segments:
        start = int(max(part.max() for part in parts)) + 1 if parts else 0
        if "text" in segment:
            parts.append(np.tile(np.arange(segment["text"]) + start, (3, 1)))
            continue
        kind = "image" if "image" in segment else "video"
        t, h, w = segment[kind]
        h, w = h // merge, w // merge
        seconds = segment.get("second_per_grid_t", 1.0) if kind == "video" else 0.0
        times = (np.arange(t, dtype=np.float32) * np.float32(seconds * per_second)).astype(int)
        grid = np.stack(np.meshgrid(times, np.arange(h), np.arange(w), indexing="ij"))
        parts.append(grid.reshape(3, -1) + start)
    return np.concatenate(parts, axis=1)


def test_the_model_s_own_ids_are_equal_and_no_finding_fires(client: Client) -> None:
    for config in (QWEN25, QWEN2, QWEN3):
        ids, delta = reference_positions(config, LAYOUT)
        answer = _verify(client, config, ids)
        assert answer["equal"] and answer["diagnosis"] == [] and answer["first_difference"] is None
        steps = np.arange(ids.shape[1], ids.shape[1] + 3) + delta
        decoded = np.concatenate([ids, np.tile(steps, (3, 1))], axis=1)
        answer = _verify(client, config, decoded, decode_steps=3)
        assert answer["equal"] and answer["diagnosis"] == []


def test_text_resuming_at_max_plus_one_is_named(client: Client) -> None:
    ids = _transformers_4_ids(LAYOUT, QWEN25)
    expected, _ = reference_positions(QWEN25, LAYOUT)
    assert ids.shape == expected.shape and not np.array_equal(ids, expected)
    answer = _verify(client, QWEN25, ids)
    assert _names(answer) == ["text_resumes_at_max_plus_one"]
    (finding,) = answer["diagnosis"]
    assert finding["evidence"]["segment"] == {"sequence": 0, "segment": 4}
    assert answer["first_difference"]["token"] == finding["evidence"]["token"]


def test_frames_on_the_frame_index_clock_are_named(client: Client) -> None:
    """A Qwen2.5-VL port that kept Qwen2-VL's get_rope_index: frames one id apart."""
    ids, _ = reference_positions({**QWEN2, "vision_config": QWEN25["vision_config"]}, LAYOUT)
    answer = _verify(client, QWEN25, ids)
    assert _names(answer) == ["temporal_spacing"]
    assert answer["diagnosis"][0]["evidence"]["fits"] == "the frame index"


def test_frames_on_another_rate_are_named_with_the_rate_that_fits(client: Client) -> None:
    """tokens_per_second read from the class default (4) where the checkpoint says 2."""
    other = {**QWEN25, "vision_config": {**QWEN25["vision_config"], "tokens_per_second": 4}}
    ids, _ = reference_positions(other, LAYOUT)
    answer = _verify(client, QWEN25, ids)
    assert _names(answer) == ["temporal_spacing"]
    assert answer["diagnosis"][0]["evidence"]["fits"] == "4 ids a second"


def test_height_and_width_exchanged_are_named(client: Client) -> None:
    """A port that wrote the width ids in the height row and the height ids in the width row."""
    ids, _ = reference_positions(QWEN2, LAYOUT)
    vision = np.zeros(ids.shape[1], bool)
    vision[4:10] = vision[13:37] = True  # the image's 4·6/4 tokens and the video's 6·4·4/4
    exchanged = ids.copy()
    exchanged[1, vision], exchanged[2, vision] = ids[2, vision], ids[1, vision]
    answer = _verify(client, QWEN2, exchanged)
    assert _names(answer) == ["height_width_swapped"]


def test_a_missing_spatial_merge_is_named(client: Client) -> None:
    unmerged = {**QWEN2, "vision_config": {**QWEN2["vision_config"], "spatial_merge_size": 1}}
    ids, _ = reference_positions(unmerged, LAYOUT)
    answer = _verify(client, QWEN2, ids)
    assert _names(answer) == ["spatial_merge_missing"]
    assert answer["diagnosis"][0]["evidence"]["given_tokens"] == ids.shape[1]


def test_one_row_of_ids_is_named(client: Client) -> None:
    expected, _ = reference_positions(QWEN3, LAYOUT)
    answer = _verify(client, QWEN3, np.arange(expected.shape[1]))
    assert "one_dimensional" in _names(answer)
    assert (
        answer["diagnosis"][0]["evidence"]["first_token_with_distinct_ids"] == 5
    )  # (4, 4, 4) opens the image


def test_packed_sequences_that_do_not_restart_are_named(client: Client) -> None:
    """get_rope_index run over the packed sequence as one (AReaL #217): the second sequence's
    ids continue from the first's."""
    first: list[dict[str, Any]] = [{"text": 3}, {"image": [1, 4, 4]}, {"text": 2}]
    second: list[dict[str, Any]] = [{"text": 2}, {"image": [1, 2, 4]}, {"text": 1}]
    packed, _ = reference_positions(QWEN2, first + second)
    answer = _verify(client, QWEN2, packed, segments=None, sequences=[first, second])
    assert _names(answer) == ["packed_not_restarting"]
    assert answer["diagnosis"][0]["evidence"]["sequence"] == 1
    apart = np.concatenate([reference_positions(QWEN2, s)[0] for s in (first, second)], axis=1)
    assert _verify(client, QWEN2, apart, segments=None, sequences=[first, second])["equal"]


@pytest.mark.parametrize("config", [QWEN25, QWEN3], ids=["qwen2_5_vl", "qwen3_vl"])
def test_decode_steps_without_the_delta_are_named(client: Client, config: dict[str, Any]) -> None:
    """A decoder that counts on from the prompt's length (mistral.rs #1787)."""
    ids, delta = reference_positions(config, LAYOUT)
    assert delta != 0
    steps = np.arange(ids.shape[1], ids.shape[1] + 4)
    answer = _verify(
        client, config, np.concatenate([ids, np.tile(steps, (3, 1))], 1), decode_steps=4
    )
    assert _names(answer) == ["decode_delta_missing"]
    assert answer["diagnosis"][0]["evidence"]["delta"] == delta


def test_one_row_of_text_alone_is_the_model_s_ids(client: Client) -> None:
    """Text has three equal rows: one row says all of it, and no fault is named."""
    answer = _verify(client, QWEN2, np.arange(6), segments=[{"text": 6}])
    assert answer["equal"] and answer["diagnosis"] == []

"""POST /v1/rope/encode with ``position_ids`` (API.md §6.3): a multimodal rope's table for the
client's (3, n) ids. That it is the model's own is measured in
tests/reference/test_mrope_tables.py; here, what it answers and what it refuses, by name."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tests.conftest import Client

_ROPE = {"d_model": 16, "base": 10000.0}
_IDS = [[0, 1, 2, 3], [0, 1, 1, 3], [0, 2, 1, 3]]
_MROPE = {"section": [2, 3, 3], "rotary": "chunked"}


def _post(client: Client, **body: Any) -> Any:
    return client.post("/v1/rope/encode", json={**_ROPE, **body})


def test_each_frequency_turns_by_the_id_its_section_gives(client: Client) -> None:
    """Chunked sections 2, 3, 3: frequencies 0–1 by the temporal id, 2–4 by the height, 5–7
    by the width; each column is the one-dimensional rope's at that id."""
    answer = _post(client, position_ids=_IDS, mrope=_MROPE, component="angle").json()
    angles = np.array(answer["data"])
    assert angles.shape == (4, 8)
    one_d = np.array(_post(client, positions=list(range(4)), component="angle").json()["data"])
    rows = np.array(_IDS)
    for frequency, reads in enumerate([0, 0, 1, 1, 1, 2, 2, 2]):
        assert np.array_equal(angles[:, frequency], one_d[rows[reads], frequency])
    assert answer["params"]["position_ids"] == _IDS
    assert answer["params"]["mrope"] == _MROPE


def test_interleaved_sections_alternate_the_ids(client: Client) -> None:
    """Qwen3-VL's rule: frequency j reads the height where j % 3 == 1 and j < 3·section[1],
    the width where j % 3 == 2 and j < 3·section[2], else the temporal id."""
    mrope = {"section": [4, 2, 2], "rotary": "interleaved"}
    angles = np.array(
        _post(client, position_ids=_IDS, mrope=mrope, component="angle").json()["data"]
    )
    one_d = np.array(_post(client, positions=list(range(4)), component="angle").json()["data"])
    rows = np.array(_IDS)
    for frequency, reads in enumerate([0, 1, 2, 0, 1, 2, 0, 0]):
        assert np.array_equal(angles[:, frequency], one_d[rows[reads], frequency])


def test_the_config_s_mrope_is_taken_as_it_is_answered(client: Client) -> None:
    """The ``mrope`` of /v1/rope/config's answer, its other members included, is a valid
    ``mrope`` here."""
    config = {
        "model_type": "qwen2_vl",
        "hidden_size": 1536,
        "num_attention_heads": 12,
        "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]},
    }
    named = client.post("/v1/rope/config", json=config).json()
    body = {**named["params"], "position_ids": _IDS, "mrope": named["mrope"]}
    response = client.post("/v1/rope/encode", json=body)
    assert response.status_code == 200, response.text
    assert np.array(response.json()["data"]).shape == (2, 4, 128)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"position_ids": _IDS[:2], "mrope": _MROPE}, "position_ids"),
        ({"position_ids": [[0, 1], [0, 1], [0, -1]], "mrope": _MROPE}, "position_ids"),
        ({"position_ids": [[0, 1], [0, 1], [0, 1.5]], "mrope": _MROPE}, "position_ids"),
        ({"position_ids": _IDS}, "mrope:"),
        ({"position_ids": _IDS, "mrope": {"section": [2, 3, 4], "rotary": "chunked"}}, "mrope."),
        ({"position_ids": _IDS, "mrope": {"section": [2, 3], "rotary": "chunked"}}, "mrope."),
        ({"position_ids": _IDS, "mrope": {"section": [2, 3, 3], "rotary": "ernie"}}, "mrope."),
        ({"position_ids": _IDS, "mrope": _MROPE, "positions": [1]}, "positions"),
        ({"position_ids": _IDS, "mrope": _MROPE, "vectors": [[1.0] * 16] * 4}, "vectors"),
        ({"position_ids": _IDS, "mrope": _MROPE, "component": "inv_freq"}, "component"),
    ],
)
def test_what_cannot_be_answered_is_refused_naming_the_field(
    client: Client, body: dict[str, Any], field: str
) -> None:
    response = _post(client, **body)
    assert response.status_code == 422, response.text
    assert response.json()["detail"].startswith(field), response.text


def test_a_scheme_whose_tokens_have_one_position_refuses_position_ids(client: Client) -> None:
    body = {"d_model": 16, "position_ids": _IDS}
    response = client.post("/v1/sinusoidal/encode", json=body)
    assert 400 <= response.status_code < 500
    assert response.json()["detail"].startswith("position_ids"), response.text


def test_mrope_goes_with_position_ids_only(client: Client) -> None:
    """Options for several ids beside one position a token would be silently unread."""
    response = _post(client, positions=[0, 1], mrope=_MROPE)
    assert response.status_code == 422
    assert response.json()["detail"].startswith("mrope:"), response.text


def test_a_bad_id_is_located_by_its_row_and_column(client: Client) -> None:
    response = _post(client, position_ids=[[0, 1], [0, 1], [0, -1]], mrope=_MROPE)
    assert response.status_code == 422
    assert response.json()["errors"][0]["loc"] == ["body", "position_ids", 2, 1]


def test_glm_pairs_take_glm_s_interleaved_cache(client: Client) -> None:
    mrope = {"section": [2, 3, 3], "rotary": "glm_pairs"}
    refused = _post(client, position_ids=_IDS, mrope=mrope)
    assert refused.status_code == 422
    assert refused.json()["detail"].startswith("mrope.rotary:"), refused.text
    assert _post(client, position_ids=_IDS, mrope=mrope, layout="interleaved").status_code == 200


def test_the_document_asks_for_positions_or_position_ids_with_mrope(client: Client) -> None:
    document = client.get("/openapi.json").json()
    schema = document["paths"]["/v1/rope/encode"]["post"]["requestBody"]["content"][
        "application/json"
    ]["schema"]
    # Two closed objects, each fully typed, so that generated clients type the body (an anyOf
    # of bare required lists was `unknown` to openapi-typescript: issue 34).
    by_positions, by_ids = schema["oneOf"]
    assert set(by_positions["required"]) == {"d_model", "positions"}
    assert set(by_ids["required"]) == {"d_model", "position_ids", "mrope"}
    assert not {"position_ids", "mrope"} & set(by_positions["properties"])
    assert "positions" not in by_ids["properties"]
    for alternative in (by_positions, by_ids):
        assert alternative["additionalProperties"] is False
        assert alternative["properties"]["d_model"]["type"] == "integer"
    for name, alternative in (("positions", by_positions), ("position_ids", by_ids)):
        assert "null" not in str(alternative["properties"][name]), name
    assert "null" not in str(by_ids["properties"]["mrope"])


def test_an_integral_section_size_may_be_written_as_a_float(client: Client) -> None:
    """JSON Schema's integer: 3.0 is 3."""
    mrope = {"section": [2.0, 3, 3.0], "rotary": "chunked"}
    response = _post(client, position_ids=_IDS, mrope=mrope)
    assert response.status_code == 200, response.text
    assert response.json()["params"]["mrope"]["section"] == [2, 3, 3]

"""The cos/sin POST /v1/rope/positions gives for a layout are those of the model's own text
rotary module (transformers), within the framework recipe's bound (docs/numbers.md, "The bounds
the suite holds"); the exact table takes each column from the id transformers' module turns
that frequency by."""

from __future__ import annotations

import io
import random
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
import torch

from tests.conftest import Client
from tests.reference.test_framework_recipe import ulps
from tests.reference.test_mrope_positions import ANSWERED, _layout
from tests.reference.transformers_mrope import hub_config, reference_cos_sin

# Types whose M-RoPE table is not answered: ERNIE-VL's image tokens turn by frequencies
# permuted for its sections (its text tokens' rope is answered by /v1/rope/config).
UNTABLED = {"ernie4_5_vl_moe"}
TABLED = [t for t in ANSWERED if t not in UNTABLED]


def _table(
    client: Client, config: dict[str, Any], segments: list[dict[str, Any]], recipe: str
) -> dict[str, Any]:
    body = {"config": config, "segments": segments, "component": "cos_sin", "recipe": recipe}
    response = client.post("/v1/rope/positions", json=body)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


@pytest.mark.parametrize("model_type", sorted(UNTABLED))
def test_a_table_not_modelled_is_refused_by_name(client: Client, model_type: str) -> None:
    # ERNIE-4.5-VL's text rope is answered; its tables' permuted sections are not.
    body = {"config": hub_config(model_type), "segments": [{"text": 1}], "component": "cos"}
    response = client.post("/v1/rope/positions", json=body)
    assert response.status_code == 422
    assert response.json()["detail"].startswith("config.model_type:")
    # Its ids are answered all the same.
    del body["component"]
    assert client.post("/v1/rope/positions", json=body).status_code == 200


def _same_frequencies(params: dict[str, Any]) -> npt.NDArray[np.bool_]:
    """Columns whose frequency is bit-identical to torch's (default rope: base^(-2i/d) by
    torch's float32 pow); docs/numbers.md bounds cos/sin there."""
    d = params["d_model"]
    exponents = torch.arange(0, d, 2, dtype=torch.int64).float() / d
    theirs = (1.0 / (params["base"] ** exponents)).numpy()
    from posenc.schemes.rope.params import RopeParams
    from posenc.schemes.rope.recipes.framework import frequencies

    ours, _ = frequencies(RopeParams(**params), 1)
    same = ulps(ours, theirs) == 0
    return np.concatenate([same, same]) if params["layout"] == "split" else np.repeat(same, 2)


@pytest.mark.parametrize("model_type", TABLED)
def test_the_framework_table_is_the_rotary_module_s(client: Client, model_type: str) -> None:
    config = hub_config(model_type)
    rng = random.Random(model_type)
    for _ in range(8):
        segments = _layout(rng, model_type, config)
        answer = _table(client, config, segments, "framework")
        ids = np.array(answer["position_ids"])
        cos, sin = reference_cos_sin(config, ids)
        table = np.array(answer["table"], dtype=np.float32)
        assert table.shape == (2, *cos.shape), (table.shape, cos.shape)
        same = _same_frequencies(answer["params"])
        assert same.mean() > 0.5, "too few frequencies are torch's for the bound to say much"
        worst = max(ulps(table[0], cos)[:, same].max(), ulps(table[1], sin)[:, same].max())
        assert worst <= 1, (segments, worst)


@pytest.mark.parametrize("model_type", TABLED)
def test_each_column_of_the_exact_table_turns_by_the_id_the_module_reads(
    client: Client, model_type: str
) -> None:
    """Which of the three ids each column reads, found by moving one id at a time through
    transformers' module; the exact table's column is the exact rope's at that id."""
    config = hub_config(model_type)
    segments: list[dict[str, Any]] = [{"text": 2}, {"image": [1, 4, 6]}, {"text": 1}]
    answer = _table(client, config, segments, "exact")
    ids = np.array(answer["position_ids"])
    base_cos, base_sin = reference_cos_sin(config, np.zeros_like(ids))
    reads = np.full(base_cos.shape[1], -1)
    for row in range(3):
        moved = np.zeros_like(ids)
        moved[row] = 1000
        cos, sin = reference_cos_sin(config, moved)
        # The sine too: a slow frequency's cosine (base 1e8) still rounds to 1 at id 1000.
        reads[((cos != base_cos) | (sin != base_sin)).any(axis=0)] = row
    assert (reads >= 0).all(), "a column that no id moves"
    table = np.array(answer["table"])
    params = "&".join(f"{k}={v}" for k, v in answer["params"].items())
    for row in range(3):
        positions = ",".join(str(p) for p in ids[row])
        one_d = client.get(f"/v1/rope/encode?{params}&positions={positions}&format=json")
        assert one_d.status_code == 200, one_d.text
        rows = np.array(one_d.json()["data"])
        columns = reads == row
        assert np.array_equal(table[:, :, columns], rows[:, :, columns])


@pytest.mark.parametrize("model_type", TABLED)
def test_encode_turns_a_client_s_ids_as_the_rotary_module_does(
    client: Client, model_type: str
) -> None:
    """POST /v1/rope/encode with (3, n) ids the client computed — any ids, not only those a
    layout gives — and the params and mrope /v1/rope/config names: the framework table is the
    model's own rotary module's for those ids (docs/numbers.md's bound), and the exact one is the
    table /v1/rope/positions gives for a layout's ids, bit for bit."""
    config = hub_config(model_type)
    named = client.post("/v1/rope/config", json=config).json()
    ids = np.random.default_rng(len(model_type)).integers(0, 1 << 20, size=(3, 48))
    body = {**named["params"], "position_ids": ids.tolist(), "mrope": named["mrope"]}
    body |= {"component": "cos_sin", "recipe": "framework"}
    response = client.post("/v1/rope/encode", json=body)
    assert response.status_code == 200, response.text
    table = np.array(response.json()["data"], dtype=np.float32)
    cos, sin = reference_cos_sin(config, ids)
    same = _same_frequencies(named["params"])
    worst = max(ulps(table[0], cos)[:, same].max(), ulps(table[1], sin)[:, same].max())
    assert worst <= 1, worst

    segments: list[dict[str, Any]] = [{"text": 2}, {"image": [1, 4, 6]}, {"text": 1}]
    laid_out = _table(client, config, segments, "exact")
    body |= {"position_ids": laid_out["position_ids"], "recipe": "exact"}
    exact = client.post("/v1/rope/encode?format=npy", json=body)
    assert exact.status_code == 200, exact.text
    served = np.load(io.BytesIO(exact.content))
    assert np.array_equal(served, np.array(laid_out["table"], dtype=np.float32))

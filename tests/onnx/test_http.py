"""POST /v1/rope/onnx over HTTP: the round trip a client makes for a model whose caches are in
external data (a 422 of its own type listing the byte ranges, then the ranges as parts), what
the OpenAPI document says of the body, the answer and the refusal, and bad parts named."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from posenc.schemes.rope import declaration
from posenc.schemes.rope.onnx.answer import canonical
from posenc.schemes.rope.params import RopeParams
from tests.conftest import Client
from tests.onnx import graphs
from tests.onnx.files import EXTERNAL_DATA_NEEDED, check, multipart, ranges


@pytest.fixture(scope="module")
def external(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("external")
    return graphs.saved(graphs.plain(length=4096, pairs=64, base=500000.0), folder, True)


def _document(client: Client) -> dict[str, Any]:
    operation: dict[str, Any] = client.get("/openapi.json").json()["paths"]["/v1/rope/onnx"]["post"]
    return operation


def _valid(value: Any, schema: dict[str, Any]) -> list[str]:
    return [error.message for error in jsonschema.Draft202012Validator(schema).iter_errors(value)]


def test_caches_in_external_data_are_asked_for_then_read_from_the_parts_sent(
    client: Client, external: Path
) -> None:
    body, headers = multipart([("model", "model.onnx", (external / "model.onnx").read_bytes())])
    refused = client.post("/v1/rope/onnx", content=body, headers=headers)
    problem = refused.json()
    assert refused.status_code == 422 and problem["type"] == EXTERNAL_DATA_NEEDED
    assert {need["tensor"] for need in problem["needed"]} == {"cos_cache", "sin_cache"}
    assert {need["location"] for need in problem["needed"]} == {"model.onnx.data"}
    schema = _document(client)["responses"]["422"]["content"]["application/problem+json"]
    assert not _valid(problem, schema["schema"])
    # 16 positions (0–4, the powers of two, the last two) of 64 float32 pairs, cos and sin:
    # 8 KiB of a data file of 2 MiB.
    sent = sum(need["length"] for need in problem["needed"])
    assert sent == 2 * 16 * 64 * 4 == (external / "model.onnx.data").stat().st_size // 256
    answer, _ = check(client, external)
    (rope,) = answer["ropes"]
    assert rope["params"] == {
        "d_model": 128,
        "base": 500000.0,
        "layout": "split",
        "scaling": "none",
    }
    assert rope["caches"]["cos"]["location"] == "model.onnx.data"


def test_the_answer_and_the_body_are_what_the_openapi_document_says(
    client: Client, external: Path, tmp_path: Path
) -> None:
    operation = _document(client)
    form = operation["requestBody"]["content"]["multipart/form-data"]["schema"]
    assert form["required"] == ["model"]
    assert set(form["properties"]) == {"model", "genai_config", "config", "external"}
    assert form["properties"]["external"]["type"] == "array"
    schema = operation["responses"]["200"]["content"]["application/json"]["schema"]
    config = {
        "model_type": "llama",
        "num_hidden_layers": 2,
        "hidden_size": 512,
        "num_attention_heads": 4,
        "rope_theta": 10000.0,
        "max_position_embeddings": 256,
    }
    inline = graphs.saved(graphs.longrope(), tmp_path / "longrope", False)
    for folder, given in ((external, None), (inline, config), (external, config)):
        answer, _ = check(client, folder, given)
        assert not _valid(answer, schema), answer


def test_a_ropes_params_are_typed_as_the_canonical_parameters_of_a_rope(client: Client) -> None:
    operation = _document(client)
    answer = operation["responses"]["200"]["content"]["application/json"]["schema"]
    (_, params) = answer["properties"]["ropes"]["items"]["properties"]["params"]["anyOf"]
    for example in declaration.examples:
        given = {k: v for k, v in example.items() if k != "recipe"}
        assert not _valid(canonical(RopeParams(**given)), params), example
    every = canonical(RopeParams(d_model=8, freq_factors=(1.0, 2.0, 3.0, 4.0), rotary_pairs=2))
    assert not _valid(every, params)
    for wrong in ({"base": "10000"}, {"layout": "rotate_half"}, {"d_model": 7}, {"bogus": 1}):
        assert _valid({**every, **wrong}, params), wrong
    assert _valid({"d_model": 8}, params)


def test_a_model_sent_alone_as_octet_stream_is_refused_naming_the_content_type(
    client: Client, tmp_path: Path
) -> None:
    """The body is multipart/form-data, its parts named (the contract's form)."""
    folder = graphs.saved(graphs.plain(), tmp_path, False)
    response = client.post(
        "/v1/rope/onnx",
        content=(folder / "model.onnx").read_bytes(),
        headers={"content-type": "application/octet-stream"},
    )
    assert response.status_code == 422
    assert response.json()["errors"][0]["loc"][-1] == "content-type"


@pytest.mark.parametrize(
    ("parts", "named"),
    [
        ([("config", None, b"{}")], "model"),
        ([("external", "model.onnx.data", b"x")], "external"),
        ([("external", None, b"x")], "external"),
        ([("config", None, b"[1, 2]")], "config"),
        ([("genai_config", None, b'"x"')], "genai_config"),
        ([("weights", None, b"x")], "weights"),
    ],
)
def test_a_bad_part_is_refused_naming_it(
    client: Client, external: Path, parts: list[tuple[str, str | None, bytes]], named: str
) -> None:
    model = [] if named == "model" else [("model", "m", (external / "model.onnx").read_bytes())]
    body, headers = multipart([*model, *parts])
    response = client.post("/v1/rope/onnx", content=body, headers=headers)
    assert response.status_code == 422
    assert response.json()["errors"][0]["loc"] == ["body", named], response.json()


def test_ranges_sent_from_another_file_or_cut_short_are_asked_for_again(
    client: Client, external: Path
) -> None:
    model = ("model", "model.onnx", (external / "model.onnx").read_bytes())
    body, headers = multipart([model])
    needed = client.post("/v1/rope/onnx", content=body, headers=headers).json()["needed"]
    sent = ranges(external, needed)
    elsewhere = [(n, f"other.data@{f.split('@')[1]}", d) for n, f, d in sent if f]
    short = [(n, f, d[:-1]) for n, f, d in sent]
    for parts in (elsewhere, short):
        body, headers = multipart([model, *parts])
        again = client.post("/v1/rope/onnx", content=body, headers=headers).json()
        assert again["type"] == EXTERNAL_DATA_NEEDED
        assert again["needed"] == needed


def test_a_config_of_another_model_is_refused_naming_its_layers(
    client: Client, external: Path
) -> None:
    config = {
        "model_type": "llama",
        "num_hidden_layers": 7,
        "hidden_size": 512,
        "num_attention_heads": 4,
    }
    body, headers = multipart(
        [
            ("model", "model.onnx", (external / "model.onnx").read_bytes()),
            ("config", None, json.dumps(config).encode()),
            *ranges(external, check_needed(client, external)),
        ]
    )
    response = client.post("/v1/rope/onnx", content=body, headers=headers)
    assert response.status_code == 422
    assert response.json()["errors"][0]["loc"] == ["body", "config.num_hidden_layers"]


def check_needed(client: Client, folder: Path) -> list[dict[str, Any]]:
    body, headers = multipart([("model", "model.onnx", (folder / "model.onnx").read_bytes())])
    needed: list[dict[str, Any]] = client.post(
        "/v1/rope/onnx", content=body, headers=headers
    ).json()["needed"]
    return needed


# graphs.plain()'s model: heads of 16, base 10000.
_CONFIG = {
    "model_type": "llama",
    "hidden_size": 64,
    "num_attention_heads": 4,
    "rope_theta": 10000.0,
    "max_position_embeddings": 256,
}


def _post(client: Client, made: Any, **parts: Any) -> Any:
    sent = [(name, None, json.dumps(value).encode()) for name, value in parts.items()]
    body, headers = multipart([("model", "model.onnx", graphs.serialised(made)), *sent])
    return client.post("/v1/rope/onnx", content=body, headers=headers)


@pytest.mark.parametrize("count", [10**12, 2**31, 4097, 0, -1, 2.0, "2", True])
def test_a_layer_count_genai_config_states_is_checked_before_anything_is_sized_by_it(
    client: Client, count: Any
) -> None:
    genai = {"model": {"decoder": {"num_hidden_layers": count}}}
    for config in (None, {**_CONFIG, "num_hidden_layers": 2}):
        given = {"genai_config": genai, **({} if config is None else {"config": config})}
        response = _post(client, graphs.plain(), **given)
        assert response.status_code == 422, response.text
        field = "genai_config.model.decoder.num_hidden_layers"
        assert response.json()["errors"][0]["loc"] == ["body", field]


_OFFSET = ("model", "decoder", "session_options", "provider_options")
_AT_OFFSET = ".".join(_OFFSET) + "[0].webgpu.multiRotaryCacheConcatOffset"


def _nested(path: tuple[str, ...], value: Any) -> dict[str, Any]:
    for key in reversed(path):
        value = {key: value}
    nested: dict[str, Any] = value
    return nested


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        (("model", "context_length"), "4096", "model.context_length"),
        (("model", "context_length"), 0, "model.context_length"),
        (("model", "context_length"), 2**31 + 1, "model.context_length"),
        (("model", "decoder", "head_size"), 64.0, "model.decoder.head_size"),
        (("model", "decoder", "head_size"), 2**17, "model.decoder.head_size"),
        (_OFFSET, {"webgpu": {}}, ".".join(_OFFSET)),
        (_OFFSET, [{"webgpu": {"multiRotaryCacheConcatOffset": 4096}}], _AT_OFFSET),
        (_OFFSET, [{"webgpu": {"multiRotaryCacheConcatOffset": "-1"}}], _AT_OFFSET),
        (_OFFSET, [{"webgpu": {"multiRotaryCacheConcatOffset": "9" * 5000}}], _AT_OFFSET),
        (_OFFSET, ["webgpu"], ".".join(_OFFSET) + "[0]"),
        (("model", "decoder", "head_size"), 64, "model"),  # model is a string below
    ],
)
def test_a_genai_config_key_of_another_type_is_refused_naming_it_not_read_as_absent(
    client: Client, path: tuple[str, ...], value: Any, field: str
) -> None:
    # An offset read as absent would take a concatenated cache for one cache of the long rows.
    genai = _nested(path, value)
    if field == "model":
        genai = {"model": "decoder"}
    response = _post(client, graphs.plain(), genai_config=genai)
    assert response.status_code == 422, response.text
    (error,) = response.json()["errors"]
    assert error["loc"] == ["body", f"genai_config.{field}"], error


@pytest.mark.parametrize(("offset", "ropes"), [("0", 1), ("192", 2)])
def test_a_concatenated_caches_offset_is_read_from_the_provider_options(
    client: Client, offset: str, ropes: int
) -> None:
    # ONNX Runtime's default "0": no concatenated cache; else two ropes, the rows either side.
    options = [{"webgpu": {"enableGraphCapture": "1", "multiRotaryCacheConcatOffset": offset}}]
    answer = _post(client, graphs.plain(), genai_config=_nested(_OFFSET, options)).json()
    assert len(answer["ropes"]) == ropes, answer
    if ropes == 2:
        rows = sorted(tuple(rope["caches"]["cos"]["rows"]) for rope in answer["ropes"])
        assert rows == [(0, 192), (192, 256)]


def test_the_genai_config_keys_a_check_reads_are_in_its_answer(client: Client) -> None:
    genai = {"model": {"context_length": 4096, "decoder": {"head_size": 128}}}
    answer = _post(client, graphs.plain(), genai_config=genai).json()
    assert (answer["context_length"], answer["head_size"]) == (4096, 128)
    assert (
        _post(client, graphs.plain(), genai_config={"model": {}}).json()["context_length"] is None
    )


def test_a_layer_count_genai_config_states_is_held_to_the_configs(client: Client) -> None:
    genai = {"model": {"decoder": {"num_hidden_layers": 4096}}}
    config = {**_CONFIG, "num_hidden_layers": 2}
    response = _post(client, graphs.plain(), genai_config=genai, config=config)
    assert response.status_code == 422
    assert response.json()["errors"][0]["loc"] == ["body", "config.num_hidden_layers"]


@pytest.mark.parametrize("config", [None, _CONFIG])
def test_a_node_naming_a_layer_past_the_last_that_is_read_is_refused(
    client: Client, config: dict[str, Any] | None
) -> None:
    made = graphs.plain(layers=1)
    made.graph.node[0].name = "/model/layers.999999/attn/GroupQueryAttention"
    response = _post(client, made, **({} if config is None else {"config": config}))
    assert response.status_code == 422
    problem = response.json()
    assert (
        problem["errors"][0]["loc"] == ["body", "model"] and "layers 0 to 4095" in problem["detail"]
    )


def test_the_last_layer_that_is_read_is_checked_against_a_config_without_a_layer_count(
    client: Client,
) -> None:
    made = graphs.plain(layers=1)
    made.graph.node[0].name = "/model/layers.4095/attn/GroupQueryAttention"
    answer = _post(client, made, config=_CONFIG).json()
    assert answer["num_hidden_layers"] == 4096 and answer["ropes"][0]["layers"] == [4095]
    # The model turns every layer; the file names the last alone.
    (finding,) = answer["findings"]
    assert finding["kind"] == "nope_layers" and finding["layers"] == list(range(4095))
    assert finding["evidence"] == {"model_rotates": True, "file_rotates": False}

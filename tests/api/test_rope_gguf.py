"""POST /v1/rope/gguf: a GGUF file's first bytes in, llama.cpp's rope of every layer out."""

from __future__ import annotations

import io
import json
import struct
from typing import Any

import mpmath
import numpy as np
import pytest

from app.settings import Settings
from tests.conftest import Client
from tests.gguf.files import ARRAY, STRING, gguf, kv, llama_31_prefix, string
from tests.gguf.records import load
from tests.reference import runtimes
from tests.reference.llama_cpp_args import Call

FILE = {"content-type": "application/octet-stream"}
PHI3 = {
    "general.architecture": "phi3",
    "phi3.context_length": 131072,
    "phi3.block_count": 4,
    "phi3.embedding_length": 64,
    "phi3.attention.head_count": 4,
    "phi3.rope.scaling.attn_factor": 1.1902380714238083,
    "phi3.rope.scaling.original_context_length": 4096,
    "tokenizer.ggml.tokens": [f"t{i}" for i in range(1000)],
}
LONG = np.linspace(1, 40, 8, dtype=np.float32)
SHORT = np.linspace(1, 1.5, 8, dtype=np.float32)
PHI3_FILE = gguf(PHI3, [("rope_factors_long.weight", LONG), ("rope_factors_short.weight", SHORT)])


@pytest.fixture(scope="module")
def client() -> Client:
    return Client(Settings(max_gguf_bytes=2**20))


def post(client: Client, body: bytes, query: str = "") -> Any:
    return client.post(f"/v1/rope/gguf{query}", content=body, headers=FILE)


def test_a_files_ropes_are_answered_layer_by_layer(client: Client) -> None:
    response = post(client, PHI3_FILE, "?n_ctx=8192")
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["architecture"] == "phi3" and answer["num_hidden_layers"] == 4
    (rope,) = answer["ropes"]
    assert rope["layers"] == [0, 1, 2, 3] and rope["rope_type"] == "neox"
    assert rope["params"]["long_factor"] == LONG.tolist() and rope["params"]["n_ctx"] == 8192
    assert rope["read_from"]["tensors"] == ["rope_factors_long.weight"]
    assert answer["llama_cpp_version"]["commit"].startswith("0c1e57098")


def test_n_ctx_chooses_what_depends_on_it(client: Client) -> None:
    (rope,) = post(client, PHI3_FILE, "?n_ctx=4096").json()["ropes"]
    assert rope["ggml"]["freq_factors"] == "rope_factors_short.weight"
    (rope,) = post(client, PHI3_FILE).json()["ropes"]  # the file's 131072
    assert rope["ggml"]["freq_factors"] == "rope_factors_long.weight"
    assert rope["params"]["n_ctx"] == 131072


def test_every_answer_is_what_the_openapi_document_says(client: Client) -> None:
    import jsonschema

    document = client.get("/openapi.json").json()
    operation = document["paths"]["/v1/rope/gguf"]["post"]
    schema = operation["responses"]["200"]["content"]["application/json"]["schema"]
    content = operation["requestBody"]["content"]
    assert list(content) == ["application/octet-stream", "multipart/form-data"]
    assert content["multipart/form-data"]["schema"]["required"] == ["gguf"]
    assert [p["name"] for p in operation["parameters"]] == ["n_ctx"]
    gemma3 = {
        "general.architecture": "gemma3",
        "gemma3.context_length": 32768,
        "gemma3.block_count": 12,
        "gemma3.embedding_length": 64,
        "gemma3.attention.head_count": 4,
        "gemma3.attention.sliding_window": 512,
    }
    qwen2vl = {**gemma3, "general.architecture": "qwen2vl"}
    qwen2vl = {k.replace("gemma3.", "qwen2vl."): v for k, v in qwen2vl.items()}
    qwen2vl["qwen2vl.rope.dimension_sections"] = [2, 3, 3, 0]
    for body in (PHI3_FILE, gguf(gemma3), gguf(qwen2vl)):
        answer = post(client, body).json()
        errors = [error.message for error in jsonschema.Draft202012Validator(schema).iter_errors(
            answer)]  # fmt: skip
        assert not errors, (answer.get("architecture"), errors)


def test_a_files_params_give_its_exact_rope_as_well_as_llama_cpps(client: Client) -> None:
    # Llama 3.1's rope_freqs as freq_factors: GET /v1/rope/table of the params is the exact
    # rope the call approximates, each frequency base^(-2i/d) / f_i correctly rounded ...
    (rope,) = post(client, llama_31_prefix()).json()["ropes"]
    params = rope["params"]
    query = "&".join(
        f"{k}={','.join(map(repr, v)) if isinstance(v, list) else v}" for k, v in params.items()
    )
    served = client.get(f"/v1/rope/table?{query}&seq_len=2&component=inv_freq&format=npy")
    assert served.status_code == 200, served.text
    mpmath.mp.dps = 40
    base, d = mpmath.mpf(params["base"]), params["d_model"]
    truth = [
        base ** (-mpmath.mpf(2 * i) / d) / mpmath.mpf(f)
        for i, f in enumerate(params["freq_factors"])
    ]
    assert np.load(io.BytesIO(served.content)).tolist() == [float(np.float32(w)) for w in truth]
    # ... and recipe=ggml is ggml-cpu's rope with the arguments llama.cpp itself passed for
    # the converter's Llama 3.1 file (tests/gguf/records), bit for bit.
    pytest.importorskip("ggml", reason="ggml-python is part of the reference extra")
    cases = {case["name"]: case for case in load("scalings")["cases"]}
    node = cases["llama3.1"]["nodes"][0]
    for offset in (0, 131072 - 32, 2**31 - 32):
        table = client.get(
            f"/v1/rope/table?{query}&recipe=ggml&offset={offset}&seq_len=32&format=npy"
        )
        assert table.status_code == 200, table.text
        cos, sin = runtimes.ggml_halves(Call.of_node(node), np.arange(offset, offset + 32))
        cos_sin = np.load(io.BytesIO(table.content))  # interleaved pairs: llama.cpp's NORMAL
        assert np.array_equal(cos_sin[0][:, 0::2], cos) and np.array_equal(cos_sin[1][:, 0::2], sin)


def test_a_prefix_too_short_names_the_bytes_to_send(client: Client) -> None:
    response = post(client, PHI3_FILE[:-20])
    assert response.status_code == 422
    problem = response.json()
    assert problem["errors"][0]["loc"] == ["body", "gguf"]
    assert "rope_factors_short.weight" in problem["detail"]
    assert f"send at least the first {len(PHI3_FILE)} bytes" in problem["detail"]
    # The number as a member of its own, for a client to act on without parsing the prose.
    assert problem["type"] == "urn:posenc:problem:inconsistent-parameters"
    assert problem["needed_bytes"] == len(PHI3_FILE)
    assert post(client, PHI3_FILE[: problem["needed_bytes"]]).status_code == 200


def test_a_hostile_count_is_a_422_naming_it_as_past_the_limit(client: Client) -> None:
    claim = b"GGUF" + struct.pack("<IQQ", 3, 0, 2) + kv("general.architecture", STRING, "x")
    claim += string("tokenizer.ggml.tokens") + struct.pack("<IIQ", ARRAY, STRING, 2**60)
    response = post(client, claim + bytes(64))
    assert response.status_code == 422
    assert "1152921504606846976 strings" in response.json()["detail"]
    assert response.json()["type"] == "urn:posenc:problem:limit-exceeded"


def test_bytes_that_are_not_gguf_break_the_rule_the_body_description_states(
    client: Client,
) -> None:
    # The schema says bytes; only its description says GGUF: the contract's inconsistent kind.
    response = post(client, b"\x89PNG\r\n" + bytes(64))
    assert response.status_code == 422 and "GGUF's magic" in response.json()["detail"]
    assert response.json()["type"] == "urn:posenc:problem:inconsistent-parameters"


def test_an_architecture_without_a_row_is_a_422_naming_it(client: Client) -> None:
    body = gguf({**PHI3, "general.architecture": "rwkv7"})
    response = post(client, body)
    assert response.status_code == 422 and "'rwkv7' has no row" in response.json()["detail"]


def test_a_body_past_posenc_max_gguf_bytes_is_a_413(client: Client) -> None:
    response = post(client, PHI3_FILE + bytes(2**20))
    assert response.status_code == 413
    assert "POSENC_MAX_GGUF_BYTES" in response.json()["detail"]


@pytest.mark.parametrize(
    ("query", "param"),
    [
        ("?n_ctx=0", "n_ctx"),
        ("?n_ctx=x", "n_ctx"),
        ("?n_ctx=--5", "n_ctx"),
        ("?n_ctx=%C2%B2", "n_ctx"),  # "²", a digit to str.isdigit
        ("?n_ctx=1&n_ctx=2", "n_ctx"),
        ("?d_model=8", "d_model"),
    ],
)
def test_a_bad_query_parameter_is_named(client: Client, query: str, param: str) -> None:
    response = post(client, PHI3_FILE, query)
    assert response.status_code == 422
    assert response.json()["errors"][0]["loc"] == ["query", param]


def test_a_json_body_is_refused_naming_the_media_type(client: Client) -> None:
    response = client.post("/v1/rope/gguf", json={"gguf": "no"})
    assert response.status_code == 422 and "application/octet-stream" in response.text


PHI3_CONFIG = {
    "model_type": "phi3",
    "hidden_size": 64,
    "num_attention_heads": 4,
    "num_hidden_layers": 4,
    "max_position_embeddings": 131072,
    "original_max_position_embeddings": 4096,
    "rope_theta": 10000.0,
    "rope_scaling": {
        "type": "longrope",
        "long_factor": LONG.tolist(),
        "short_factor": SHORT.tolist(),
    },
}


def with_config(client: Client, body: bytes, config: dict[str, Any], query: str = "") -> Any:
    files = {"gguf": ("model.gguf", body), "config": ("config.json", json.dumps(config))}
    return client.post(f"/v1/rope/gguf{query}", files=files)


def test_a_file_and_its_model_conform_within_the_original_context(client: Client) -> None:
    response = with_config(client, PHI3_FILE, PHI3_CONFIG, "?n_ctx=4096")
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["conforms"] is True and answer["findings"] == []
    assert answer["model"]["model_type"] == "phi3"


def test_phi3s_factors_chosen_by_context_are_a_finding_past_it(client: Client) -> None:
    answer = with_config(client, PHI3_FILE, PHI3_CONFIG, "?n_ctx=8192").json()
    assert answer["conforms"] is False
    assert [f["kind"] for f in answer["findings"]] == ["longrope_by_context"]
    assert answer["findings"][0]["layers"] == [0, 1, 2, 3]


def test_a_model_of_another_base_is_a_finding_naming_both(client: Client) -> None:
    config = {**PHI3_CONFIG, "rope_theta": 500000.0}
    (finding,) = with_config(client, PHI3_FILE, config, "?n_ctx=4096").json()["findings"]
    assert finding["kind"] == "base" and "500000.0" in finding["detail"]


def test_qwen3_vls_pairs_past_its_sections_are_a_fourth_id_finding(client: Client) -> None:
    # Qwen3-VL 8B's text model as its config.json gives it, and its GGUF header: IMROPE with
    # [24, 20, 20, 0] leaves pairs 61 and 62 of 64 to the fourth id, 0 for text tokens.
    header = {
        "general.architecture": "qwen3vl",
        "qwen3vl.context_length": 262144,
        "qwen3vl.block_count": 2,
        "qwen3vl.embedding_length": 4096,
        "qwen3vl.attention.head_count": 32,
        "qwen3vl.attention.key_length": 128,
        "qwen3vl.rope.freq_base": 5000000.0,
        "qwen3vl.rope.dimension_sections": [24, 20, 20, 0],
    }
    text = {
        "model_type": "qwen3_vl_text",
        "hidden_size": 4096,
        "num_attention_heads": 32,
        "head_dim": 128,
        "num_hidden_layers": 2,
        "max_position_embeddings": 262144,
        "rope_parameters": {
            "rope_type": "default",
            "rope_theta": 5000000,
            "mrope_section": [24, 20, 20],
            "mrope_interleaved": True,
        },
    }
    config = {"model_type": "qwen3_vl", "text_config": text}
    answer = with_config(client, gguf(header), config).json()
    (finding,) = answer["findings"]
    assert finding["kind"] == "mrope_fourth_id" and finding["layers"] == [0, 1]
    assert finding["evidence"]["pairs"] == [61, 62]
    # Pair 61's frequency, 5e6^(-122/128), turned over the last position of 262144.
    behind = 262143 * 5e6 ** (-122 / 128)
    assert finding["evidence"]["radians_behind"] == pytest.approx(behind, rel=1e-12)


def test_a_part_the_operation_does_not_take_is_named(client: Client) -> None:
    files = {"gguf": ("model.gguf", PHI3_FILE), "tokenizer": ("t.json", b"{}")}
    response = client.post("/v1/rope/gguf", files=files)
    assert response.status_code == 422 and response.json()["errors"][0]["loc"][-1] == "tokenizer"


@pytest.mark.parametrize(
    ("config", "param"),
    [([], "config.body"), ({**PHI3_CONFIG, "rope_theta": "x"}, "config.rope_theta")],
)
def test_a_config_part_the_reader_refuses_is_named_under_config(
    client: Client, config: Any, param: str
) -> None:
    response = with_config(client, PHI3_FILE, config)
    assert response.status_code == 422 and response.json()["errors"][0]["loc"][-1] == param


def test_a_config_of_another_layer_count_is_not_the_files_model(client: Client) -> None:
    response = with_config(client, PHI3_FILE, {**PHI3_CONFIG, "num_hidden_layers": 7})
    assert response.status_code == 422 and "the file has 4 layers" in response.text

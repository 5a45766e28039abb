"""POST /v1/rope/applied over HTTP: two arrays and their positions as multipart parts (raw with
their own X-Array-Shape/X-Array-Dtype headers, or .npy), the rope in the query or a model's
config part; answers as the OpenAPI document says; hostile bodies refused in milliseconds,
naming the part; and no request allocating more than it reserved."""

from __future__ import annotations

import asyncio
import gc
import time
import tracemalloc
from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import pytest

from app.main import create_app
from app.settings import Settings
from posenc.cli.budget import SERVICE_DEFAULTS
from posenc.declare import Part, Upload
from posenc.schemes.rope.applied import operation
from posenc.schemes.rope.params import RopeParams
from posenc.warm import compile_kernels
from tests.api.test_costs import PeakOfEachRequest
from tests.applied.dumps import Dump, files, names, npy, part
from tests.applied.test_core import LLAMA4, bfloat16, exact, vectors
from tests.conftest import Client
from tests.hub_configs import llama_31_rope_scaling, tiny_qwen2_vl_config

URL = "/v1/rope/applied"
FAR = np.arange(1_000_000, 1_000_032)
LLAMA31 = {
    "model_type": "llama",
    "hidden_size": 2048,
    "num_attention_heads": 32,
    "num_hidden_layers": 4,
    "max_position_embeddings": 131072,
    "rope_theta": 500000.0,
    "rope_scaling": llama_31_rope_scaling(),
}


@pytest.fixture(scope="module")
def client() -> Client:
    return Client(Settings(max_gguf_bytes=2**24))


@pytest.fixture(scope="module")
def llama31_dump() -> Dump:
    params = RopeParams(
        d_model=64, base=500000.0, scaling="llama3", factor=8.0, low_freq_factor=1.0,
        high_freq_factor=4.0, original_max_position_embeddings=8192,
    )  # fmt: skip
    x = vectors(len(FAR), 4, 64)
    return Dump(x, exact(params, x, FAR), 0, FAR)


def orjson_bytes(value: Any) -> bytes:
    import orjson

    return orjson.dumps(value)


def post(client: Client, dump: Dump, query: str = "", **more: Any) -> httpx.Response:
    return client.post(f"{URL}{query}", files={**files(dump), **more})


def test_a_dump_with_the_models_config_holds_over_http(client: Client, llama31_dump: Dump) -> None:
    config = ("config.json", orjson_bytes(LLAMA31), "application/json")
    response = post(client, llama31_dump, "?layer=3", config=config)
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["holds"] is True and answer["measured"]["recipe"] == "exact"
    assert answer["expected"]["layer"] == 3 and answer["expected"]["params"]["scaling"] == "llama3"


def test_the_rope_in_the_query_is_read_as_table_reads_it(
    client: Client, llama31_dump: Dump
) -> None:
    query = (
        "?d_model=64&base=5e5&scaling=llama3&factor=8&original_max_position_embeddings=8192"
        "&low_freq_factor=1&high_freq_factor=4"
    )
    assert post(client, llama31_dump, query).json()["holds"] is True
    stated_base = post(client, llama31_dump, "?d_model=64&base=10000").json()
    assert stated_base["holds"] is False and stated_base["diagnosis"]


def test_a_list_in_the_query_reads_the_same_repeated_or_comma_separated(
    client: Client, llama31_dump: Dump
) -> None:
    """The document's default form of an array (name=a&name=b, which generated clients and
    schemathesis send) and one comma-separated value are the same factors; a number given twice
    is refused."""
    factors = [1.0] * 16 + [8.0] * 16
    rope = "?d_model=64&base=5e5"
    repeated = post(client, llama31_dump, rope + "".join(f"&freq_factors={f}" for f in factors))
    joined = post(client, llama31_dump, f"{rope}&freq_factors={','.join(map(str, factors))}")
    assert repeated.status_code == 200, repeated.text
    assert repeated.json() == joined.json()
    twice = post(client, llama31_dump, rope + "&base=5e5")
    assert twice.status_code == 422 and twice.json()["errors"][0]["loc"][-1] == "base"


def test_npy_parts_and_bfloat16_raw_parts_are_both_read(client: Client) -> None:
    params = RopeParams(d_model=16)
    x = vectors(32, 2, 16)
    parts = {
        "before": ("b.npy", npy(x), "application/x-npy"),
        "after": ("a.npy", npy(exact(params, x, FAR)), "application/x-npy"),
        "positions": ("p.npy", npy(FAR.astype(np.int32)), "application/x-npy"),
    }
    answer = client.post(f"{URL}?d_model=16", files=parts).json()
    assert answer["holds"] is True and answer["measured"]["dtypes"]["before"] == "float32"


def test_every_answer_is_what_the_openapi_document_says(client: Client, llama31_dump: Dump) -> None:
    import jsonschema

    document = client.get("/openapi.json").json()
    operation = document["paths"][URL]["post"]
    form = operation["requestBody"]["content"]["multipart/form-data"]["schema"]
    assert form["required"] == ["before", "after"]
    assert set(form["properties"]) == {"before", "after", "positions", "config"}
    parameters = {p["name"]: p["schema"] for p in operation["parameters"]}
    assert parameters["layout"]["enum"] == ["interleaved", "split"]
    assert "recipe" not in parameters  # every recipe is tried
    schema = operation["responses"]["200"]["content"]["application/json"]["schema"]
    measured, expected = schema["properties"]["measured"], schema["properties"]["expected"]
    assert schema["additionalProperties"] is False and measured["additionalProperties"] is False
    assert expected["required"] == ["params", "layer", "rotary_offset", "pairs", "apply", "mrope"]
    evidence = schema["properties"]["diagnosis"]["items"]["properties"]["evidence"]
    assert evidence["additionalProperties"] is False  # every member typed
    validator = jsonschema.Draft202012Validator(schema)
    x = vectors(32, 2, 128)
    nope = ("config.json", orjson_bytes(LLAMA4), "application/json")
    mrope, _, qwen = _dump(64, 2, "float32", "M-RoPE ids, rows dropped")
    sent = [
        post(client, llama31_dump, query)
        for query in ("?d_model=64&base=500000", "?d_model=64", "?d_model=32")
    ]
    sent.append(post(client, Dump(x, x.copy(), 0), "?layer=3", config=nope))  # a NoPE layer
    sent.append(post(client, mrope, "", **qwen))
    answers = [response.json() for response in sent]
    for answer in answers:
        assert not [e.message for e in validator.iter_errors(answer)], answer
    assert answers[3]["expected"]["params"] is None and answers[3]["holds"] is True
    assert answers[4]["expected"]["mrope"]["section"] == [2, 3, 3]
    assert [f["name"] for f in answers[4]["diagnosis"]] == ["mrope_section_mismatch"]


# --- hostile bodies ---------------------------------------------------------------------------


def _raw(shape: str, dtype: str, data: bytes) -> tuple[str, bytes, str, dict[str, str]]:
    return (
        "x.bin",
        data,
        "application/octet-stream",
        {"X-Array-Shape": shape, "X-Array-Dtype": dtype},
    )


_NAN = np.ones((4, 2, 16), np.float32)
_NAN[3, 1, 15] = np.nan
_HUGE_VALUE = np.full((4, 2, 16), 1e160)  # its square is past float64's range
_CLAIM = "{'descr': '<f4', 'fortran_order': False, 'shape': (1048576, 1048576), }"
_HUGE = b"\x93NUMPY\x01\x00" + len(_CLAIM).to_bytes(2, "little") + _CLAIM.encode()
_GOOD = _raw("4,2,16", "float32", np.ones((4, 2, 16), np.float32).tobytes())
_TWO = {"before": _GOOD, "after": _GOOD}
_CONFIG = ("c.json", orjson_bytes(LLAMA31), "x")
# Each: the parts, the query, and the part or parameter the refusal names.
HOSTILE: dict[str, tuple[dict[str, Any], str, str]] = {
    "shapes that disagree": (
        {**_TWO, "after": _raw("4,2,8", "float32", bytes(256))}, "d_model=16", "after"
    ),
    "NaN": ({**_TWO, "after": ("a.npy", npy(_NAN), "x")}, "d_model=16", "after"),
    "a float64 past 2^480": (
        {"before": ("b.npy", npy(_HUGE_VALUE), "x"), "after": ("a.npy", npy(_HUGE_VALUE), "x")},
        "d_model=16", "before",
    ),
    "a 0-d .npy": (
        {**_TWO, "before": ("b.npy", npy(np.array(1, np.float32)), "x")}, "d_model=16", "before"
    ),
    "a header claiming 2^40 values": (
        {**_TWO, "before": ("b.npy", _HUGE, "x")}, "d_model=16", "before"
    ),
    "negative positions": (
        {**_TWO, "positions": ("p.npy", npy(np.array([0, 1, -5, 3])), "x")}, "d_model=16",
        "positions",
    ),
    "positions of another length": (
        {**_TWO, "positions": ("p.npy", npy(np.arange(5)), "x")}, "d_model=16", "positions"
    ),
    "a missing part": ({"before": _GOOD}, "d_model=16", "after"),
    "a part of no name the operation takes": ({**_TWO, "weights": _GOOD}, "d_model=16", "weights"),
    "a base that is no number": (_TWO, "d_model=16&base=abc", "base"),
    "a layout of no such name": (_TWO, "d_model=16&layout=diagonal", "layout"),
    "a layer of a model it does not have": ({**_TWO, "config": _CONFIG}, "layer=7", "layer"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(HOSTILE))
def test_hostile_bodies_are_422_in_milliseconds_naming_the_part(client: Client, case: str) -> None:
    parts, query, named = HOSTILE[case]
    start = time.perf_counter()
    response = client.post(f"{URL}?{query}", files=parts)
    elapsed = time.perf_counter() - start
    assert response.status_code == 422, response.text
    problem = response.json()
    located = [str(error.get("loc")) for error in problem.get("errors", ())]
    assert named in problem["detail"] or any(named in loc for loc in located), problem
    assert elapsed < 0.5, f"{case}: {elapsed:.3f} s"


def test_a_body_that_is_not_multipart_is_refused(client: Client) -> None:
    response = client.post(f"{URL}?d_model=16", content=bytes(64),
                           headers={"content-type": "application/octet-stream"})  # fmt: skip
    assert response.status_code == 422 and "multipart/form-data" in response.text


def test_arrays_past_the_upload_limit_are_413(client_with: Any) -> None:
    small = client_with(max_gguf_bytes=4096)
    x = np.ones((64, 2, 16), np.float32)  # 8 KiB each
    response = small.post(f"{URL}?d_model=16", files=files(Dump(x, x, 0)))
    assert response.status_code == 413


# --- costs ------------------------------------------------------------------------------------


@pytest.fixture
def tracing() -> Iterator[None]:
    compile_kernels()
    from posenc.schemes.rope.applied.loops import compile_loops

    compile_loops()
    tracemalloc.start()
    try:
        yield
    finally:
        tracemalloc.stop()


def _dump(tokens: int, samples: int, dtype: str, fault: str) -> tuple[Dump, str, dict[str, Any]]:
    """A dump in ``dtype``, its query, and its other parts (M-RoPE's: the config)."""
    params = RopeParams(d_model=64, base=500000.0)
    x = vectors(tokens, samples, 64)
    after = exact(params, x, np.arange(tokens), "float64")
    if fault == "applied twice":
        after = exact(params, after, np.arange(tokens), "float64")
    if fault == "a float16 table":
        after = exact(params, x, np.arange(tokens), "float64", table="float16")
    if fault == "angles of no rope":
        after = exact(params, x, np.random.default_rng(1).integers(0, 2**20, tokens), "float64")
    if fault != "M-RoPE ids, rows dropped":
        if dtype == "bfloat16":
            return Dump(bfloat16(x), bfloat16(after), 0, dtype=dtype), "?d_model=64&base=500000", {}
        return Dump(x.astype(dtype), after.astype(dtype), 0), "?d_model=64&base=500000", {}
    ids = np.stack([np.arange(tokens) // 16, np.arange(tokens) % 16, np.arange(tokens) // 4])
    x = vectors(tokens, samples, 16)
    temporal = exact(RopeParams(d_model=16, base=1000000.0), x, ids[0])
    config = ("config.json", orjson_bytes(tiny_qwen2_vl_config()), "application/json")
    return Dump(x, temporal, 0, ids.astype(np.int64)), "", {"config": config}


@pytest.mark.parametrize(
    ("tokens", "samples", "dtype", "fault"),
    [
        (512, 8, "float32", "none"),
        (512, 8, "float32", "applied twice"),
        (4096, 4, "float32", "a float16 table"),
        (16, 1024, "float32", "a float16 table"),
        (4096, 1, "float32", "angles of no rope"),
        (2048, 2, "float32", "M-RoPE ids, rows dropped"),
        # Few tokens of many samples (a token's samples are more than one block of values),
        # up to a body at the upload limit (2 × 31.7 MiB of float16).
        (1, 65536, "float32", "none"),
        (3, 32768, "bfloat16", "applied twice"),
        (1, 260_000, "float16", "none"),
    ],
)
def test_no_request_allocates_more_than_it_reserved(
    tracing: None, tokens: int, samples: int, dtype: str, fault: str
) -> None:
    dump, query, more = _dump(tokens, samples, dtype, fault)

    async def send() -> httpx.Response:
        transport = httpx.ASGITransport(app=probe)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
            return await http.post(f"{URL}{query}", files={**files(dump), **more})

    gc.collect()
    probe = PeakOfEachRequest(create_app(Settings(memory_bytes=2**31)))
    response = asyncio.run(send())
    assert response.status_code == 200
    if fault == "a float16 table":  # the path that reads the data again, to the table's type
        assert names(response.json())[0] == "table_precision"
    [(peak, reserved)] = probe.measured
    assert 0 < peak <= reserved, f"measured {peak} > declared {reserved}"


@pytest.mark.parametrize(
    ("shape", "dtype"),
    [
        ((1, 2**21, 2), "float32"),
        ((1, 2**22, 4), "float16"),  # two arrays of 32 MiB: the upload limit
        ((1, 2**22, 4), "bfloat16"),
        ((2, 2, 2**17), "float32"),  # a head of more values than a block
    ],
)
def test_the_declared_cost_holds_what_answering_allocates_beyond_the_parts(
    tracing: None, shape: tuple[int, ...], dtype: str
) -> None:
    """Few tokens of many samples: the operation's own declaration against its own peak, the
    parts' bytes (the body, reserved apart) already held."""
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    made = part(bfloat16(x), "bfloat16") if dtype == "bfloat16" else part(x.astype(dtype))
    before, after = Part(made.data, made.headers), Part(bytes(made.data), made.headers)
    del x
    given = Upload(memoryview(b""), {"d_model": 2}, {}, {"before": (before,), "after": (after,)})
    declared = operation.size(given, SERVICE_DEFAULTS).cost.bytes
    gc.collect()
    tracemalloc.reset_peak()
    start, _ = tracemalloc.get_traced_memory()
    operation.handle(given, SERVICE_DEFAULTS)
    peak = tracemalloc.get_traced_memory()[1] - start
    assert 0 < peak <= declared, f"measured {peak} > declared {declared}"


@pytest.mark.serial
@pytest.mark.parametrize(
    ("tokens", "samples", "fault"),
    [
        (8, 8192, "none"),
        (8, 8192, "a float16 table"),
        (8, 8192, "no rotation"),  # every pairing and every table's grid tried, all tokens
        (1024, 64, "no rotation"),
    ],
)
def test_the_declared_work_holds_the_time_the_costliest_paths_take(
    tokens: int, samples: int, fault: str
) -> None:
    params = RopeParams(d_model=128, base=500000.0)
    x, positions = vectors(tokens, samples, 128), np.arange(tokens)
    after = exact(params, x, positions, "float32", table="float16" if "table" in fault else None)
    if fault == "no rotation":
        after = after + np.float32(1e-3) * vectors(tokens, samples, 128, seed=3)
    sent = {name: part(values) for name, values in (("before", x), ("after", after))}
    parts = {name: (Part(made.data, made.headers),) for name, made in sent.items()}
    given = Upload(memoryview(b""), {"d_model": 128, "base": 500000.0}, {}, parts)
    declared = operation.size(given, SERVICE_DEFAULTS).cost.work
    found = operation.handle(given, SERVICE_DEFAULTS)  # compiled loops warm
    expected = {
        "none": [],
        "a float16 table": ["table_precision"],
        "no rotation": ["not_a_rotation"],
    }
    assert names(found) == expected[fault]

    def took() -> int:
        started = time.thread_time_ns()
        operation.handle(given, SERVICE_DEFAULTS)
        return time.thread_time_ns() - started

    # The least of three: noise only adds.
    best = min(took() for _ in range(3))
    assert best <= declared, f"{best} ns taken, {declared} declared"

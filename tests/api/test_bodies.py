"""Request bodies cost what body_cost says and no more; oversized ones are refused unread."""

from __future__ import annotations

import asyncio
import gzip
import io
import re
import time
import tracemalloc
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import numpy as np
import numpy.typing as npt
import orjson
import pytest
from fastapi import Request
from fastapi.exceptions import RequestValidationError
from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.types import Message

from app import bodies
from app.main import create_app
from app.middleware import BodyLimitMiddleware
from app.problems import PROBLEMS
from app.settings import Settings
from posenc.errors import LimitError, ParameterError, PosencError
from tests.conftest import Client, get_scope

MiB = 2**20


def _peak(work: Callable[[], Any]) -> tuple[int, Any]:
    tracemalloc.start()
    try:
        result = work()
        return tracemalloc.get_traced_memory()[1], result
    finally:
        tracemalloc.stop()


# --- the limit ---------------------------------------------------------------------------------


def test_an_announced_oversized_body_is_answered_before_it_is_read() -> None:
    events: list[str] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        raise AssertionError("the application must not run")

    async def receive() -> Message:
        events.append("receive")
        return {"type": "http.request", "body": b"x" * 100, "more_body": False}

    async def send(message: Message) -> None:
        events.append(message["type"])
        if message["type"] == "http.response.start":
            assert message["status"] == 413
            assert (b"connection", b"close") in message["headers"]

    scope = {"type": "http", "headers": [(b"content-length", b"80000000")]}
    asyncio.run(BodyLimitMiddleware(app, max_body_bytes=1000)(scope, receive, send))
    # The whole 413 is written before anything is read; reading after it only drops bytes.
    assert events[:2] == ["http.response.start", "http.response.body"]
    assert events[-1] == "http.response.body"


def test_a_streamed_body_is_refused_once_it_passes_the_limit(
    client_with: Callable[..., Client],
) -> None:
    client = client_with(max_body_bytes=10_000)

    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"d_model": 2, "positions": ['
        for _ in range(1000):
            yield b"0," * 500

    response = client.post(
        "/v1/encode", content=chunks(), headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 413
    assert response.headers["content-type"] == "application/problem+json"
    assert response.headers["connection"] == "close"


def test_a_positions_list_over_the_limit_is_refused_before_it_is_parsed(
    client_with: Callable[..., Client],
) -> None:
    client = client_with(max_positions=1000)
    body = b'{"d_model": 2, "positions": [' + b"7," * 100_000 + b"7]}"
    response = client.post("/v1/encode", content=body)
    assert response.status_code == 422
    problem = response.json()
    assert problem["type"] == "urn:posenc:problem:limit-exceeded"
    assert problem["errors"][0]["loc"] == ["body", "positions"]
    assert "100001" in problem["detail"]

    def refuse() -> None:
        with pytest.raises(LimitError):
            bodies.read_object(body, {"positions": 1}, max_items={"positions": 1000})

    peak, _ = _peak(refuse)
    assert peak < 4 * MiB  # a scan block: nothing sized by the list


# --- JSON: parsed straight into arrays, at a known cost ------------------------------------------


def _positions_body(size: int) -> bytearray:
    # One digit per position: the most numbers per byte, so the largest array per body byte.
    return bytearray(b'{"d_model": 2, "positions": [' + b"0," * (size // 2) + b"0]}")


def _embeddings_body(size: int, width: int) -> bytearray:
    row = b"[" + b",".join([b"0"] * width) + b"]"
    rows = max(1, size // len(row))
    return bytearray(
        b'{"d_model": %d, "positions": [0], "embeddings": [%s]}' % (width, b",".join([row] * rows))
    )


def _data_body(size: int, width: int, random: bool) -> bytearray:
    if random:
        rows = max(1, size // (20 * width))
        values = np.random.default_rng(0).standard_normal((rows, width))
        return bytearray(orjson.dumps({"data": values}, option=orjson.OPT_SERIALIZE_NUMPY))
    row = b"[" + b",".join([b"0"] * width) + b"]"
    return bytearray(b'{"data": [%s]}' % b",".join([row] * max(1, size // len(row))))


BODIES: dict[str, tuple[Callable[[int], bytearray], dict[str, int]]] = {
    "positions": (lambda n: _positions_body(n), {"positions": 1}),
    "embeddings, d_model 1": (lambda n: _embeddings_body(n, 1), {"positions": 1, "embeddings": 2}),
    "embeddings, d_model 64": (
        lambda n: _embeddings_body(n, 64),
        {"positions": 1, "embeddings": 2},
    ),
    "data of zeros": (lambda n: _data_body(n, 64, random=False), {"data": 2}),
    "data of random floats": (lambda n: _data_body(n, 64, random=True), {"data": 2}),
}


@pytest.mark.parametrize("size", [1000, 6 * MiB])
@pytest.mark.parametrize("kind", list(BODIES))
def test_parsing_a_json_body_peaks_under_its_declared_cost(kind: str, size: int) -> None:
    make, arrays = BODIES[kind]
    body = make(size)
    peak, (_, parsed) = _peak(lambda: bodies.read_object(body, arrays))
    held = len(body) + peak
    assert held <= bodies.body_cost(len(body), "application/json").bytes
    # Not a Python object per number: the arrays and the body are nearly all there is.
    arrays_bytes = sum(a.nbytes for a in parsed.values() if a is not None)
    assert peak <= arrays_bytes + 8 * MiB


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_a_json_table_is_parsed_straight_into_its_dtype_under_its_cost(dtype: str) -> None:
    body = _data_body(8 * MiB, 64, random=False)
    peak, table = _peak(lambda: bodies.read_table(body, "application/json", {}, dtype))
    assert table.dtype == dtype
    assert len(body) + peak <= bodies.body_cost(len(body), "application/json").bytes
    assert peak <= table.nbytes + 8 * MiB


@pytest.mark.parametrize("width", [1, 3, 700, 40_000])
def test_rows_across_parse_slices_are_read_exactly(width: int) -> None:
    values = np.random.default_rng(width).standard_normal((max(2, 300_000 // width), width))
    values[0, 0], values[-1, -1] = -0.0, 1e300
    body = orjson.dumps({"data": values}, option=orjson.OPT_SERIALIZE_NUMPY)
    table = bodies.read_object(body, {"data": 2})[1]["data"]
    assert table is not None
    assert np.array_equal(table, values)
    assert np.array_equal(table, np.array(orjson.loads(body)["data"]))


def test_every_json_number_form_reads_as_orjson_reads_it() -> None:
    numbers = b"0, -0, 1, -17, 3.0, 1e3, 1E+3, 2.5e-3, -1.25E-10, 18446744073709551615, 1e308"
    body = b'{"x": [' + b", ".join([numbers] * 20_000) + b"]}"
    parsed = bodies.read_object(body, {"x": 1})[1]["x"]
    assert parsed is not None
    expected = np.array(orjson.loads(body)["x"], dtype=np.float64)
    assert np.array_equal(parsed, expected)
    assert np.array_equal(np.signbit(parsed), np.signbit(expected))


def _loc_of(body: bytes, arrays: dict[str, int]) -> list[Any]:
    with pytest.raises(RequestValidationError) as caught:
        bodies.read_object(body, arrays)
    return list(caught.value.errors()[0]["loc"])


def test_a_bad_value_deep_in_a_large_list_is_named_by_its_index() -> None:
    body = b'{"positions": [' + b"1," * 300_000 + b"true, 2]}"
    assert _loc_of(body, {"positions": 1}) == ["body", "positions", 300_000]
    body = b'{"positions": [' + b"1," * 300_000 + b"1.2.3]}"
    assert _loc_of(body, {"positions": 1}) == ["body", "positions", 300_000]


def test_a_bad_row_deep_in_a_large_table_is_named_by_its_row() -> None:
    rows = [b"[1,2]"] * 100_000
    ragged = b'{"data": [' + b",".join([*rows, b"[1]", *rows]) + b"]}"
    assert _loc_of(ragged, {"data": 2}) == ["body", "data", 100_000]
    text = b'{"data": [' + b",".join([*rows, b'[1, "x"]']) + b"]}"
    assert _loc_of(text, {"data": 2}) == ["body", "data", 100_000, 1]


@pytest.mark.parametrize(
    "body",
    [
        b'{"positions": [1, 2,]}',
        b'{"positions": [1,, 2]}',
        b'{"positions": [[1], 2]}',
        b'{"positions": [1, 2}',
        b'{"positions": [1, 2]',
        b'{"data": [[1, 2] [3, 4]]}',
        b'{"data": [[1, 2], 3]}',
        b'{"data": [[[1]]]}',
        b'{"positions": [1]} []',
        b'{"positions": [01]}',
    ],
)
def test_malformed_arrays_are_422_naming_the_member(body: bytes) -> None:
    loc = _loc_of(body, {"positions": 1, "data": 2})
    assert loc[0] == "body"


def test_positions_may_be_a_comma_separated_string_as_in_a_query(client: Client) -> None:
    by_string = client.post("/v1/encode", json={"d_model": 4, "positions": "0,5,17"})
    by_list = client.post("/v1/encode", json={"d_model": 4, "positions": [0, 5, 17]})
    assert by_string.status_code == 200
    assert by_string.json()["data"] == by_list.json()["data"]


def test_integer_valued_floats_are_positions_and_others_are_named(client: Client) -> None:
    ok = client.post("/v1/encode", json={"d_model": 2, "positions": [3.0, 1e3]})
    assert ok.json()["params"]["positions"] == [3, 1000]
    for bad in (-1, 2**31, 2.5):
        response = client.post("/v1/encode", json={"d_model": 2, "positions": [0, bad]})
        assert response.status_code == 422
        assert response.json()["errors"][0]["loc"] == ["body", "positions", 1]


# --- binary bodies: a view of the received bytes, or one copy ----------------------------------


def _npy(values: npt.NDArray[Any]) -> bytearray:
    stream = io.BytesIO()
    np.save(stream, values)
    return bytearray(stream.getvalue())


def test_a_native_npy_body_is_viewed_not_copied() -> None:
    values = np.random.default_rng(1).standard_normal((2048, 512)).astype(np.float32)
    body = _npy(values)
    peak, table = _peak(lambda: bodies.read_table(body, "application/x-npy", {}, "float32"))
    assert np.array_equal(table, values)
    assert np.shares_memory(table, np.frombuffer(body, np.uint8))
    assert peak <= 2 * MiB  # the finite check's block, not a copy of the 4 MiB table


@pytest.mark.parametrize(
    "values",
    [
        np.random.default_rng(2).standard_normal((2048, 512)).astype(">f4"),
        np.asfortranarray(np.random.default_rng(3).standard_normal((2048, 512))),
    ],
    ids=["big-endian", "fortran-order"],
)
def test_a_converted_npy_body_costs_one_copy(values: npt.NDArray[Any]) -> None:
    body = _npy(values)
    peak, table = _peak(lambda: bodies.read_table(body, "application/x-npy", {}, "float32"))
    assert np.array_equal(table, values) and table.flags.c_contiguous
    assert peak <= table.nbytes + 2 * MiB
    assert len(body) + peak <= bodies.body_cost(len(body), "application/x-npy").bytes


def test_a_raw_body_is_viewed_not_copied() -> None:
    values = np.random.default_rng(4).standard_normal((1024, 1024))
    body = bytearray(values.astype("<f8").tobytes())
    headers = {"x-array-shape": "1024,1024", "x-array-dtype": "float64"}
    peak, table = _peak(
        lambda: bodies.read_table(body, "application/octet-stream", headers, "float64")
    )
    assert np.array_equal(table, values)
    assert peak <= 2 * MiB
    assert len(body) + peak <= bodies.body_cost(len(body), "application/octet-stream").bytes


@pytest.mark.parametrize("announced", [True, False])
def test_receive_reads_the_body_into_one_buffer(announced: bool) -> None:
    body = np.random.default_rng(5).bytes(4 * MiB)
    chunks = [body[k : k + 65536] for k in range(0, len(body), 65536)]
    headers = [(b"content-length", str(len(body)).encode())] if announced else []

    async def receive() -> Message:
        chunk = chunks.pop(0)
        return {"type": "http.request", "body": chunk, "more_body": bool(chunks)}

    request = Request({"type": "http", "method": "POST", "headers": headers}, receive)

    async def read() -> tuple[int, bool]:
        # Measured inside the loop: asyncio.run itself allocates around a large result.
        tracemalloc.start()
        try:
            received = await bodies.receive(request, len(body))
            return tracemalloc.get_traced_memory()[1], received == body
        finally:
            tracemalloc.stop()

    peak, same = asyncio.run(read())
    assert same
    # One buffer and a chunk in flight; growing without Content-Length over-allocates 1/8.
    assert peak <= len(body) * (1 if announced else 1.25) + MiB


_JSONISH = st.sampled_from(
    [
        b"{",
        b"}",
        b"[",
        b"]",
        b",",
        b":",
        b'"',
        b"\\",
        b" ",
        b"0",
        b"-1",
        b"2.5",
        b"e3",
        b"true",
        b"null",
        b'"positions"',
        b'"embeddings"',
        b'"data"',
        b'"d_model"',
        b"\xff",
        b"x",
    ]
)


def _names_the_body_or_a_member_of_it(refusal: Exception, body: bytes) -> None:
    """What the 422 names (``errors[].loc`` or the problem's parameter): the body, or a member
    the body holds."""
    if isinstance(refusal, RequestValidationError):
        named = [error["loc"] for error in refusal.errors()]
        assert named and all(loc[0] == "body" for loc in named), named
        assert all(error["msg"] for error in refusal.errors())
        members = [loc[1] for loc in named if len(loc) > 1]
    else:
        assert isinstance(refusal, ParameterError), refusal
        assert PROBLEMS[type(refusal)][0] == 422
        members = [] if refusal.param == "body" else [refusal.param]
    assert all(isinstance(m, str) and f'"{m}"'.encode() in body for m in members), members


@settings(max_examples=400, deadline=None)
@given(st.lists(_JSONISH, max_size=40).map(b"".join))
def test_any_bytes_are_parsed_or_refused_with_a_named_422(body: bytes) -> None:
    for candidate in (body, b'{"positions": [' + body, b'{"data": [[' + body):
        try:
            bodies.read_object(candidate, {"positions": 1, "embeddings": 2, "data": 2})
        except (RequestValidationError, PosencError) as refusal:
            _names_the_body_or_a_member_of_it(refusal, candidate)


def _streamed(
    head: bytes, filler: bytes, count: int, tail: bytes = b"]}"
) -> Callable[[], AsyncIterator[bytes]]:
    async def chunks() -> AsyncIterator[bytes]:
        yield head
        for _ in range(count):
            yield filler
        yield tail

    return chunks


def test_a_chunked_body_reserves_what_fits_and_is_refused_past_it(
    client_with: Callable[..., Client],
) -> None:
    # In a 256 MiB budget the largest body (64 MiB of JSON) would cost 344 MiB: a body of
    # unknown length reserves a quarter of the budget instead, and is held to it.
    client = client_with(memory_bytes=256 * MiB)
    limit = bodies.chunked_limit(64 * MiB, 256 * MiB, "application/json")
    assert limit == 8 * MiB
    small = _streamed(b'{"d_model": 2, "positions": [1', b",1" * 1000, 10)
    served = client.post(
        "/v1/encode", content=small(), headers={"Content-Type": "application/json"}
    )
    assert served.status_code == 200, served.text
    large = _streamed(b'{"d_model": 2, "positions": [1', b" " * MiB, 9)
    refused = client.post(
        "/v1/encode", content=large(), headers={"Content-Type": "application/json"}
    )
    assert refused.status_code == 413
    assert "Content-Length" in refused.json()["detail"]
    budget = client.app.state.budget
    assert (budget.held, budget.admitted) == (0, 0)


def test_a_get_with_a_streamed_body_past_the_limit_is_413_not_500(
    client_with: Callable[..., Client],
) -> None:
    client = client_with(max_body_bytes=10_000)
    chunks = _streamed(b"", b"x" * 4096, 100)
    response = client.request(
        "GET", "/v1/table?d_model=512&seq_len=4096&format=bin", content=chunks()
    )
    assert response.status_code == 413
    assert response.headers["content-type"] == "application/problem+json"


def test_chunked_bodies_keep_only_what_they_turned_out_to_need() -> None:
    # Each reserves a quarter of the budget while it streams, then only what its bytes cost:
    # six at once must not hold the budget against their own answers (or anyone else's).
    app = create_app(Settings(memory_bytes=256 * MiB, admission_wait_s=5))

    async def one(client: httpx.AsyncClient, chunked: bool) -> int:
        body = b'{"d_model": 4, "positions": [1, 2, 3]}'

        async def pieces() -> AsyncIterator[bytes]:
            yield body

        content: Any = pieces() if chunked else body
        headers = {"Content-Type": "application/json"}
        return (await client.post("/v1/encode", content=content, headers=headers)).status_code

    async def crowd() -> list[int]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            return list(await asyncio.gather(*(one(client, k < 6) for k in range(7))))

    begun = time.monotonic()
    assert asyncio.run(crowd()) == [200] * 7
    assert time.monotonic() - begun < 2  # nobody waited for memory
    budget = app.state.budget
    assert (budget.held, budget.admitted) == (0, 0)


@pytest.mark.parametrize("shape", ["0", "4,0", "0,8"])
def test_an_empty_dimension_is_refused_by_the_rule_the_header_states(
    client: Client, shape: str
) -> None:
    """The schema of X-Array-Shape says every size is ≥ 1, and the refusal names the header
    (it was an about:blank refusal of a header the schema allowed)."""
    document = client.get("/openapi.json").json()
    [header] = [
        p
        for p in document["paths"]["/v1/sinusoidal/verify"]["post"]["parameters"]
        if p["name"] == "X-Array-Shape"
    ]
    assert not re.fullmatch(header["schema"]["pattern"], shape)
    assert re.fullmatch(header["schema"]["pattern"], "4,8")
    response = client.post(
        "/v1/sinusoidal/verify?d_model=8",
        content=b"",
        headers={
            "Content-Type": "application/octet-stream",
            "X-Array-Shape": shape,
            "X-Array-Dtype": "float32",
        },
    )
    assert response.status_code == 422
    assert response.json()["errors"][0]["loc"][-1] == "X-Array-Shape"


@pytest.mark.parametrize("coding", ["gzip", "deflate, gzip", "br"])
def test_a_body_in_a_content_coding_is_refused_naming_the_coding(
    client: Client, coding: str
) -> None:
    # Read as raw bytes, a gzipped body was refused as "not valid UTF-8" (issue 34); decoding
    # it would size it only once decoded, past what POSENC_MAX_BODY_BYTES reserves for.
    body = gzip.compress(b'{"d_model": 2, "positions": [0, 1]}')
    response = client.post(
        "/v1/encode",
        content=body,
        headers={"Content-Type": "application/json", "Content-Encoding": coding},
    )
    assert response.status_code == 415
    assert response.headers["content-type"] == "application/problem+json"
    assert response.headers["accept-encoding"] == "identity"
    assert coding.split(", ")[-1] in response.json()["detail"]


def test_an_identity_coded_body_is_read_as_sent(client: Client) -> None:
    response = client.post(
        "/v1/encode",
        content=b'{"d_model": 2, "positions": [0, 1]}',
        headers={"Content-Type": "application/json", "Content-Encoding": "identity"},
    )
    assert response.status_code == 200


def test_a_multipart_body_of_more_parts_than_any_operation_reads_is_refused_as_read() -> None:
    """Parts gathered as they come, a list a name, and no more than MOST_PARTS of them: a body
    of tiny repeated parts (a 64 MiB body holds ~900,000) is refused at the first one past."""
    boundary = "b0"
    head = 'Content-Disposition: form-data; name="external"; filename="d@0"'
    part = f"--{boundary}\r\n{head}\r\n\r\nx\r\n"
    body = bytearray((part * (bodies.multipart.MOST_PARTS + 1) + f"--{boundary}--\r\n").encode())
    content_type = f"multipart/form-data; boundary={boundary}"
    sent = bodies.multipart.parts(body[: len(part) * 3] + f"--{boundary}--\r\n".encode(),
                                  content_type, (), ("external",))  # fmt: skip
    assert [p.filename for p in sent["external"]] == ["d@0"] * 3
    with pytest.raises(LimitError, match="more than 4096 parts") as refused:
        bodies.multipart.parts(body, content_type, (), ("external",))
    assert refused.value.param == "body"


def test_an_extra_query_array_past_its_schema_is_refused_before_it_is_parsed() -> None:
    """Counted, not parsed: 32769 items of garbage are refused for their number, in either form
    (a URL past what an HTTP client sends, so the query is handed to the reader itself)."""
    from app.extra_query import extra_query
    from posenc.registry import get

    (extra,) = (e for e in get("rope").extras if e.name == "applied")
    many = "&".join(["freq_factors=x"] * 32769)
    for query in (many, "freq_factors=" + ",".join(["x"] * 32769)):
        request = Request(get_scope("/v1/rope/applied", query.encode()))
        with pytest.raises(ParameterError, match="at most 32768 numbers, got 32769") as refused:
            extra_query(request, extra)
        assert refused.value.param == "freq_factors"

"""Every array endpoint in every format, each decoded back and compared with the core."""

from __future__ import annotations

import asyncio
import io
import struct
from collections.abc import Callable

import numpy as np
import pytest
from PIL import Image
from starlette.types import Message

from app.formats import raw
from app.models import Format
from posenc import SinusoidalParams, encode, table
from posenc.similarity import against, matrix
from tests.conftest import Client, get_scope

PARAMS = SinusoidalParams(d_model=6)
ENDPOINTS: dict[str, Callable[[], np.ndarray]] = {
    "/v1/table?d_model=6&seq_len=5": lambda: table(PARAMS, 5, dtype="float32"),
    "/v1/table?d_model=6&seq_len=5&offset=1000000&layout=split&dtype=float64": lambda: table(
        SinusoidalParams(d_model=6, layout="split"), 5, 10**6, "float64"
    ),
    "/v1/encode?d_model=6&positions=0,9,3,9&dtype=float16": lambda: encode(
        PARAMS, np.array([0, 9, 3, 9]), "float16"
    ),
    "/v1/similarity?d_model=6&seq_len=5": lambda: matrix(table(PARAMS, 5), "cosine").astype(
        np.float32
    ),
    "/v1/similarity?d_model=6&seq_len=5&reference=2&metric=euclidean": lambda: against(
        table(PARAMS, 5), table(PARAMS, 1, 2)[0], "euclidean"
    ).astype(np.float32),
}


@pytest.fixture(params=list(ENDPOINTS), ids=lambda url: url.split("?")[0] + url[-12:])
def endpoint(request: pytest.FixtureRequest) -> tuple[str, np.ndarray]:
    return request.param, ENDPOINTS[request.param]()


def test_json_data_parses_to_the_exact_array(
    client: Client, endpoint: tuple[str, np.ndarray]
) -> None:
    url, expected = endpoint
    response = client.get(url)
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert body["scheme"] == "sinusoidal"
    assert body["shape"] == list(expected.shape) and body["dtype"] == str(expected.dtype)
    assert np.array_equal(np.array(body["data"], dtype=expected.dtype), expected)


def test_bin_is_raw_little_endian_with_shape_headers(
    client: Client, endpoint: tuple[str, np.ndarray]
) -> None:
    url, expected = endpoint
    response = client.get(url + "&format=bin")
    assert response.headers["content-type"] == "application/octet-stream"
    assert response.headers["x-array-shape"] == ",".join(map(str, expected.shape))
    assert response.headers["x-array-dtype"] == str(expected.dtype)
    decoded = np.frombuffer(response.content, dtype=expected.dtype.newbyteorder("<"))
    assert np.array_equal(decoded.reshape(expected.shape), expected)


def test_npy_loads_with_exact_dtype_and_shape(
    client: Client, endpoint: tuple[str, np.ndarray]
) -> None:
    url, expected = endpoint
    response = client.get(url + "&format=npy")
    assert response.headers["content-type"] == "application/x-npy"
    assert response.content[6:8] == b"\x01\x00"  # format version 1.0
    loaded = np.load(io.BytesIO(response.content), allow_pickle=False)
    assert loaded.dtype == expected.dtype and np.array_equal(loaded, expected)


def test_csv_rows_parse_back_to_the_exact_values(
    client: Client, endpoint: tuple[str, np.ndarray]
) -> None:
    url, expected = endpoint
    response = client.get(url + "&format=csv")
    assert response.headers["content-type"].startswith("text/csv")
    lines = response.text.splitlines()
    assert len(lines) == expected.shape[0]
    parsed = np.array([[float(v) for v in line.split(",")] for line in lines], expected.dtype)
    assert np.array_equal(parsed.reshape(expected.shape), expected)


def test_plotly_is_a_labelled_figure(client: Client, endpoint: tuple[str, np.ndarray]) -> None:
    url, expected = endpoint
    figure = client.get(url + "&format=plotly").json()
    trace = figure["data"][0]
    assert trace["type"] == ("heatmap" if expected.ndim == 2 else "scatter")
    values = np.array(trace["z"] if expected.ndim == 2 else trace["y"])
    np.testing.assert_allclose(values, expected, rtol=1e-3)
    assert figure["layout"]["title"]["text"]
    assert figure["layout"]["xaxis"]["title"]["text"]
    if expected.ndim == 2 and expected.min() < 0:
        assert trace["zmin"] == -trace["zmax"]


@pytest.mark.parametrize(
    ("url", "across", "down"),
    [
        ("/v1/sinusoidal/table?d_model=6&seq_len=3&offset=5", "dimension", "position"),
        ("/v1/rope/table?d_model=8&seq_len=3&offset=5", "dimension", "position"),
        ("/v1/alibi/table?num_heads=2&seq_len=3&offset=5", "position", "position"),
        ("/v1/t5/table?seq_len=3&offset=5", "position", "position"),
    ],
)
def test_a_heatmaps_axes_are_named_for_what_they_hold(
    client: Client, url: str, across: str, down: str
) -> None:
    """Columns are dimensions where they do not grow with the rows (a rope's pairs), positions
    where they do (ALiBi's and T5's keys); each axis of positions is numbered by them."""
    figure = client.get(url + "&format=plotly").json()
    layout, trace = figure["layout"], figure["data"][0]
    assert (layout["xaxis"]["title"]["text"], layout["yaxis"]["title"]["text"]) == (across, down)
    assert trace["y"] == [5, 6, 7]
    assert trace.get("x") == ([5, 6, 7] if across == "position" else None)


def test_png_is_a_heatmap_of_the_array(client: Client, endpoint: tuple[str, np.ndarray]) -> None:
    url, expected = endpoint
    response = client.get(url + "&format=png")
    assert response.headers["content-type"] == "image/png"
    image = Image.open(io.BytesIO(response.content))
    width, height = image.size
    rows, columns = expected.shape if expected.ndim == 2 else (1, expected.shape[0])
    assert width % columns == 0 and height % rows == 0 and width >= columns
    pixels = np.asarray(image.convert("RGB"))
    blocks = pixels.reshape(rows, height // rows, columns, width // columns, 3)
    assert (blocks == blocks[:, :1, :, :1]).all()  # each value one block of one colour


@pytest.mark.parametrize(
    ("accept", "media_type"),
    [
        ("application/x-npy", "application/x-npy"),
        ("text/csv", "text/csv; charset=utf-8"),
        ("image/png;q=0.5, application/octet-stream", "application/octet-stream"),
        ("text/html", "application/json"),
        ("*/*", "application/json"),
    ],
)
def test_accept_chooses_the_format(client: Client, accept: str, media_type: str) -> None:
    response = client.get("/v1/table?d_model=4&seq_len=2", headers={"Accept": accept})
    assert response.headers["content-type"] == media_type


def test_format_parameter_wins_over_accept(client: Client) -> None:
    response = client.get(
        "/v1/table?d_model=4&seq_len=2&format=csv", headers={"Accept": "application/x-npy"}
    )
    assert response.headers["content-type"].startswith("text/csv")


def test_float32_json_is_written_in_shortest_float32_form(client: Client) -> None:
    text = client.get("/v1/encode?d_model=2&positions=1").text
    assert '"data":[[0.84147096,0.5403023]]' in text


def test_float16_json_is_written_in_shortest_float16_form(client: Client) -> None:
    text = client.get("/v1/encode?d_model=4&positions=1&dtype=float16").text
    assert '"data":[[0.8413,0.5405,0.01,1.0]]' in text


def test_png_takes_width_and_height_bounds(client: Client) -> None:
    png = client.get("/v1/table?d_model=64&seq_len=100&format=png&width=300&height=120").content
    assert struct.unpack(">II", png[16:24]) == (300, 120)
    other = client.get("/v1/table?d_model=64&seq_len=100&format=png&width=301")
    assert struct.unpack(">II", other.content[16:24])[0] == 301
    assert (
        other.headers["etag"]
        != client.get("/v1/table?d_model=64&seq_len=100&format=png").headers["etag"]
    )


def test_width_shapes_a_png_only_and_leaves_other_formats_and_their_etag_alone(
    client: Client,
) -> None:
    plain = client.get("/v1/table?d_model=4&seq_len=3&format=json")
    sized = client.get("/v1/table?d_model=4&seq_len=3&format=json&width=100")
    assert sized.content == plain.content and sized.headers["etag"] == plain.headers["etag"]
    png = client.get("/v1/table?d_model=4&seq_len=3&format=png&width=100")
    other = client.get("/v1/table?d_model=4&seq_len=3&format=png")
    assert png.headers["etag"] != other.headers["etag"]


def test_similarity_png_takes_the_bounds_too(client: Client) -> None:
    png = client.get("/v1/similarity?d_model=8&seq_len=10&format=png&width=40&height=30").content
    assert struct.unpack(">II", png[16:24]) == (40, 30)


@pytest.mark.parametrize("fmt", ["bin", "npy"])
def test_binary_values_are_a_read_only_view_of_the_array_not_a_copy(fmt: Format) -> None:
    array = np.arange(12, dtype=np.float32).reshape(3, 4)
    array.flags.writeable = False
    head, values = raw(array, fmt)
    assert values.readonly
    assert np.shares_memory(np.frombuffer(values, dtype=np.float32), array)
    saved = io.BytesIO()
    np.save(saved, array, allow_pickle=False)
    assert head + bytes(values) == (saved.getvalue() if fmt == "npy" else array.tobytes())


def test_an_npy_answer_is_its_header_then_a_view_of_the_cached_table(client: Client) -> None:
    """Two pieces, never joined: the values are the cached array's own memory, and the replayed
    answer is the same pieces again."""
    url = b"d_model=64&seq_len=32&format=npy"
    pieces: list[list[bytes | memoryview]] = []
    for _ in range(2):
        pieces.append(_asgi_body_messages(client, "/v1/sinusoidal/table", url))
    for (head, values), expected in zip(pieces, pieces[1:] + pieces[:1], strict=True):
        assert isinstance(values, memoryview) and values.readonly and len(head) % 64 == 0
        assert bytes(head) + bytes(values) == bytes(expected[0]) + bytes(expected[1])
    cached = table(SinusoidalParams(d_model=64), 32, dtype="float32")
    sent = np.frombuffer(pieces[0][1], dtype=np.float32).reshape(cached.shape)
    assert np.array_equal(sent, cached) and not sent.flags.writeable


def _asgi_body_messages(client: Client, path: str, query: bytes) -> list[bytes | memoryview]:
    sent: list[Message] = []

    requested = False

    async def receive() -> Message:
        nonlocal requested
        if requested:  # then nothing more until the answer is out, as from a real client
            await asyncio.Event().wait()
        requested = True
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Message) -> None:
        sent.append(message)

    scope = get_scope(path, query)
    asyncio.run(client.app(scope, receive, send))
    assert sent[0]["status"] == 200
    bodies = [m["body"] for m in sent if m["type"] == "http.response.body"]
    length = int(dict(sent[0]["headers"])[b"content-length"])
    assert sum(map(len, bodies)) == length
    return bodies

"""One short function per endpoint: parameters → core (through the cache) → response.

The functions are plain ``def``: FastAPI runs them in its thread pool, so NumPy work never
blocks the event loop.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Annotated, Any

import numpy as np
import numpy.typing as npt
import orjson
from fastapi import APIRouter, Query, Request, Response
from starlette.concurrency import run_in_threadpool

import posenc
from app import formats, responses
from app.bodies import read_table
from app.params import (
    TEXT_FORMATS,
    ConformanceQuery,
    EncodeBody,
    EncodeQuery,
    EncodingQuery,
    Format,
    SimilarityQuery,
    TableQuery,
    VerifyQuery,
    check_consecutive,
    check_size,
)
from app.responses import Body
from app.settings import Settings
from posenc import conformance, similarity
from posenc.cache import ByteBoundedCache
from posenc.errors import ParameterError

router = APIRouter(prefix="/v1")

_ARRAY_CONTENT: dict[str, dict[str, Any]] = {
    media: {} for media in sorted(set(formats.MEDIA_TYPES.values()))
}
_ARRAY_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"description": "the array, in the negotiated format", "content": _ARRAY_CONTENT},
    304: {"description": "the If-None-Match tag matched: the cached copy is current"},
    422: {
        "description": "a parameter is invalid, not applicable, or over a size limit",
        "content": {"application/problem+json": {}},
    },
}


def _state(request: Request) -> tuple[Settings, ByteBoundedCache]:
    return request.app.state.settings, request.app.state.cache


def _check_sizes(settings: Settings, fmt: Format, param: str, what: str, size: int) -> None:
    check_size(param, what, size, settings.max_elements, "POSENC_MAX_ELEMENTS")
    if fmt in TEXT_FORMATS:
        check_size(param, what, size, settings.max_text_elements, "POSENC_MAX_TEXT_ELEMENTS")


def _canonical(query: EncodingQuery, params: Any, **extra: Any) -> dict[str, Any]:
    return {**dataclasses.asdict(params), "dtype": query.dtype, **extra}


def _serve(
    request: Request,
    canonical: dict[str, Any],
    fmt: Format,
    render: Callable[[bool], Body],
) -> Response:
    """The cached GET path: 304 if the client has it, else the body from cache or ``render``."""
    _, cache = _state(request)
    etag = responses.etag_for(request.url.path, canonical, fmt)
    matched = responses.matching_tag(request, etag)
    if matched is not None:
        return responses.not_modified(matched)
    gzip = responses.accepts_gzip(request)
    body = cache.get_or_compute(("body", etag, gzip), lambda: render(gzip))
    return responses.send(body, etag)


def _table(
    cache: ByteBoundedCache,
    scheme: str,
    params: Any,
    positions: npt.NDArray[np.int64],
    dtype: str,
    key: tuple[Any, ...],
) -> npt.NDArray[Any]:
    encode = posenc.get(scheme).encode
    return cache.get_or_compute(
        ("array", scheme, params, dtype, *key), lambda: encode(params, positions, dtype)
    )


def _consecutive(
    request: Request, query: TableQuery | VerifyQuery, params: Any, dtype: str
) -> npt.NDArray[Any]:
    _, cache = _state(request)
    positions = np.arange(query.offset, query.offset + query.seq_len, dtype=np.int64)
    key = ("range", query.seq_len, query.offset)
    return _table(cache, query.scheme, params, positions, dtype, key)


@router.get("/table", responses=_ARRAY_RESPONSES, response_class=Response)
def table(request: Request, query: Annotated[TableQuery, Query()]) -> Response:
    """The encodings of positions `offset … offset+seq_len-1`: shape `(seq_len, d_model)`.

    `curl 'http://127.0.0.1:8000/v1/table?d_model=4&seq_len=3'`
    """
    settings, _ = _state(request)
    params = query.core()
    check_consecutive(query.seq_len, query.offset)
    fmt = formats.negotiate(query.format, request.headers.get("accept"))
    _check_sizes(
        settings, fmt, "seq_len", "the table (seq_len × d_model)", query.seq_len * query.d_model
    )
    canonical = _canonical(query, params, seq_len=query.seq_len, offset=query.offset)
    labels = formats.Labels(
        f"{query.scheme} encoding, d_model={query.d_model}",
        "dimension",
        "position",
        "value",
        y_values=list(range(query.offset, query.offset + query.seq_len)),
    )

    def render(gzip: bool) -> Body:
        array = _consecutive(request, query, params, query.dtype)
        envelope = {"scheme": query.scheme, "params": canonical}
        return Body.of(array, fmt, envelope, labels, gzip)

    return _serve(request, canonical, fmt, render)


@router.get("/encode", responses=_ARRAY_RESPONSES, response_class=Response)
def encode_get(request: Request, query: Annotated[EncodeQuery, Query()]) -> Response:
    """The encodings of the listed positions, in the order given: `(len(positions), d_model)`.

    `curl 'http://127.0.0.1:8000/v1/encode?d_model=8&positions=0,5,17'`
    """
    settings, cache = _state(request)
    params = query.core()
    fmt = formats.negotiate(query.format, request.headers.get("accept"))
    _check_positions(settings, fmt, query.positions, query.d_model)
    canonical = _canonical(query, params, positions=query.positions)
    labels = formats.Labels(
        f"{query.scheme} encoding of chosen positions",
        "dimension",
        "row (position as listed)",
        "value",
    )

    def render(gzip: bool) -> Body:
        positions = np.array(query.positions, dtype=np.int64)
        key = ("list", positions.tobytes())
        array = _table(cache, query.scheme, params, positions, query.dtype, key)
        envelope = {"scheme": query.scheme, "params": canonical}
        return Body.of(array, fmt, envelope, labels, gzip)

    return _serve(request, canonical, fmt, render)


def _check_positions(settings: Settings, fmt: Format, positions: list[int], d_model: int) -> None:
    check_size(
        "positions",
        "the positions list",
        len(positions),
        settings.max_positions,
        "POSENC_MAX_POSITIONS",
    )
    _check_sizes(
        settings, fmt, "positions", "the answer (positions × d_model)", len(positions) * d_model
    )


@router.post("/encode", responses=_ARRAY_RESPONSES, response_class=Response)
def encode_post(
    request: Request,
    body: EncodeBody,
    format: Annotated[Format | None, Query(description="wins over Accept")] = None,
) -> Response:
    """Encodings of `positions`, or `embeddings·(√d_model if scale) + PE(positions)`.

    The sum is the input layer of a Transformer, computed in float64 and rounded once to `dtype`.
    `embeddings` must have shape `(len(positions), d_model)`.
    """
    request.state.param_source = "body"
    settings, _ = _state(request)
    params = body.core()
    fmt = formats.negotiate(format, request.headers.get("accept"))
    _check_positions(settings, fmt, body.positions, body.d_model)
    positions = np.array(body.positions, dtype=np.int64)
    scheme = posenc.get(body.scheme)
    if body.embeddings is None:
        array = scheme.encode(params, positions, body.dtype)
    else:
        expected = (len(body.positions), body.d_model)
        lengths = {len(row) for row in body.embeddings}
        if len(body.embeddings) != expected[0] or lengths != {expected[1]}:
            raise ParameterError(
                "embeddings", f"must have shape {list(expected)} (len(positions), d_model)"
            )
        scale = np.sqrt(body.d_model) if body.scale else 1.0
        total = np.array(body.embeddings) * scale + scheme.encode(params, positions, "float64")
        array = total.astype(body.dtype)
    envelope = {
        "scheme": body.scheme,
        "params": _canonical(body, params, positions=body.positions, scale=body.scale),
    }
    labels = formats.Labels("encoded rows", "dimension", "row", "value")
    return responses.send(
        Body.of(array, fmt, envelope, labels, responses.accepts_gzip(request)), None
    )


@router.get("/similarity", responses=_ARRAY_RESPONSES, response_class=Response)
def similarity_get(request: Request, query: Annotated[SimilarityQuery, Query()]) -> Response:
    """How alike the encodings of two positions are, computed in float64.

    Without `reference`: the `(seq_len, seq_len)` matrix over the table's positions. With
    `reference=p`: the vector `metric(PE(p), PE(offset+k))` of shape `(seq_len,)`.
    """
    settings, cache = _state(request)
    params = query.core()
    check_consecutive(query.seq_len, query.offset)
    fmt = formats.negotiate(query.format, request.headers.get("accept"))
    n = query.seq_len
    check_size(
        "seq_len",
        "the table behind it (seq_len × d_model)",
        n * query.d_model,
        settings.max_elements,
        "POSENC_MAX_ELEMENTS",
    )
    size = n if query.reference is not None else n * n
    _check_sizes(settings, fmt, "seq_len", "the similarity answer", size)
    canonical = _canonical(
        query,
        params,
        seq_len=n,
        offset=query.offset,
        metric=query.metric,
        reference=query.reference,
    )
    span = list(range(query.offset, query.offset + n))
    title = f"{query.metric} similarity of {query.scheme} encodings"
    labels = formats.Labels(title, "position", "position", query.metric, span, span)

    def render(gzip: bool) -> Body:
        rows = _consecutive(request, query, params, "float64")
        if query.reference is None:
            values = similarity.matrix(rows, query.metric)
        else:
            reference = np.array([query.reference], dtype=np.int64)
            key = ("list", reference.tobytes())
            anchor = _table(cache, query.scheme, params, reference, "float64", key)[0]
            values = similarity.against(rows, anchor, query.metric)
        envelope = {"scheme": query.scheme, "params": canonical}
        return Body.of(values.astype(query.dtype), fmt, envelope, labels, gzip)

    return _serve(request, canonical, fmt, render)


@router.get(
    "/verify",
    response_class=Response,
    responses={
        200: {"description": "the report", "content": {"application/json": {}}},
        422: _ARRAY_RESPONSES[422],
    },
)
def verify_get(request: Request, query: Annotated[VerifyQuery, Query()]) -> Response:
    """Which mathematical properties hold, each measured on the table this service serves.

    `passed` is true when every check holds; `statistics` are descriptive. The table is the one
    `/v1/table` serves for the same parameters, `seq_len` (default 128) and `offset`.
    """
    settings, _ = _state(request)
    params = query.core()
    check_consecutive(query.seq_len, query.offset)
    n, d = query.seq_len, query.d_model
    check_size(
        "seq_len",
        "the verification work (seq_len × d_model + seq_len²)",
        n * d + n * n,
        settings.max_elements,
        "POSENC_MAX_ELEMENTS",
    )
    canonical = _canonical(query, params, seq_len=n, offset=query.offset)

    def render(gzip: bool) -> Body:
        served = _consecutive(request, query, params, query.dtype)
        positions = np.arange(query.offset, query.offset + n, dtype=np.int64)
        report = posenc.get(query.scheme).verify(params, served, positions)
        document = {
            "scheme": query.scheme,
            "params": canonical,
            "passed": report.passed,
            "checks": [dataclasses.asdict(check) for check in report.checks],
            "statistics": [dataclasses.asdict(stat) for stat in report.statistics],
        }
        return Body.text(orjson.dumps(document), "json", gzip)

    return _serve(request, canonical, "json", render)


_TABLE_BODY = {
    "required": True,
    "content": {
        "application/x-npy": {"schema": {"type": "string", "format": "binary"}},
        "application/octet-stream": {"schema": {"type": "string", "format": "binary"}},
        "application/json": {
            "schema": {
                "type": "object",
                "required": ["data"],
                "additionalProperties": False,
                "properties": {
                    "data": {
                        "type": "array",
                        "items": {"type": "array", "items": {"type": "number"}},
                    }
                },
            }
        },
    },
}


@router.post(
    "/verify",
    response_class=Response,
    openapi_extra={"requestBody": _TABLE_BODY},
    responses={
        200: {"description": "the conformance report", "content": {"application/json": {}}},
        413: {"description": "the body is over POSENC_MAX_BODY_BYTES"},
        422: _ARRAY_RESPONSES[422],
    },
)
async def verify_post(request: Request, query: Annotated[ConformanceQuery, Query()]) -> Response:
    """Check *your* table against the exact one and say what is wrong with it.

    Send the `(n, d_model)` table your code built, for positions `offset … offset+n-1`, as
    `.npy`, as raw little-endian bytes with `X-Array-Shape`/`X-Array-Dtype`, or as JSON
    `{"data": [[...]]}` (whose values are read as `dtype`). The answer gives the errors, the
    first bad position and a `diagnosis`: `layout_mismatch`, `base_mismatch`, `angle_precision`,
    `collapsed_positions` or `value_rounding`, each with its evidence.
    """
    settings, _ = _state(request)
    params = query.core()
    body = await request.body()
    content_type = request.headers.get("content-type", "")
    table = read_table(body, content_type, dict(request.headers), query.dtype)
    if "dtype" in query.model_fields_set and table.dtype != query.dtype:
        raise ParameterError("dtype", f"the body holds {table.dtype}, the query says {query.dtype}")
    if table.shape[1] != query.d_model:
        raise ParameterError(
            "body",
            f"expected shape [{table.shape[0]}, {query.d_model}] "
            f"(n, d_model), got {list(table.shape)}",
        )
    check_consecutive(len(table), query.offset)
    check_size("body", "the table", table.size, settings.max_elements, "POSENC_MAX_ELEMENTS")
    result = await run_in_threadpool(
        conformance.check, params, table, query.offset, query.tolerance_ulp
    )
    document = {
        "scheme": query.scheme,
        "params": _canonical(
            query,
            params,
            dtype=str(table.dtype),
            seq_len=len(table),
            offset=query.offset,
            tolerance_ulp=query.tolerance_ulp,
        ),
        **dataclasses.asdict(result),
    }
    if query.format == "plotly":
        positions = list(range(query.offset, query.offset + len(table)))
        figure = formats.plotly_figure(
            np.array(result.error_by_position),
            formats.Labels(
                "error of the table by position", "position", "", "max |error|", positions
            ),
        )
        figure["layout"]["yaxis"]["type"] = "log"
        content = orjson.dumps(figure, option=orjson.OPT_SERIALIZE_NUMPY)
        return responses.send(Body.text(content, "plotly", responses.accepts_gzip(request)), None)
    content = orjson.dumps(document)
    return responses.send(Body.text(content, "json", responses.accepts_gzip(request)), None)


@router.get("/schemes")
def schemes() -> dict[str, Any]:
    """Every scheme with its parameters, defaults and limits."""
    return {
        "schemes": [
            {
                "name": scheme.name,
                "summary": scheme.summary,
                "parameters": [dataclasses.asdict(p) for p in scheme.parameters],
            }
            for scheme in posenc.SCHEMES.values()
        ]
    }

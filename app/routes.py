"""One short function per endpoint: parameters → core (through the cache) → response.

The functions are plain ``def``: FastAPI runs them in its thread pool, so NumPy work never
blocks the event loop.
"""

from __future__ import annotations

import dataclasses
import math
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
from posenc import conformance, rope, similarity
from posenc.cache import ByteBoundedCache
from posenc.errors import NotApplicableError, ParameterError

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
    given = {k: v for k, v in dataclasses.asdict(params).items() if v is not None}
    canonical = {**given, "dtype": query.served_dtype(), **extra}
    component = query.chosen_component()
    if component:
        canonical["component"] = component
    return canonical


def _serve(
    request: Request,
    scheme: str,
    canonical: dict[str, Any],
    fmt: Format,
    render: Callable[[bool], Body],
) -> Response:
    """304 if the client has it, else the rendered body (app/replay.py keeps the answer)."""
    etag = responses.etag_for(request.url.path, {"scheme": scheme, "params": canonical}, fmt)
    matched = responses.matching_tag(request, etag)
    if matched is not None:
        return responses.not_modified(matched)
    return responses.send(render(responses.accepts_gzip(request)), etag)


def _array(
    cache: ByteBoundedCache,
    query: EncodingQuery,
    params: Any,
    positions: npt.NDArray[np.int64],
    dtype: str,
    component: str,
    consecutive: bool,
) -> npt.NDArray[Any]:
    """The scheme's array for these positions, through the cache."""
    scheme = posenc.get(query.scheme)
    ends = (int(positions[0]), len(positions)) if consecutive else (positions.tobytes(),)
    key = ("array", query.scheme, params, dtype, component, consecutive, *ends)

    def compute() -> npt.NDArray[Any]:
        if consecutive and scheme.table is not None and not component:
            return scheme.table(params, len(positions), int(positions[0]), dtype)
        return scheme.encode(params, positions, dtype, component)

    return cache.get_or_compute(key, compute)


def _labels(query: EncodingQuery, shape: tuple[int, ...], rows: list[int] | None) -> formats.Labels:
    component = query.chosen_component()
    title = f"{query.scheme} {component}".strip()
    if len(shape) == 1:
        return formats.Labels(title, "index", "", "value")
    return formats.Labels(
        title,
        "dimension" if len(shape) == 2 else "position",
        "position",
        "value",
        y_values=rows if len(shape) == 2 else None,
    )


@router.get("/table", responses=_ARRAY_RESPONSES, response_class=Response)
def table(request: Request, query: Annotated[TableQuery, Query()]) -> Response:
    """The scheme's array for positions `offset … offset+seq_len-1` (or every cell of `grid`).

    Shape `(seq_len, d_model)` for the sinusoids, `(2, seq_len, d_model)` for rope's
    `cos_sin`, `(num_heads, seq_len, seq_len)` for alibi's `bias`, `(seq_len, seq_len)` for t5.

    `curl 'http://127.0.0.1:8000/v1/table?d_model=4&seq_len=3'`
    """
    settings, cache = _state(request)
    scheme, params = posenc.get(query.scheme), query.core()
    dtype, component = query.served_dtype(), query.chosen_component()
    positions = query.positions(params)
    fmt = formats.negotiate(query.format, request.headers.get("accept"))
    shape = scheme.shape(params, len(positions), component)
    _check_sizes(settings, fmt, "seq_len", f"the array {list(shape)}", math.prod(shape))
    rows = dict(seq_len=len(positions), offset=query.offset) if not scheme.on_grid else {}
    canonical = _canonical(query, params, **rows)
    labels = _labels(query, shape, positions.tolist())

    def render(gzip: bool) -> Body:
        array = _array(cache, query, params, positions, dtype, component, consecutive=True)
        envelope = {"scheme": query.scheme, "params": canonical}
        return Body.of(array, fmt, envelope, labels, gzip)

    return _serve(request, query.scheme, canonical, fmt, render)


@router.get("/encode", responses=_ARRAY_RESPONSES, response_class=Response)
def encode_get(request: Request, query: Annotated[EncodeQuery, Query()]) -> Response:
    """The array for the listed positions, in the order given (grid schemes: cell indices).

    `curl 'http://127.0.0.1:8000/v1/encode?d_model=8&positions=0,5,17'`
    """
    settings, cache = _state(request)
    scheme, params = posenc.get(query.scheme), query.core()
    dtype, component = query.served_dtype(), query.chosen_component()
    fmt = formats.negotiate(query.format, request.headers.get("accept"))
    shape = scheme.shape(params, len(query.positions), component)
    _check_positions(settings, fmt, query.positions, math.prod(shape))
    canonical = _canonical(query, params, positions=query.positions)
    labels = _labels(query, shape, None)

    def render(gzip: bool) -> Body:
        positions = np.array(query.positions, dtype=np.int64)
        array = _array(cache, query, params, positions, dtype, component, consecutive=False)
        envelope = {"scheme": query.scheme, "params": canonical}
        return Body.of(array, fmt, envelope, labels, gzip)

    return _serve(request, query.scheme, canonical, fmt, render)


def _check_positions(settings: Settings, fmt: Format, positions: list[int], size: int) -> None:
    check_size(
        "positions",
        "the positions list",
        len(positions),
        settings.max_positions,
        "POSENC_MAX_POSITIONS",
    )
    _check_sizes(settings, fmt, "positions", "the answer", size)


@router.post("/encode", responses=_ARRAY_RESPONSES, response_class=Response)
def encode_post(
    request: Request,
    body: EncodeBody,
    format: Annotated[Format | None, Query(description="wins over Accept")] = None,
) -> Response:
    """Encodings of `positions`, optionally applied to your own data.

    - `embeddings` (shape `(len(positions), d_model)`): returns
      `embeddings·(√d_model if scale) + PE(positions)`, the input layer of a Transformer,
      computed in float64 and rounded once to `dtype`;
    - `vectors` (rope, same shape): returns each vector rotated to its position.
    """
    request.state.param_source = "body"
    settings, _ = _state(request)
    scheme, params = posenc.get(body.scheme), body.core()
    dtype, component = body.served_dtype(), body.chosen_component()
    fmt = formats.negotiate(format, request.headers.get("accept"))
    shape = scheme.shape(params, len(body.positions), component)
    _check_positions(settings, fmt, body.positions, math.prod(shape))
    positions = np.array(body.positions, dtype=np.int64)
    if body.embeddings is not None and body.vectors is not None:
        raise ParameterError("vectors", "send embeddings or vectors, not both")
    if body.vectors is not None:
        if not scheme.similarity_vector:
            raise NotApplicableError("vectors", body.scheme, "only rotary schemes rotate vectors")
        vectors = _matrix(body.vectors, "vectors", (len(positions), params.d_model))
        array = rope.rotate(params, vectors, positions).astype(dtype)
    elif body.embeddings is not None:
        if scheme.vectors is None or len(shape) != 2:
            raise NotApplicableError("embeddings", body.scheme, "it has no per-position vectors")
        expected = (len(positions), shape[1])
        embeddings = _matrix(body.embeddings, "embeddings", expected)
        scale = np.sqrt(expected[1]) if body.scale else 1.0
        array = embeddings * scale + scheme.encode(params, positions, "float64", component)
        array = array.astype(dtype)
    else:
        array = scheme.encode(params, positions, dtype, component)
    canonical = _canonical(body, params, positions=body.positions, scale=body.scale)
    envelope = {"scheme": body.scheme, "params": canonical}
    labels = _labels(body, shape, None)
    return responses.send(
        Body.of(array, fmt, envelope, labels, responses.accepts_gzip(request)), None
    )


def _matrix(rows: list[list[float]], name: str, expected: tuple[int, int]) -> npt.NDArray[Any]:
    if len(rows) != expected[0] or {len(row) for row in rows} != {expected[1]}:
        raise ParameterError(name, f"must have shape {list(expected)} (len(positions), d_model)")
    return np.array(rows, dtype=np.float64)


@router.get("/similarity", responses=_ARRAY_RESPONSES, response_class=Response)
def similarity_get(request: Request, query: Annotated[SimilarityQuery, Query()]) -> Response:
    """How alike the encodings of two positions are, computed in float64.

    Without `reference`: the `(seq_len, seq_len)` matrix over the table's positions. With
    `reference=p`: the vector `metric(PE(p), PE(offset+k))` of shape `(seq_len,)`. For rope the
    compared vectors are `R_p u`: how attention between two positions depends on their distance.
    """
    settings, cache = _state(request)
    scheme, params = posenc.get(query.scheme), query.core()
    if scheme.vectors is None:
        raise NotApplicableError(
            "scheme",
            query.scheme,
            "it has no per-position vectors; /v1/table gives its pairwise array",
        )
    if query.vector is not None and not scheme.similarity_vector:
        raise NotApplicableError("vector", query.scheme)
    positions = query.positions(params)
    fmt = formats.negotiate(query.format, request.headers.get("accept"))
    n = len(positions)
    width = scheme.shape(params, 1, query.chosen_component())[-1]
    check_size(
        "seq_len", "the rows behind it", n * width, settings.max_elements, "POSENC_MAX_ELEMENTS"
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
        vector=query.vector,
    )
    span = positions.tolist()
    title = f"{query.metric} similarity of {query.scheme} encodings"
    labels = formats.Labels(title, "position", "position", query.metric, span, span)
    vector = tuple(query.vector) if query.vector is not None else None
    vectors = scheme.vectors

    def render(gzip: bool) -> Body:
        rows = cache.get_or_compute(
            ("vectors", query.scheme, params, vector, positions.tobytes()),
            lambda: vectors(params, positions, vector),
        )
        if query.reference is None:
            values = similarity.matrix(rows, query.metric)
        else:
            anchor = vectors(params, np.array([query.reference], dtype=np.int64), vector)[0]
            values = similarity.against(rows, anchor, query.metric)
        envelope = {"scheme": query.scheme, "params": canonical}
        return Body.of(values.astype(query.served_dtype()), fmt, envelope, labels, gzip)

    return _serve(request, query.scheme, canonical, fmt, render)


@router.get(
    "/verify",
    response_class=Response,
    responses={
        200: {"description": "the report", "content": {"application/json": {}}},
        422: _ARRAY_RESPONSES[422],
    },
)
def verify_get(request: Request, query: Annotated[VerifyQuery, Query()]) -> Response:
    """Which mathematical properties hold, each measured on the array this service serves.

    `passed` is true when every check holds; `statistics` are descriptive. The array is the one
    `/v1/table` serves for the same parameters, `seq_len` (default 128) and `offset`.
    """
    settings, cache = _state(request)
    scheme, params = posenc.get(query.scheme), query.core()
    dtype, component = query.served_dtype(), query.chosen_component()
    if "component" in query.model_fields_set:
        raise NotApplicableError("component", query.scheme, "verify checks the default array")
    positions = query.positions(params)
    n = len(positions)
    shape = scheme.shape(params, n, component)
    check_size(
        "seq_len",
        "the verification work (the array + seq_len²)",
        math.prod(shape) + n * n,
        settings.max_elements,
        "POSENC_MAX_ELEMENTS",
    )
    rows = dict(seq_len=n, offset=query.offset) if not scheme.on_grid else {}
    canonical = _canonical(query, params, **rows)

    def render(gzip: bool) -> Body:
        served = _array(cache, query, params, positions, dtype, component, consecutive=True)
        report = scheme.verify(params, served, positions)
        document = {
            "scheme": query.scheme,
            "params": canonical,
            "passed": report.passed,
            "checks": [dataclasses.asdict(check) for check in report.checks],
            "statistics": [dataclasses.asdict(stat) for stat in report.statistics],
        }
        return Body.text(orjson.dumps(document), "json", gzip)

    return _serve(request, query.scheme, canonical, "json", render)


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
    if not posenc.get(query.scheme).conformance or params.convention != "vaswani":
        raise NotApplicableError(
            "scheme", query.scheme, "conformance is checked for the vaswani sinusoid"
        )
    body = await request.body()
    content_type = request.headers.get("content-type", "")
    table = read_table(body, content_type, dict(request.headers), query.served_dtype())
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
                "components": list(scheme.components),
                "dtypes": list(scheme.dtypes) if scheme.dtypes else ["int32"],
                "rows": "grid cells (grid=)" if scheme.on_grid else "positions (seq_len=)",
                "similarity": scheme.vectors is not None,
                "conformance": scheme.conformance,
            }
            for scheme in posenc.SCHEMES.values()
        ]
    }

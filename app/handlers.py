"""What each operation does, for any scheme: parameters → cost → core → body.

Validation runs on the event loop (it is cheap); each request's cost is decided and reserved
before anything sized by the query exists (:mod:`app.admission`), and the NumPy work runs in the
bounded thread pool under a deadline.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
import orjson
from fastapi import HTTPException, Request, Response
from pydantic import BaseModel

from app import bodies, formats, responses, streaming
from app.admission import Estimate, admit, check_size, decide, run, shrink_last
from app.encode_ids import encode_ids
from app.models import (
    Format,
    body_members,
    component_of,
    dtype_of,
    params_of,
    rows_of,
)
from app.responses import Body
from app.serving import (
    array_for,
    array_key,
    canonical,
    check_holdable,
    estimate,
    labels,
    send_array,
    serve,
    state,
)
from posenc import similarity as similarity_core
from posenc.cost import Cost
from posenc.declare import Scheme
from posenc.errors import InconsistentError, NotApplicableError, ParameterError
from posenc.numerics import costs
from posenc.rows import Rows


async def table(request: Request, scheme: Scheme, query: Any) -> Response:
    _, cache = state(request)
    params = params_of(scheme, query)
    dtype, component = dtype_of(scheme, query), component_of(scheme, query)
    rows = rows_of(scheme, query, params)
    fmt = formats.negotiate(query.format, request.headers.get("accept"))
    shape = scheme.shape(params, len(rows), component)
    compute = scheme.cost(params, len(rows), dtype, component)
    need = estimate(scheme, query, fmt, compute, shape, f"the array {list(shape)}")
    extra = dict(seq_len=rows.count, offset=rows.offset) if scheme.rows == "positions" else {}
    answer = canonical(scheme, query, params, fmt, **extra)

    def render(gzip: bool) -> Body:
        check_holdable(scheme, params, rows.offset, rows.last, dtype, component)
        # Only a Plotly figure of rows names them: a list of ints is ~5× a float32 row's bytes.
        by_row = fmt == "plotly" and scheme.follows_rows(params, component)
        named = list(range(rows.offset, rows.offset + rows.count)) if by_row else None
        figure = labels(scheme, query, params, shape, named)
        array = array_for(cache, scheme, params, rows, dtype, component)
        return Body.of(array, fmt, {"scheme": scheme.name, "params": answer}, figure, gzip)

    table = scheme.table
    key = array_key(scheme, params, rows, dtype, component)
    if (
        table is None
        or not streaming.streamable(fmt, dtype)
        or not scheme.follows_rows(params, component)
        or cache.holds(key)
    ):
        return await serve(request, scheme, "table", answer, fmt, need, render)

    def fill(finished: Callable[[npt.NDArray[Any], int], None]) -> npt.NDArray[Any]:
        check_holdable(scheme, params, rows.offset, rows.last, dtype, component)
        return cache.get_or_compute(
            key,
            lambda: table(params, rows.count, rows.offset, dtype, component, finished=finished),
        )

    def stream(etag: str) -> Response:
        head = formats.raw_head(shape, dtype, fmt)
        nbytes = len(head) + math.prod(shape) * np.dtype(dtype).itemsize
        headers = responses.headers_for(shape, dtype, etag, False, nbytes)
        media_type = formats.MEDIA_TYPES[fmt]
        return streaming.StreamedTable(request, fill, head, media_type, headers)

    return await serve(request, scheme, "table", answer, fmt, need, render, stream)


async def encode_get(request: Request, scheme: Scheme, query: Any) -> Response:
    settings, cache = state(request)
    params = params_of(scheme, query)
    dtype, component = dtype_of(scheme, query), component_of(scheme, query)
    fmt = formats.negotiate(query.format, request.headers.get("accept"))
    listed = query.positions if isinstance(query.positions, list) else [query.positions]
    count = len(listed)
    check_size(
        "positions", "the positions list", count, settings.max_positions, "POSENC_MAX_POSITIONS"
    )
    shape = scheme.shape(params, count, component)
    compute = scheme.cost(params, count, dtype, component)
    need = estimate(scheme, query, fmt, compute, shape, f"the array {list(shape)}")
    need = dataclasses.replace(need, param="positions")
    answer = canonical(scheme, query, params, fmt, positions=listed)
    figure = labels(scheme, query, params, shape, None)

    def render(gzip: bool) -> Body:
        check_holdable(scheme, params, min(listed), max(listed), dtype, component)
        positions = np.array(listed, dtype=np.int64)
        array = array_for(cache, scheme, params, positions, dtype, component)
        return Body.of(array, fmt, {"scheme": scheme.name, "params": answer}, figure, gzip)

    return await serve(request, scheme, "encode", answer, fmt, need, render)


async def similarity(request: Request, scheme: Scheme, query: Any) -> Response:
    settings, cache = state(request)
    vectors = scheme.vectors
    assert vectors is not None, "only schemes with vectors offer similarity"
    params = params_of(scheme, query)
    rows = rows_of(scheme, query, params)
    fmt = formats.negotiate(query.format, request.headers.get("accept"))
    n = len(rows)
    width = scheme.shape(params, 1, component_of(scheme, query))[-1]
    dtype = dtype_of(scheme, query)
    reference = query.reference is not None
    if reference and scheme.rows == "grid" and query.reference >= n:
        # In its range (a position), but beyond this grid's cells: the two disagree.
        raise InconsistentError("reference", f"must be a cell index below {n}, the grid's size")
    shape = (n,) if reference else (n, n)
    vector = tuple(query.vector) if getattr(query, "vector", None) is not None else None
    key = tuple(query.key) if getattr(query, "key", None) is not None else None
    for name, given in (("vector", vector), ("key", key)):
        if given is not None and len(given) != width:
            raise InconsistentError(name, f"must hold d_model = {width} numbers, got {len(given)}")
    first = scheme.components[0] if scheme.components else ""
    encoded = scheme.cost(params, n + 1, "float64", first)
    compute = costs.vectors(encoded, n + 1, width, scheme.rotates) + costs.similarity(
        n, width, reference, dtype
    )
    if key is not None:  # the keys' rotations beside the queries'
        compute = compute + costs.vectors(encoded, n, width, scheme.rotates)
    need = estimate(scheme, query, fmt, compute, shape, "the similarity answer")
    decide(settings, Estimate(compute, n * width, False, "seq_len", "the rows behind it"))
    extra = dict(seq_len=n, offset=rows.offset) if scheme.rows == "positions" else {}
    answer = canonical(
        scheme,
        query,
        params,
        fmt,
        **extra,
        metric=query.metric,
        reference=query.reference,
        vector=list(vector) if vector is not None else None,
        **({"key": list(key)} if key is not None else {}),  # absent: the query's
    )

    def render(gzip: bool) -> Body:
        anchor, queries = _compared(scheme, params, rows, vector, query.reference, cache)
        keys = queries if key is None else _compared(scheme, params, rows, key, None, cache)[1]
        if anchor is None:
            values = similarity_core.between(queries, keys, query.metric)
        else:
            values = similarity_core.against(keys, anchor, query.metric)
        span = list(range(rows.offset, rows.offset + rows.count)) if fmt == "plotly" else None
        title = f"{query.metric} similarity of {scheme.name} encodings"
        size = {"width": query.width, "height": query.height}
        figure = formats.Labels(title, "position", "position", query.metric, span, span, **size)
        envelope = {"scheme": scheme.name, "params": answer}
        with np.errstate(over="ignore"):  # float16 overflow: Body.of refuses the infinities
            served = values.astype(dtype)
        return Body.of(served, fmt, envelope, figure, gzip)

    return await serve(request, scheme, "similarity", answer, fmt, need, render)


def _compared(
    scheme: Scheme,
    params: Any,
    rows: Rows,
    vector: tuple[float, ...] | None,
    reference: int | None,
    cache: Any,
) -> tuple[npt.NDArray[np.float64] | None, npt.NDArray[np.float64]]:
    """The reference's vector (if any) and the rows', computed as one set of positions: an
    encoding relative to its set (one divided by its largest position) places the reference in
    the same table."""
    vectors = scheme.vectors
    assert vectors is not None
    positions = rows.array()
    inside = reference is not None and rows.offset <= reference < rows.offset + rows.count
    if reference is None or inside:
        compared = cache.get_or_compute(
            ("vectors", scheme.name, params, vector, rows.offset, rows.count),
            lambda: vectors(params, positions, vector),
        )
        return (None if reference is None else compared[reference - rows.offset]), compared
    both = vectors(params, np.append(positions, np.int64(reference)), vector)
    return both[-1], both[:-1]


async def verify(request: Request, scheme: Scheme, query: Any) -> Response:
    _, cache = state(request)
    params = params_of(scheme, query)
    dtype, component = dtype_of(scheme, query), component_of(scheme, query)
    rows = rows_of(scheme, query, params)
    n = len(rows)
    shape = scheme.shape(params, n, component)
    compute = scheme.cost(params, n, dtype, component) + scheme.verify_cost(params, n)
    param = "grid" if scheme.rows == "grid" else "seq_len"
    need = Estimate(compute, math.prod(shape), False, param, "the verification")
    extra = dict(seq_len=n, offset=rows.offset) if scheme.rows == "positions" else {}
    answer = canonical(scheme, query, params, "json", **extra)

    def render(gzip: bool) -> Body:
        check_holdable(scheme, params, rows.offset, rows.last, dtype, component)
        served = array_for(cache, scheme, params, rows, dtype, component)
        report = scheme.verify(params, served, rows.array())
        document = {
            "scheme": scheme.name,
            "params": answer,
            "passed": report.passed,
            "checks": [dataclasses.asdict(check) for check in report.checks],
            "statistics": [dataclasses.asdict(stat) for stat in report.statistics],
        }
        return Body.text(orjson.dumps(document), "json", gzip)

    return await serve(request, scheme, "verify", answer, "json", need, render)


# --- POST ---------------------------------------------------------------------------------

_ENCODE_ARRAYS = {"positions": 1, "embeddings": 2, "vectors": 2, "position_ids": 2}


async def encode_post(
    request: Request, fmt_given: Format | None, resolve: Callable[[dict[str, Any]], Scheme]
) -> Response:
    """Positions and parameters in a JSON body; optionally embeddings to add to, or vectors to
    rotate. The body's parse is reserved before it is read, the answer's cost once known."""
    request.state.param_source = "body"
    settings, _ = state(request)
    received = await _read_body(request)
    # Parsing a large body takes up to ~13 ns a byte: in the pool, never on the event loop.
    small, arrays = await run(
        request,
        lambda: bodies.read_object(
            received, _ENCODE_ARRAYS, max_items={"positions": settings.max_positions}
        ),
    )
    scheme = resolve(small)
    ids = arrays.get("position_ids")
    if ids is not None:
        return await encode_ids(request, scheme, small, ids, arrays, fmt_given)
    given = arrays.get("positions")
    if given is None:
        raise bodies.invalid(("positions",), "Field required")
    if scheme.ids is not None and small.get(scheme.ids.key) is not None:
        raise InconsistentError(scheme.ids.key, "goes with position_ids, not positions")
    positions = bodies.positions_of(given)
    members = body_members(scheme, {**small, "positions": [0]})
    embeddings, vectors = arrays.get("embeddings"), arrays.get("vectors")
    params = params_of(scheme, members)
    dtype, component = dtype_of(scheme, members), component_of(scheme, members)
    fmt = formats.negotiate(fmt_given, request.headers.get("accept"))
    count = len(positions)
    check_size(
        "positions", "the positions list", count, settings.max_positions, "POSENC_MAX_POSITIONS"
    )
    shape = scheme.shape(params, count, component)
    if embeddings is not None and vectors is not None:
        raise InconsistentError("vectors", "send embeddings or vectors, not both")
    if vectors is not None and scheme.rotate is None:
        raise NotApplicableError("vectors", scheme.name, "only rotary schemes rotate vectors")
    if embeddings is not None and (scheme.vectors is None or len(shape) != 2):
        raise NotApplicableError("embeddings", scheme.name, "it has no per-position vectors")
    # Given data is widened to float64 and combined with a float64 encoding: three such arrays.
    widened = Cost(3 * math.prod(shape) * 8, 3 * math.prod(shape))
    cost = scheme.cost(params, count, dtype, component) + widened
    listed = {"positions": positions.tolist(), "scale": members.scale}
    rotate = scheme.rotate

    def make() -> npt.NDArray[Any]:
        if vectors is not None and rotate is not None:
            turned = _matrix(vectors, "vectors", (count, shape[-1]))
            with np.errstate(over="ignore", invalid="ignore"):  # refused just below
                array = rotate(params, turned, positions).astype(dtype)
            _finite(array, "vectors", dtype)
        elif embeddings is not None:
            added = _matrix(embeddings, "embeddings", (count, shape[1]))
            scale = np.sqrt(shape[1]) if members.scale else 1.0
            encoded = scheme.encode(params, positions, "float64", component)
            with np.errstate(over="ignore", invalid="ignore"):  # refused just below
                array = (added * scale + encoded).astype(dtype)
            _finite(array, "embeddings", dtype)
        else:
            first, last = int(positions.min()), int(positions.max())
            check_holdable(scheme, params, first, last, dtype, component)
            array = scheme.encode(params, positions, dtype, component)
        return array

    return await send_array(
        request, scheme, members, params, fmt, shape, cost, "positions", listed, make
    )


def _finite(array: npt.NDArray[Any], given: str, dtype: str) -> None:
    """Values the client sent can take a sum or a rotation past what ``dtype`` holds (1e300
    in float32): refused, never served as JSON nulls or binary infinities."""
    if not np.isfinite(array).all():
        raise InconsistentError(given, f"the answer would hold values beyond {dtype}'s range")


def _matrix(rows: npt.NDArray[Any], name: str, expected: tuple[int, int]) -> npt.NDArray[Any]:
    if rows.shape != expected:
        raise InconsistentError(name, f"must have shape {list(expected)} (len(positions), d_model)")
    return rows


async def _read_body(request: Request) -> bytearray:
    """The body, its parse reserved before a byte of it is read: by its Content-Length, or by
    :func:`app.bodies.chunked_limit` when it comes without one (and refused past that). Once it
    has arrived, only what its real size costs stays reserved."""
    settings, _ = state(request)
    declared = request.headers.get("content-length", "")
    media_type = request.headers.get("content-type", "")
    size = (
        int(declared)
        if declared.isdigit()
        else bodies.chunked_limit(settings.max_body_bytes, settings.memory_bytes, media_type)
    )
    cost = bodies.body_cost(size, media_type)
    await admit(request, Estimate(cost, 0, False, "body", "reading the body"))
    received = await bodies.receive(request, size)
    shrink_last(request, bodies.body_cost(len(received), media_type).bytes)
    return received


async def read_file(request: Request, limit: int, multipart: bool) -> bytearray:
    """A file's first bytes (``application/octet-stream``, or ``multipart/form-data`` where
    ``multipart``), at most ``limit``: reserved as :func:`_read_body` reserves a body (by
    Content-Length, or for the most it may hold), and refused with 413 past ``limit``. The
    reader views the bytes in place: the binary cost."""
    settings, _ = state(request)
    media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    allowed = ("application/octet-stream", "multipart/form-data")[: 2 if multipart else 1]
    if media_type not in allowed:
        raise ParameterError(
            "content-type", f"must be {' or '.join(allowed)} (the file's bytes), got "
            f"{media_type[:60]!r}"
        )  # fmt: skip
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise HTTPException(413, f"send at most the first {limit} bytes (POSENC_MAX_GGUF_BYTES)")
    most = min(limit, bodies.chunked_limit(limit, settings.memory_bytes, media_type))
    size = int(declared) if declared.isdigit() else most
    await admit(request, Estimate(bodies.body_cost(size, media_type), 0, False, "body", "the file"))
    received = await bodies.receive(request, size)
    shrink_last(request, bodies.body_cost(len(received), media_type).bytes)
    return received


async def conformance(request: Request, scheme: Scheme, query: BaseModel) -> Response:
    """A client's array against the served one, diagnosed by the scheme's conformance model."""
    cost_of = scheme.conformance_cost
    assert cost_of is not None, "only declared for such schemes"
    params = params_of(scheme, query)
    dtype, component = dtype_of(scheme, query), component_of(scheme, query)
    offset, tolerance = getattr(query, "offset"), getattr(query, "tolerance_ulp")  # noqa: B009
    content_type = request.headers.get("content-type", "")
    request.state.param_source = "body"  # what goes wrong from here is the body's
    json_dtype = dtype if dtype != "int32" else "float64"
    received = await _read_body(request)
    array = await run(
        request, bodies.read_table, received, content_type, request.headers, json_dtype
    )
    given_dtype = "dtype" in query.model_fields_set
    if given_dtype and dtype != "int32" and str(array.dtype) != dtype:
        raise InconsistentError("dtype", f"the body holds {array.dtype}, the query says {dtype}")
    count = scheme.rows_in(params, array.shape, component)
    _same_rows(query, scheme.follows_rows(params, component), count, component)
    expected = scheme.shape(params, count, component)
    if array.shape != expected:
        raise InconsistentError(
            "body",
            f"expected shape {list(expected)} for {component or 'the array'}, "
            f"got {list(array.shape)}",
        )
    Rows(count, offset)
    compute = cost_of(params, count, component)
    await admit(request, Estimate(compute, array.size, False, "body", "the conformance check"))
    conforms, result = await run(
        request, scheme.conforms, params, array, component, offset, tolerance
    )
    document = {
        "scheme": scheme.name,
        "params": canonical(
            scheme,
            query,
            params,
            dtype=str(array.dtype),
            seq_len=count,
            offset=offset,
            tolerance_ulp=tolerance,
        ),
        "conforms": conforms,
        **dataclasses.asdict(result),
    }
    gzip = responses.accepts_gzip(request)
    if getattr(query, "format", "json") == "plotly":
        positions = list(range(offset, offset + len(result.error_by_position)))
        figure = formats.plotly_figure(
            np.array(result.error_by_position),
            formats.Labels("error by position", "position", "", "max |error|", positions),
        )
        figure["layout"]["yaxis"]["type"] = "log"
        content = orjson.dumps(figure, option=orjson.OPT_SERIALIZE_NUMPY)
        return responses.send(Body.text(content, "plotly", gzip), None)
    return responses.send(Body.text(orjson.dumps(document), "json", gzip), None)


def _same_rows(query: BaseModel, follows: bool, count: int, component: str) -> None:
    """A ``seq_len`` in the query must be the body's rows; an array without rows takes none
    (its check counts positions from the array, so a seq_len would be silently ignored)."""
    given = getattr(query, "seq_len", None)
    if given is None:
        return
    if not follows:
        raise InconsistentError("seq_len", f"the {component} array has no rows: leave it out")
    if given != count:
        raise InconsistentError("seq_len", f"is {given}, the body holds {count} rows")

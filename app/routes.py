"""The GET endpoints, one short function each: parameters → core (through the cache) → response.

Validation runs on the event loop (it is cheap); the NumPy work runs in the bounded thread pool
of :func:`app.admission.run`, so one slow table never stalls /healthz.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Annotated, Any

import numpy as np
import orjson
from fastapi import APIRouter, Query, Request, Response

import posenc
from app import formats
from app.admission import Estimate, check_size, decide
from app.params import EncodeQuery, SimilarityQuery, TableQuery, VerifyQuery
from app.responses import Body
from app.serving import (
    ARRAY_RESPONSES,
    PROBLEM_RESPONSES,
    array_for,
    check_picture,
    estimate,
    serve,
    state,
)
from app.serving import (
    canonical as canonical_params,
)
from app.serving import (
    labels as labels_for,
)
from posenc import costs, similarity
from posenc.errors import NotApplicableError

router = APIRouter(prefix="/v1", responses=PROBLEM_RESPONSES)


@router.get("/table", responses=ARRAY_RESPONSES, response_class=Response)
async def table(request: Request, query: Annotated[TableQuery, Query()]) -> Response:
    """The scheme's array for positions `offset … offset+seq_len-1` (or every cell of `grid`).

    Shape `(seq_len, d_model)` for the sinusoids, `(2, seq_len, d_model)` for rope's
    `cos_sin`, `(num_heads, seq_len, seq_len)` for alibi's `bias`, `(seq_len, seq_len)` for t5.

    `curl 'http://127.0.0.1:8000/v1/table?d_model=4&seq_len=3'`
    """
    _, cache = state(request)
    scheme, params = posenc.get(query.scheme), query.core()
    dtype, component = query.served_dtype(), query.chosen_component()
    rows = query.rows(params)
    fmt = formats.negotiate(query.format, request.headers.get("accept"))
    check_picture(query, fmt)
    shape = scheme.shape(params, len(rows), component)
    compute = scheme.cost(params, len(rows), dtype, component)
    need = estimate(query, fmt, compute, shape, f"the array {list(shape)}")
    extra = dict(seq_len=rows.count, offset=rows.offset) if not scheme.on_grid else {}
    canonical = canonical_params(query, params, **extra)

    def render(gzip: bool) -> Body:
        # Labels only here: a 304 or a replayed answer never needs them.
        labels = labels_for(query, shape, list(range(rows.offset, rows.offset + rows.count)))
        array = array_for(cache, query, params, rows, dtype, component)
        envelope = {"scheme": query.scheme, "params": canonical}
        return Body.of(array, fmt, envelope, labels, gzip)

    return await serve(request, query.scheme, canonical, fmt, need, render)


@router.get("/encode", responses=ARRAY_RESPONSES, response_class=Response)
async def encode_get(request: Request, query: Annotated[EncodeQuery, Query()]) -> Response:
    """The array for the listed positions, in the order given (grid schemes: cell indices).

    `curl 'http://127.0.0.1:8000/v1/encode?d_model=8&positions=0,5,17'`
    """
    settings, cache = state(request)
    scheme, params = posenc.get(query.scheme), query.core()
    dtype, component = query.served_dtype(), query.chosen_component()
    fmt = formats.negotiate(query.format, request.headers.get("accept"))
    check_picture(query, fmt)
    count = len(query.positions)
    check_size(
        "positions", "the positions list", count, settings.max_positions, "POSENC_MAX_POSITIONS"
    )
    shape = scheme.shape(params, count, component)
    compute = scheme.cost(params, count, dtype, component)
    need = estimate(query, fmt, compute, shape, f"the array {list(shape)}")
    need = dataclasses.replace(need, param="positions")
    canonical = canonical_params(query, params, positions=query.positions)
    labels = labels_for(query, shape, None)

    def render(gzip: bool) -> Body:
        positions = np.array(query.positions, dtype=np.int64)
        array = array_for(cache, query, params, positions, dtype, component)
        envelope = {"scheme": query.scheme, "params": canonical}
        return Body.of(array, fmt, envelope, labels, gzip)

    return await serve(request, query.scheme, canonical, fmt, need, render)


@router.get("/similarity", responses=ARRAY_RESPONSES, response_class=Response)
async def similarity_get(request: Request, query: Annotated[SimilarityQuery, Query()]) -> Response:
    """How alike the encodings of two positions are, computed in float64.

    Without `reference`: the `(seq_len, seq_len)` matrix over the table's positions. With
    `reference=p`: the vector `metric(PE(p), PE(offset+k))` of shape `(seq_len,)`. For rope the
    compared vectors are `R_p u`: how attention between two positions depends on their distance.
    """
    settings, cache = state(request)
    scheme, params = posenc.get(query.scheme), query.core()
    if scheme.vectors is None:
        raise NotApplicableError(
            "scheme",
            query.scheme,
            "it has no per-position vectors; /v1/table gives its pairwise array",
        )
    if query.vector is not None and not scheme.similarity_vector:
        raise NotApplicableError("vector", query.scheme)
    rows = query.rows(params)
    fmt = formats.negotiate(query.format, request.headers.get("accept"))
    check_picture(query, fmt)
    n = len(rows)
    width = scheme.shape(params, 1, query.chosen_component())[-1]
    dtype = query.served_dtype()
    reference = query.reference is not None
    shape = (n,) if reference else (n, n)
    compute = costs.vectors(width, n + 1) + costs.similarity(n, width, reference, dtype)
    need = estimate(query, fmt, compute, shape, "the similarity answer")
    decide(settings, Estimate(compute, n * width, False, "seq_len", "the rows behind it"))
    canonical = canonical_params(
        query,
        params,
        seq_len=n,
        offset=query.offset,
        metric=query.metric,
        reference=query.reference,
        vector=query.vector,
    )
    vector = tuple(query.vector) if query.vector is not None else None
    vectors = scheme.vectors

    def render(gzip: bool) -> Body:
        positions = rows.array()
        compared = cache.get_or_compute(
            ("vectors", query.scheme, params, vector, rows.offset, rows.count),
            lambda: vectors(params, positions, vector),
        )
        if query.reference is None:
            values = similarity.matrix(compared, query.metric)
        else:
            anchor = vectors(params, np.array([query.reference], dtype=np.int64), vector)[0]
            values = similarity.against(compared, anchor, query.metric)
        envelope = {"scheme": query.scheme, "params": canonical}
        span = positions.tolist()
        title = f"{query.metric} similarity of {query.scheme} encodings"
        labels = formats.Labels(
            title,
            "position",
            "position",
            query.metric,
            span,
            span,
            width=query.width,
            height=query.height,
        )
        return Body.of(values.astype(dtype), fmt, envelope, labels, gzip)

    return await serve(request, query.scheme, canonical, fmt, need, render)


@router.get(
    "/verify",
    response_class=Response,
    responses={
        200: {"description": "the report", "content": {"application/json": {}}},
    },
)
async def verify_get(request: Request, query: Annotated[VerifyQuery, Query()]) -> Response:
    """Which mathematical properties hold, each measured on the array this service serves.

    `passed` is true when every check holds; `statistics` are descriptive. The array is the one
    `/v1/table` serves for the same parameters, `seq_len` (default 128) and `offset`.
    """
    _, cache = state(request)
    scheme, params = posenc.get(query.scheme), query.core()
    dtype, component = query.served_dtype(), query.chosen_component()
    if "component" in query.model_fields_set:
        raise NotApplicableError("component", query.scheme, "verify checks the default array")
    rows = query.rows(params)
    n = len(rows)
    shape = scheme.shape(params, n, component)
    compute = scheme.cost(params, n, dtype, component) + scheme.verify_cost(params, n)
    param = "grid" if scheme.on_grid else "seq_len"
    need = Estimate(compute, math.prod(shape), False, param, "the verification")
    extra = dict(seq_len=n, offset=rows.offset) if not scheme.on_grid else {}
    canonical = canonical_params(query, params, **extra)

    def render(gzip: bool) -> Body:
        served = array_for(cache, query, params, rows, dtype, component)
        report = scheme.verify(params, served, rows.array())
        document = {
            "scheme": query.scheme,
            "params": canonical,
            "passed": report.passed,
            "checks": [dataclasses.asdict(check) for check in report.checks],
            "statistics": [dataclasses.asdict(stat) for stat in report.statistics],
        }
        return Body.text(orjson.dumps(document), "json", gzip)

    return await serve(request, query.scheme, canonical, "json", need, render)


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

"""The POST endpoints: your data in the body — embeddings to encode, vectors to rotate, a table
to check."""

from __future__ import annotations

import dataclasses
import math
from typing import Annotated, Any

import numpy as np
import numpy.typing as npt
import orjson
from fastapi import APIRouter, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError

import posenc
from app import bodies, formats, responses
from app.admission import Estimate, admit, check_size, run
from app.params import ConformanceQuery, EncodeBody, EncodingQuery, Format
from app.responses import Body
from app.serving import ARRAY_RESPONSES, PROBLEM_RESPONSES, estimate, state
from app.serving import canonical as canonical_params
from app.serving import labels as labels_for
from posenc import conformance, rope
from posenc.cost import Cost
from posenc.errors import NotApplicableError, ParameterError
from posenc.rows import Rows

router = APIRouter(prefix="/v1", responses=PROBLEM_RESPONSES)


class _EncodeMembers(EncodingQuery):
    """EncodeBody without its arrays, which app.bodies parses straight into NumPy."""

    scale: bool = False


_ENCODE_ARRAYS = {"positions": 1, "embeddings": 2, "vectors": 2}
_ENCODE_BODY = {
    "required": True,
    "content": {"application/json": {"schema": EncodeBody.model_json_schema()}},
}


@router.post(
    "/encode",
    responses=ARRAY_RESPONSES,
    response_class=Response,
    openapi_extra={"requestBody": _ENCODE_BODY},
)
async def encode_post(
    request: Request,
    format: Annotated[Format | None, Query(description="wins over Accept")] = None,
) -> Response:
    """Encodings of `positions`, optionally applied to your own data.

    Body (JSON): `{"positions": [...], "d_model": 512, ...}` with the encoding parameters, and
    optionally
    - `embeddings` (shape `(len(positions), d_model)`): returns
      `embeddings·(√d_model if scale) + PE(positions)`, the input layer of a Transformer,
      computed in float64 and rounded once to `dtype`;
    - `vectors` (rope, same shape): returns each vector rotated to its position.
    """
    request.state.param_source = "body"
    settings, _ = state(request)
    await _admit_body(request)
    small, arrays = bodies.read_object(
        await bodies.receive(request),
        _ENCODE_ARRAYS,
        max_items={"positions": settings.max_positions},
    )
    body = _members(small)
    given = arrays.get("positions")
    if given is None:
        raise bodies.invalid(("positions",), "Field required")
    positions = bodies.positions_of(given)
    embeddings, vectors = arrays.get("embeddings"), arrays.get("vectors")
    scheme, params = posenc.get(body.scheme), body.core()
    dtype, component = body.served_dtype(), body.chosen_component()
    fmt = formats.negotiate(format, request.headers.get("accept"))
    count = len(positions)
    check_size(
        "positions", "the positions list", count, settings.max_positions, "POSENC_MAX_POSITIONS"
    )
    shape = scheme.shape(params, count, component)
    # Given data is widened to float64 and combined with a float64 encoding: three such arrays.
    widened = Cost(3 * math.prod(shape) * 8, 3 * math.prod(shape))
    cost = scheme.cost(params, count, dtype, component) + widened
    need = estimate(body, fmt, cost, shape, f"the array {list(shape)}")
    need = dataclasses.replace(need, param="positions")
    listed = positions.tolist()
    if embeddings is not None and vectors is not None:
        raise ParameterError("vectors", "send embeddings or vectors, not both")
    if vectors is not None and not scheme.similarity_vector:
        raise NotApplicableError("vectors", body.scheme, "only rotary schemes rotate vectors")
    if embeddings is not None and (scheme.vectors is None or len(shape) != 2):
        raise NotApplicableError("embeddings", body.scheme, "it has no per-position vectors")
    canonical = canonical_params(body, params, positions=listed, scale=body.scale)
    envelope = {"scheme": body.scheme, "params": canonical}
    figure = labels_for(body, shape, None)
    gzip = responses.accepts_gzip(request)

    def compute() -> Body:
        if vectors is not None:
            rotated = _matrix(vectors, "vectors", (len(positions), params.d_model))
            array = rope.rotate(params, rotated, positions).astype(dtype)
        elif embeddings is not None:
            expected = (len(positions), shape[1])
            added = _matrix(embeddings, "embeddings", expected)
            scale = np.sqrt(expected[1]) if body.scale else 1.0
            encoded = scheme.encode(params, positions, "float64", component)
            array = (added * scale + encoded).astype(dtype)
        else:
            array = scheme.encode(params, positions, dtype, component)
        return Body.of(array, fmt, envelope, figure, gzip)

    await admit(request, need)
    return responses.send(await run(request, compute), None)


async def _admit_body(request: Request) -> None:
    """Reserve what reading and parsing the body will hold, before a byte of it is read: by its
    Content-Length, or the body limit when it comes chunked."""
    settings, _ = state(request)
    declared = request.headers.get("content-length", "")
    size = int(declared) if declared.isdigit() else settings.max_body_bytes
    cost = bodies.body_cost(size, request.headers.get("content-type", ""))
    await admit(request, Estimate(cost, 0, False, "body", "reading the body"))


def _members(small: dict[str, Any]) -> _EncodeMembers:
    try:
        return _EncodeMembers.model_validate(small)
    except ValidationError as e:
        errors = [{**error, "loc": ("body", *error["loc"])} for error in e.errors()]
        raise RequestValidationError(errors) from None


def _matrix(rows: npt.NDArray[Any], name: str, expected: tuple[int, int]) -> npt.NDArray[Any]:
    if rows.shape != expected:
        raise ParameterError(name, f"must have shape {list(expected)} (len(positions), d_model)")
    return rows


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
    params = query.core()
    if not posenc.get(query.scheme).conformance or params.convention != "vaswani":
        raise NotApplicableError(
            "scheme", query.scheme, "conformance is checked for the vaswani sinusoid"
        )
    content_type = request.headers.get("content-type", "")
    await _admit_body(request)
    table = bodies.read_table(
        await bodies.receive(request), content_type, request.headers, query.served_dtype()
    )
    if "dtype" in query.model_fields_set and table.dtype != query.dtype:
        raise ParameterError("dtype", f"the body holds {table.dtype}, the query says {query.dtype}")
    if table.shape[1] != query.d_model:
        raise ParameterError(
            "body",
            f"expected shape [{table.shape[0]}, {query.d_model}] "
            f"(n, d_model), got {list(table.shape)}",
        )
    Rows(len(table), query.offset)
    compute = conformance.conformance_cost(params, len(table), table.shape[1])
    await admit(request, Estimate(compute, table.size, False, "body", "the conformance check"))
    result = await run(request, conformance.check, params, table, query.offset, query.tolerance_ulp)
    document = {
        "scheme": query.scheme,
        "params": canonical_params(
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

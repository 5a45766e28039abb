"""``POST /v1/rope/config``: a model's ``config.json`` in, the rope it uses and its URLs out."""

from __future__ import annotations

import dataclasses
from typing import Any

import orjson
from fastapi import APIRouter, HTTPException, Request, Response

from app import responses
from app.responses import Body
from app.serving import PROBLEM_RESPONSES
from posenc import rope_config
from posenc.errors import ParameterError

router = APIRouter(prefix="/v1", responses=PROBLEM_RESPONSES)

# A config.json is a few kilobytes (Phi-3's, with its factor lists, about 10 KB).
MAX_CONFIG_BYTES = 2**20


@router.post(
    "/rope/config",
    tags=["rope"],
    response_class=Response,
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": {"type": "object"}}},
        }
    },
    responses={
        200: {
            "description": "the model's rope parameters and URLs",
            "content": {"application/json": {}},
        },
        413: {"description": "the body is over 1 MiB"},
    },
)
async def rope_config_post(request: Request) -> Response:
    """The canonical rope parameters of a model, read from its `config.json`.

    Reads transformers 5's `rope_parameters` or the older `rope_theta` + `rope_scaling`;
    `head_dim` (or `hidden_size / num_attention_heads`), `partial_rotary_factor` and
    `max_position_embeddings`. `d_model` in the answer is the rotary dimension. `urls` are
    the cacheable GETs of the model's table (for `max_position_embeddings` positions) and
    verify, exact and with `recipe=framework`. A field the service cannot honour is a 422
    naming it.
    """
    request.state.param_source = "body"
    config = _json_object(await _bounded_body(request))
    found = rope_config.from_config(config)
    params = found.params
    canonical = {k: v for k, v in dataclasses.asdict(params).items() if v is not None}
    query = rope_config.query(params)
    seq_len = found.max_position_embeddings or 4096
    rows = f"seq_len={seq_len}"
    document: dict[str, Any] = {
        "scheme": "rope",
        "params": canonical,
        "head_dim": found.head_dim,
        "rotary_dim": params.d_model,
        "partial_rotary_factor": found.partial_rotary_factor,
        "max_position_embeddings": found.max_position_embeddings,
        "urls": {
            "table": f"/v1/rope/table?{query}&{rows}",
            "table_framework": f"/v1/rope/table?{query}&recipe=framework&{rows}",
            "verify": f"/v1/rope/verify?{query}&{rows}",
            "alias_table": f"/v1/table?scheme=rope&{query}&{rows}",
            "alias_table_framework": f"/v1/table?scheme=rope&{query}&recipe=framework&{rows}",
            "alias_verify": f"/v1/verify?scheme=rope&{query}&{rows}",
        },
    }
    content = orjson.dumps(document)
    return responses.send(Body.text(content, "json", responses.accepts_gzip(request)), None)


async def _bounded_body(request: Request) -> bytes:
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_CONFIG_BYTES:
        raise HTTPException(413, f"a config.json may hold at most {MAX_CONFIG_BYTES} bytes")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_CONFIG_BYTES:
            raise HTTPException(413, f"a config.json may hold at most {MAX_CONFIG_BYTES} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def _json_object(body: bytes) -> dict[str, Any]:
    try:
        config = orjson.loads(body)
    except orjson.JSONDecodeError as error:
        raise ParameterError("body", f"must be JSON, a model's config.json: {error}") from None
    if not isinstance(config, dict):
        raise ParameterError("body", f"must be a JSON object, got {type(config).__name__}")
    return config

"""A scheme's extra POST operations (a model's config, a GGUF or ONNX file, a kernel's arrays):
the body received within its bound, then parsed, checked and sized, admitted at that cost, and
answered as JSON or, for an extra with an array, as ``.npy``. Every step sized by the body runs
in the bounded pool under the deadline, never on the event loop."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
from fastapi import Request, Response

from app import admission, bodies, documents, formats, handlers, responses
from app.bodies.upload import upload
from app.extra_query import extra_query
from app.responses import Body
from posenc.declare import Extra, Limits, Scheme, Sized
from posenc.errors import ParameterError

Reader = Callable[[], tuple[Any, Sized | None]]


def body_schema(extra: Extra) -> dict[str, Any]:
    """The JSON body's schema (empty for a binary extra), each keyword one the validator
    enforces, like the query parameters' schemas: checked once, when the route is made."""
    schema: dict[str, Any] = {}
    if not extra.binary:
        schema = documents.extra_body(extra)["content"]["application/json"]["schema"]
        bodies.check_schema(schema)
    for param in extra.query:
        bodies.check_schema(param.schema)
    return schema


async def answer(
    request: Request, scheme: Scheme, extra: Extra, schema: dict[str, Any]
) -> Response:
    """``POST /v1/{scheme}/{extra}``."""
    fmt, query = extra_query(request, extra)
    request.state.param_source = "body"
    settings = request.app.state.settings
    limits = Limits(
        settings.max_elements, settings.max_work, settings.memory_bytes, settings.max_gguf_bytes
    )
    read = await _reader(request, extra, limits, schema, query)
    given, sized = await admission.run(request, read)
    if sized is not None:
        what = f"the answer of {scheme.name}/{extra.name}"
        await admission.admit(
            request, admission.Estimate(sized.cost, sized.values, True, sized.param, what)
        )
    if fmt == "npy":
        return await _npy(request, extra, given, limits)

    def text() -> bytes:
        return orjson.dumps(extra.handle(given, limits), option=orjson.OPT_SERIALIZE_NUMPY)

    content = await admission.run(request, text)
    return responses.send(Body.text(content, "json", responses.accepts_gzip(request)), None)


async def _reader(
    request: Request, extra: Extra, limits: Limits, schema: dict[str, Any], query: Any
) -> Reader:
    """The body received (on the event loop, within its bound), and what parses, checks and
    sizes it (CPU work for the pool)."""
    if extra.binary:
        multipart = bool(extra.parts or extra.files)
        received = await handlers.read_file(request, limits.max_upload_bytes, multipart)
        content_type = request.headers.get("content-type", "")

        def read_upload() -> tuple[Any, Sized | None]:
            given = upload(extra, received, content_type, query)
            return given, None if extra.size is None else extra.size(given, limits)

        return read_upload
    body = await bodies.receive_bounded(request, extra.max_body_bytes)

    def read_json() -> tuple[Any, Sized | None]:
        try:
            given = orjson.loads(body)
        except orjson.JSONDecodeError as error:
            raise ParameterError("body", f"must be a JSON document: {error}") from None
        bodies.validate(given, schema)
        return given, None if extra.size is None else extra.size(given, limits)

    return read_json


async def _npy(request: Request, extra: Extra, given: Any, limits: Limits) -> Response:
    assert extra.array is not None, "only an extra with an array answers npy"
    array_of = extra.array

    def npy() -> tuple[Body, dict[str, str]]:
        array, headers = array_of(given, limits)
        return Body.of(array, "npy", {}, formats.Labels("", "", "", ""), False), headers

    body_of, headers = await admission.run(request, npy)
    response = responses.send(body_of, None)
    response.headers.update(headers)
    return response

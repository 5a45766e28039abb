"""Every scheme's declared operations as routes, each with that scheme's own parameter model.

``GET /v1/{scheme}/table|encode|similarity|verify`` and ``POST /v1/{scheme}/encode|verify``
(and a scheme's extras, such as a model-config reader) are made here from the registry, so the
OpenAPI document lists one typed operation per scheme and endpoint, tagged by scheme. The
older form ``/v1/{endpoint}?scheme=…`` is an alias: same parameters, same bytes, same ETag,
left out of the document, with a ``Link`` to the canonical URL.

No scheme is named here: everything comes from :class:`posenc.declare.Scheme`.
"""

from __future__ import annotations

import dataclasses
import inspect
import types
import typing
from collections.abc import Awaitable, Callable, Coroutine
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from pydantic import BaseModel, ValidationError

from app import documents, extras, handlers
from app.models import Endpoint, list_fields, model
from posenc.declare import Extra, Scheme, choices, hints, spec
from posenc.errors import InconsistentError, NotApplicableError, ParameterError
from posenc.registry import DEFAULT

Handler = Callable[[Request, Scheme, Any], Awaitable[Response]]
_GET: dict[str, tuple[Endpoint, Handler]] = {
    "table": ("table", handlers.table),
    "encode": ("encode", handlers.encode_get),
    "similarity": ("similarity", handlers.similarity),
    "verify": ("verify", handlers.verify),
}
_POSITIONAL = inspect.Parameter.POSITIONAL_OR_KEYWORD


def router(schemes: tuple[Scheme, ...]) -> APIRouter:
    """The routes of every scheme's operations, and the ``?scheme=`` aliases."""
    made = APIRouter(prefix="/v1")
    for scheme in schemes:
        for name in scheme.endpoints:
            if name in _GET:
                endpoint, handler = _GET[name]
                _add_get(made, scheme, name, endpoint, handler)
        _add_post_encode(made, scheme)
        if scheme.conformance is not None:
            _add_post_verify(made, scheme)
        for extra in scheme.extras:
            _add_extra(made, scheme, extra)
    _add_aliases(made, {scheme.name: scheme for scheme in schemes})
    document = schemes_document(schemes)

    def listing() -> dict[str, Any]:
        """Every scheme with its parameters, defaults, limits and operations."""
        return document

    made.add_api_route(
        "/schemes",
        listing,
        methods=["GET"],
        tags=["schemes"],
        responses={200: {"content": {"application/json": {"schema": documents.SCHEMES_LIST}}}},
    )
    return made


def _with_query(
    handler: Callable[[Request, Any], Awaitable[Response]], query_model: type[BaseModel]
) -> Callable[..., Awaitable[Response]]:
    """``handler`` with the signature FastAPI reads: the request and the scheme's query model."""

    async def endpoint(request: Request, query: Any) -> Response:
        return await handler(request, query)

    endpoint.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [
            inspect.Parameter(
                "request", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=Request
            ),
            inspect.Parameter(
                "query",
                _POSITIONAL,
                annotation=Annotated[query_model, Query()],
            ),
        ]
    )
    return endpoint


class _QueryRoute(APIRoute):
    """A GET documented by its query model, as FastAPI reads it from the endpoint's signature,
    but parsed by one validation of that model, as the aliases are (:func:`_query_of`):
    FastAPI's field-by-field dependency solving took a quarter of a cold answer's Python."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        endpoint = self.endpoint
        annotated = inspect.signature(endpoint).parameters["query"].annotation
        query_model: type[BaseModel] = typing.get_args(annotated)[0]

        async def handle(request: Request) -> Response:
            response: Response = await endpoint(request, _query_of(request, query_model))
            return response

        return handle


def _add_get(
    made: APIRouter, scheme: Scheme, name: str, endpoint: Endpoint, handler: Handler
) -> None:
    async def handle(request: Request, query: Any) -> Response:
        return await handler(request, scheme, query)

    made.add_api_route(
        f"/{scheme.name}/{name}",
        _with_query(handle, model(scheme, endpoint)),
        route_class_override=_QueryRoute,
        methods=["GET"],
        tags=[scheme.name],
        operation_id=f"{scheme.name}_{name}_get",
        summary=documents.summaries[name],
        description=documents.descriptions[name],
        response_class=Response,
        responses=documents.responses(scheme, name),
    )


def _add_post_encode(made: APIRouter, scheme: Scheme) -> None:
    async def handle(request: Request, query: Any) -> Response:
        return await handlers.encode_post(request, query.format, lambda members: scheme)

    made.add_api_route(
        f"/{scheme.name}/encode",
        _with_query(handle, documents.FormatOnly),
        methods=["POST"],
        tags=[scheme.name],
        operation_id=f"{scheme.name}_encode_post",
        summary=documents.summaries["encode_body"],
        description=documents.descriptions["encode_body"],
        response_class=Response,
        responses=documents.responses(scheme, "encode"),
        openapi_extra={"requestBody": documents.encode_body(scheme)},
    )


def _add_post_verify(made: APIRouter, scheme: Scheme) -> None:
    async def handle(request: Request, query: Any) -> Response:
        return await handlers.conformance(request, scheme, query)

    made.add_api_route(
        f"/{scheme.name}/verify",
        _with_query(handle, model(scheme, "conformance")),
        methods=["POST"],
        tags=[scheme.name],
        operation_id=f"{scheme.name}_verify_post",
        summary=documents.summaries["conformance"],
        description=documents.descriptions["conformance"],
        response_class=Response,
        responses=documents.responses(scheme, "conformance"),
        openapi_extra={
            "requestBody": documents.ARRAY_BODY,
            "parameters": documents.ARRAY_HEADERS,
        },
    )


def _add_extra(made: APIRouter, scheme: Scheme, extra: Extra) -> None:
    schema = extras.body_schema(extra)

    async def handle(request: Request) -> Response:
        return await extras.answer(request, scheme, extra, schema)

    parameters = extra.query or extra.array is not None
    made.add_api_route(
        f"/{scheme.name}/{extra.name}",
        handle,
        methods=["POST"],
        tags=[scheme.name],
        operation_id=f"{scheme.name}_{extra.name.replace('/', '_')}_post",
        summary=extra.summary,
        response_class=Response,
        responses=documents.extra_responses(extra),
        openapi_extra={
            "requestBody": documents.extra_body(extra),
            **({"parameters": documents.extra_parameters(extra)} if parameters else {}),
        },
    )


def _add_aliases(made: APIRouter, schemes: dict[str, Scheme]) -> None:
    for name, (endpoint, handler) in _GET.items():
        made.add_api_route(
            f"/{name}",
            _alias_get(schemes, name, endpoint, handler),
            methods=["GET"],
            include_in_schema=False,
            response_class=Response,
        )
    made.add_api_route(
        "/encode",
        _alias_post_encode(schemes),
        methods=["POST"],
        include_in_schema=False,
        response_class=Response,
    )
    made.add_api_route(
        "/verify",
        _alias_post_verify(schemes),
        methods=["POST"],
        include_in_schema=False,
        response_class=Response,
    )


def _chosen(schemes: dict[str, Scheme], name: Any) -> Scheme:
    found = schemes.get(name) if isinstance(name, str) else None
    if found is None:
        known = ", ".join(schemes)
        shown = repr(name) if len(repr(name)) <= 40 else repr(name)[:37] + "..."
        raise ParameterError("scheme", f"must be one of {known}, got {shown}")
    return found


def _query_of(request: Request, query_model: type[BaseModel], skip: str | None = None) -> BaseModel:
    """The query validated by ``query_model`` (less ``skip``: an alias's ``scheme``)."""
    listed = list_fields(query_model)
    given: dict[str, Any] = {}
    for key, value in request.query_params.multi_items():
        if key == skip:
            continue
        if key in listed:
            given.setdefault(key, []).append(value)
        else:
            given[key] = value
    try:
        return query_model.model_validate(given)
    except ValidationError as error:
        raise RequestValidationError(
            [{**e, "loc": ("query", *e["loc"])} for e in error.errors()]
        ) from None


def _canonical_link(response: Response, request: Request, scheme: Scheme, name: str) -> Response:
    kept = [(k, v) for k, v in request.query_params.multi_items() if k != "scheme"]
    query = urlencode(kept, safe=",")
    target = f"/v1/{scheme.name}/{name}" + (f"?{query}" if query else "")
    response.headers["Link"] = f'<{target}>; rel="canonical"'
    return response


def _alias_get(
    schemes: dict[str, Scheme], name: str, endpoint: Endpoint, handler: Handler
) -> Callable[[Request], Awaitable[Response]]:
    async def alias(request: Request) -> Response:
        scheme = _chosen(schemes, request.query_params.get("scheme", DEFAULT))
        if name not in scheme.endpoints:
            reason = "it has no per-position vectors; /table gives its pairwise array"
            raise NotApplicableError("scheme", scheme.name, reason)
        query = _query_of(request, model(scheme, endpoint), skip="scheme")
        return _canonical_link(await handler(request, scheme, query), request, scheme, name)

    return alias


def _alias_post_encode(schemes: dict[str, Scheme]) -> Callable[[Request], Awaitable[Response]]:
    async def alias(request: Request) -> Response:
        named = request.query_params.get("scheme")
        chosen: list[Scheme] = []

        def resolve(members: dict[str, Any]) -> Scheme:
            # The older form may name the scheme in the query or in the body, not two ways.
            given = members.pop("scheme", None)
            if named is not None and given is not None and given != named:
                raise InconsistentError(
                    "scheme", f"the query says {named!r}, the body says {given!r}"
                )
            chosen.append(_chosen(schemes, named or given or DEFAULT))
            return chosen[0]

        query = _query_of(request, documents.FormatOnly, skip="scheme")
        response = await handlers.encode_post(request, query.format, resolve)  # type: ignore[attr-defined]
        return _canonical_link(response, request, chosen[0], "encode")

    return alias


def _alias_post_verify(schemes: dict[str, Scheme]) -> Callable[[Request], Awaitable[Response]]:
    async def alias(request: Request) -> Response:
        scheme = _chosen(schemes, request.query_params.get("scheme", DEFAULT))
        if scheme.conformance is None:
            raise NotApplicableError("scheme", scheme.name, "it offers no conformance check")
        query = _query_of(request, model(scheme, "conformance"), skip="scheme")
        response = await handlers.conformance(request, scheme, query)
        return _canonical_link(response, request, scheme, "verify")

    return alias


# --- /v1/schemes ----------------------------------------------------------------------------


def schemes_document(schemes: tuple[Scheme, ...]) -> dict[str, Any]:
    """Every scheme with its parameters, defaults, limits and operations: what the page builds
    its controls from and what a client can discover."""
    return {"schemes": [_described(scheme) for scheme in schemes]}


def _described(scheme: Scheme) -> dict[str, Any]:
    return {
        "name": scheme.name,
        "summary": scheme.summary,
        "parameters": [_parameter(scheme, f) for f in scheme.fields()],
        "components": list(scheme.components),
        "dtypes": list(scheme.dtypes) if scheme.dtypes else ["int32"],
        "rows": "grid cells (grid=)" if scheme.rows == "grid" else "positions (seq_len=)",
        "endpoints": list(scheme.endpoints),
        "paths": {name: f"/v1/{scheme.name}/{name}" for name in _paths(scheme)},
        "similarity": scheme.vectors is not None,
        "conformance": scheme.conformance is not None,
        "rotates": scheme.rotates,
        "examples": [dict(example) for example in scheme.examples],
    }


def _paths(scheme: Scheme) -> list[str]:
    return [name if name != "conformance" else "verify" for name in scheme.endpoints]


def _parameter(scheme: Scheme, f: Any) -> dict[str, Any]:
    s = spec(f)
    hint = hints(scheme.params)[f.name]
    listed, kind = _kind(hint)
    required = f.default is dataclasses.MISSING
    return {
        "name": f.name,
        "type": f"{kind} list" if listed else kind,
        "default": None if required else _plain(f.default),
        "required": required,
        "rule": s.doc,
        "minimum": s.ge if s.ge is not None else s.gt,
        "maximum": s.le if s.le is not None else s.lt,
        "exclusive_minimum": s.gt is not None,
        "multiple_of": s.multiple_of,
        "min_items": s.min_items,
        "max_items": s.max_items,
        "choices": list(found) if (found := choices(hint)) else None,
    }


_KINDS: dict[Any, str] = {bool: "boolean", int: "integer", float: "number", str: "string"}


def _kind(hint: Any) -> tuple[bool, str]:
    """Whether a parameter takes a list, and the JSON type of its values, read off its type
    (never off its spelling: ``Literal["interleaved"]`` is a string)."""
    if choices(hint) is not None:
        return False, "string"
    union = typing.get_origin(hint) in (typing.Union, types.UnionType)
    value = next(o for o in (typing.get_args(hint) if union else (hint,)) if o is not type(None))
    if typing.get_origin(value) is tuple:
        return True, _KINDS[typing.get_args(value)[0]]
    return False, _KINDS[value]


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value

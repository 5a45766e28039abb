"""Every error as application/problem+json (RFC 9457): one table of exception → status, type.

Starlette looks handlers up along the exception's MRO, so ``LimitError`` finds its own row
before its base class ``ParameterError`` does. Unexpected errors answer a fixed body; their
message is logged, never sent.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from http import HTTPStatus
from typing import Any

import orjson
from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.routing import Match

from app.admission import (
    ClientGoneError,
    OverloadedError,
    RequestTimeoutError,
)
from posenc.errors import (
    ExternalDataNeededError,
    IncompleteError,
    InconsistentError,
    LimitError,
    NotApplicableError,
    ParameterError,
    PosencError,
)

MEDIA_TYPE = "application/problem+json"
_log = logging.getLogger("posenc")

# exception class → (status, problem type)
PROBLEMS: dict[type[Exception], tuple[int, str]] = {
    PosencError: (422, "about:blank"),
    ParameterError: (422, "about:blank"),
    NotApplicableError: (422, "urn:posenc:problem:not-applicable"),
    LimitError: (422, "urn:posenc:problem:limit-exceeded"),
    InconsistentError: (422, "urn:posenc:problem:inconsistent-parameters"),
    ExternalDataNeededError: (422, "urn:posenc:problem:external-data-needed"),
}


# RFC 9110's names; Python's HTTPStatus keeps older ones for these two before 3.13.
_TITLES = {413: "Content Too Large", 422: "Unprocessable Content"}


def problem(
    status: int,
    detail: str,
    errors: list[dict[str, Any]] | None = None,
    type_: str = "about:blank",
    headers: Mapping[str, str] | None = None,
    needed_bytes: int | None = None,
    needed: list[dict[str, Any]] | None = None,
) -> Response:
    body: dict[str, Any] = {
        "type": type_,
        "title": _TITLES.get(status) or HTTPStatus(status).phrase,
        "status": status,
        "detail": detail,
    }
    if errors is not None:
        body["errors"] = errors
    if needed_bytes is not None:
        body["needed_bytes"] = needed_bytes
    if needed is not None:
        body["needed"] = needed
    return Response(orjson.dumps(body), status_code=status, media_type=MEDIA_TYPE, headers=headers)


def _core_error(request: Request, exc: Exception) -> Response:
    status, type_ = next(PROBLEMS[cls] for cls in type(exc).__mro__ if cls in PROBLEMS)
    param = getattr(exc, "param", None)
    errors = None
    if param is not None:
        source = getattr(request.state, "param_source", "query")
        errors = [{"loc": [source, param], "msg": getattr(exc, "message", str(exc))}]
    # A file's first bytes that stop too soon: how many to send, a number a client acts on
    # rather than parses from the detail's prose.
    needed = exc.needed_bytes if isinstance(exc, IncompleteError) else None
    # Bytes of another file the body's file refers to: the ranges to send, likewise.
    ranges = exc.needed if isinstance(exc, ExternalDataNeededError) else None
    return problem(status, str(exc), errors, type_, needed_bytes=needed, needed=ranges)


def _validation_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    errors = [
        {
            "loc": [str(part) if not isinstance(part, int) else part for part in error["loc"]],
            "msg": error["msg"],
        }
        for error in exc.errors()
    ]
    detail = "; ".join(
        f"{'.'.join(str(part) for part in error['loc'][1:]) or error['loc'][0]}: {error['msg']}"
        for error in errors
    )
    kinds = {error.get("type") for error in exc.errors()}
    if kinds == {"extra_forbidden"} and _known_elsewhere(request, errors):
        return problem(422, detail, errors, "urn:posenc:problem:not-applicable")
    if kinds == {"inconsistent"}:
        return problem(422, detail, errors, "urn:posenc:problem:inconsistent-parameters")
    return problem(422, detail, errors)


def _known_elsewhere(request: Request, errors: list[dict[str, Any]]) -> bool:
    """Is every unknown field a parameter of some scheme (so: one that does not apply here)?"""
    schemes = getattr(request.app.state, "schemes", ())
    known = {f.name for scheme in schemes for f in scheme.fields()}
    known |= {"dtype", "component", "seq_len", "offset", "grid", "vector", "vectors"}
    return all(error["loc"][-1] in known for error in errors)


def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    detail = exc.detail if isinstance(exc.detail, str) else HTTPStatus(exc.status_code).phrase
    headers = exc.headers
    if exc.status_code == 405:
        # Starlette names the methods of the first route on the path; a path may have several.
        allowed = allowed_methods(request)
        if request.method == "OPTIONS":
            return Response(status_code=204, headers={"Allow": ", ".join([*allowed, "OPTIONS"])})
        headers = {"Allow": ", ".join(allowed)}
    return problem(exc.status_code, detail, headers=headers)


def allowed_methods(request: Request) -> list[str]:
    """Every method some route takes at this request's path, sorted."""
    scope = {**request.scope, "method": "GET", "root_path": ""}
    methods: set[str] = set()
    pending = list(request.app.router.routes)
    while pending:
        route = pending.pop()
        # An included router (FastAPI wraps them) holds routes of its own.
        inner = getattr(getattr(route, "original_router", None), "routes", None)
        if inner is not None:
            pending.extend(inner)
            continue
        match, _ = route.matches(scope)
        if match is not Match.NONE:
            methods |= set(getattr(route, "methods", None) or ())
    return sorted(methods - {"HEAD"})


def _timeout(request: Request, exc: Exception) -> Response:
    return problem(503, str(exc), type_="urn:posenc:problem:timeout", headers={"Retry-After": "1"})


def _overloaded(request: Request, exc: Exception) -> Response:
    retry = str(OverloadedError.retry_after_s)
    return problem(
        503,
        f"the service is at its memory budget ({exc}); retry after {retry} s",
        type_="urn:posenc:problem:overloaded",
        headers={"Retry-After": retry},
    )


def _client_gone(request: Request, exc: Exception) -> Response:
    # Nobody reads it; nginx's 499 keeps it apart from real answers in logs and metrics.
    return Response(status_code=499)


def _unexpected(request: Request, exc: Exception) -> Response:
    _log.error("unexpected error on %s %s", request.method, request.url.path, exc_info=exc)
    return problem(500, "an internal error occurred; it has been logged")


def register(app: FastAPI) -> None:
    for cls in PROBLEMS:
        app.add_exception_handler(cls, _core_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(RequestTimeoutError, _timeout)
    app.add_exception_handler(OverloadedError, _overloaded)
    app.add_exception_handler(ClientGoneError, _client_gone)
    app.add_exception_handler(Exception, _unexpected)

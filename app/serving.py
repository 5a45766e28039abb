"""What the endpoints share: settings and cache, size checks, canonical parameters, caching
answers, and running the heavy part off the event loop within the time limit."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar

import anyio
import numpy as np
import numpy.typing as npt
from fastapi import Request, Response

import posenc
from app import formats, responses
from app.params import TEXT_FORMATS, EncodingQuery, Format, check_size
from app.responses import Body
from app.settings import Settings
from posenc.cache import ByteBoundedCache
from posenc.errors import ParameterError

Result = TypeVar("Result")

_PROBLEM = {
    "type": "object",
    "required": ["type", "title", "status", "detail"],
    "properties": {
        "type": {"type": "string"},
        "title": {"type": "string"},
        "status": {"type": "integer"},
        "detail": {"type": "string"},
        "errors": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["loc", "msg"],
                "properties": {
                    "loc": {"type": "array", "items": {"type": ["string", "integer"]}},
                    "msg": {"type": "string"},
                },
            },
        },
    },
}


def _problem(description: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {"application/problem+json": {"schema": _PROBLEM}},
    }


# Every /v1 operation may answer these (RFC 9457 problems).
PROBLEM_RESPONSES: dict[int | str, dict[str, Any]] = {
    400: _problem("the body is not parseable"),
    413: _problem("the body is over POSENC_MAX_BODY_BYTES"),
    422: _problem(
        "a parameter is invalid, does not apply to the scheme, or the answer would "
        "be over a size limit"
    ),
    503: _problem(
        "the request ran past POSENC_REQUEST_TIMEOUT_S (retry after the header's seconds)"
    ),
}
_BINARY = {"schema": {"type": "string", "format": "binary"}}
ARRAY_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "the array, in the negotiated format (`format=` or Accept)",
        "content": {
            "application/json": {"schema": {"type": "object"}},
            "application/x-npy": _BINARY,
            "application/octet-stream": _BINARY,
            "text/csv": {"schema": {"type": "string"}},
            "image/png": _BINARY,
        },
    },
    304: {"description": "the If-None-Match tag matched: the cached copy is current"},
}


class RequestTimeoutError(Exception):
    """The heavy part of a request ran past POSENC_REQUEST_TIMEOUT_S: an overload, not bad input."""

    def __init__(self, seconds: float) -> None:
        super().__init__(
            f"the request took longer than {seconds:g} s (POSENC_REQUEST_TIMEOUT_S); "
            "the service is busy, try again"
        )


async def off_loop(request: Request, work: Callable[..., Result], *args: Any) -> Result:
    """Run ``work`` in the app's bounded thread pool, giving up after the request time limit.

    The event loop stays free for /healthz and cache hits; an abandoned thread finishes its
    (size-limited) work in the background and still holds its pool slot until then.
    """
    settings: Settings = request.app.state.settings
    if request.app.state.limiter is None:
        request.app.state.limiter = anyio.CapacityLimiter(settings.threads)
    try:
        with anyio.fail_after(settings.request_timeout_s):
            return await anyio.to_thread.run_sync(
                work, *args, limiter=request.app.state.limiter, abandon_on_cancel=True
            )
    except TimeoutError:
        raise RequestTimeoutError(settings.request_timeout_s) from None


def state(request: Request) -> tuple[Settings, ByteBoundedCache]:
    return request.app.state.settings, request.app.state.cache


def check_sizes(settings: Settings, fmt: Format, param: str, what: str, size: int) -> None:
    check_size(param, what, size, settings.max_elements, "POSENC_MAX_ELEMENTS")
    if fmt in TEXT_FORMATS:
        check_size(param, what, size, settings.max_text_elements, "POSENC_MAX_TEXT_ELEMENTS")


def canonical(query: EncodingQuery, params: Any, **extra: Any) -> dict[str, Any]:
    given = {k: v for k, v in dataclasses.asdict(params).items() if v is not None}
    canonical = {**given, "dtype": query.served_dtype(), **extra}
    component = query.chosen_component()
    if component:
        canonical["component"] = component
    for side in ("width", "height"):  # they change a png, so they belong in its ETag
        if getattr(query, side, None) is not None:
            canonical[side] = getattr(query, side)
    return canonical


def check_picture(query: EncodingQuery, fmt: Format) -> None:
    for side in ("width", "height"):
        if getattr(query, side, None) is not None and fmt != "png":
            raise ParameterError(side, f"applies only to format=png, not {fmt}")


async def serve(
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
    body = await off_loop(request, render, responses.accepts_gzip(request))
    return responses.send(body, etag)


def array_for(
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


def labels(query: EncodingQuery, shape: tuple[int, ...], rows: list[int] | None) -> formats.Labels:
    component = query.chosen_component()
    title = f"{query.scheme} {component}".strip()
    size = {"width": getattr(query, "width", None), "height": getattr(query, "height", None)}
    if len(shape) == 1:
        return formats.Labels(title, "index", "", "value", **size)
    return formats.Labels(
        title,
        "dimension" if len(shape) == 2 else "position",
        "position",
        "value",
        y_values=rows if len(shape) == 2 else None,
        **size,
    )


def check_positions(settings: Settings, fmt: Format, positions: list[int], size: int) -> None:
    check_size(
        "positions",
        "the positions list",
        len(positions),
        settings.max_positions,
        "POSENC_MAX_POSITIONS",
    )
    check_sizes(settings, fmt, "positions", "the answer", size)

"""What the endpoints share: settings and cache, what an answer costs, canonical parameters,
and the way every computational GET is served (refuse, 304, admit, run, send)."""

from __future__ import annotations

import dataclasses
import hashlib
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
from fastapi import Request, Response
from pydantic import BaseModel

from app import formats, responses
from app.admission import Estimate, admit, decide, run
from app.models import TEXT_FORMATS, Format, component_of, dtype_of
from app.responses import Body
from app.settings import Settings
from posenc.cache import ByteBoundedCache
from posenc.cost import Cost
from posenc.declare import Scheme
from posenc.errors import InconsistentError
from posenc.rows import Rows

# Peak bytes per value of serialising as text: the digits, orjson's growing buffer, the joined
# body and its gzip copy (measured 28–77 per value, float64 CSV the most).
_TEXT_BYTES = {"float64": 80, "float32": 48, "float16": 64, "int32": 48}
_PNG_SIDE = 2048


def serialized(
    shape: tuple[int, ...], dtype: str, fmt: Format, picture: tuple[int | None, int | None]
) -> Cost:
    """What turning an array of ``shape`` into a ``fmt`` body costs, beside the array itself."""
    values = math.prod(shape)
    if fmt in ("bin", "npy"):
        # Sent as a view of the computed array (npy: behind its header), but reserved as if
        # copied: without that margin a 512 MiB box was OOM-killed once under the crowd (the
        # budget, the cache and the idle process leave ~50 MiB for what no cost counts).
        return Cost(values * np.dtype(dtype).itemsize + 2**16, values)
    if fmt == "png":
        # Every value widened to float64 for the colour limits, then ~40 bytes per pixel.
        rows = shape[0] if len(shape) > 1 else 1
        columns = values // rows
        width = picture[0] or min(max(columns, 256), _PNG_SIDE)
        height = picture[1] or min(max(rows, 256), _PNG_SIDE)
        return Cost(values * 8 + width * height * 40 + 2**20, values + width * height * 40)
    return Cost(values * _TEXT_BYTES[dtype] + 8 * 2**20, values * 100)


def estimate(
    scheme: Scheme, query: BaseModel, fmt: Format, compute: Cost, shape: tuple[int, ...], what: str
) -> Estimate:
    """The estimate of an array answer: computing it, then serialising it."""
    picture = (getattr(query, "width", None), getattr(query, "height", None))
    cost = compute + serialized(shape, dtype_of(scheme, query), fmt, picture)
    param = "grid" if scheme.rows == "grid" else "seq_len"
    return Estimate(cost, math.prod(shape), fmt in TEXT_FORMATS, param, what)


def check_holdable(
    scheme: Scheme, params: Any, first: int, last: int, dtype: str, component: str
) -> None:
    """Refuse, before computing, a dtype that cannot hold the array (float16 past 65504): no
    answer and no check ever receives infinities. Called once admitted: a scheme's bound may read
    its frequencies, which the request's cost declares and its table then reuses (cached)."""
    why = scheme.unholdable(params, first, last, dtype, component)
    if why:
        raise InconsistentError("dtype", f"{why}: ask for float32")


def state(request: Request) -> tuple[Settings, ByteBoundedCache]:
    return request.app.state.settings, request.app.state.cache


def canonical(
    scheme: Scheme, query: BaseModel, params: Any, fmt: str = "", **extra: Any
) -> dict[str, Any]:
    """The answer's parameters as the envelope shows them and the ETag hashes them: every
    value the answer depends on, in one spelling."""
    given = {k: v for k, v in dataclasses.asdict(params).items() if v is not None}
    canonical = {**given, "dtype": dtype_of(scheme, query), **extra}
    component = component_of(scheme, query)
    if component and "component" in type(query).model_fields:
        canonical["component"] = component
    for side in ("width", "height"):  # they change a png (only), so they belong in its ETag
        if fmt == "png" and getattr(query, side, None) is not None:
            canonical[side] = getattr(query, side)
    return canonical


async def serve(
    request: Request,
    scheme: Scheme,
    endpoint: str,
    canonical: dict[str, Any],
    fmt: Format,
    need: Estimate,
    render: Callable[[bool], Body],
    stream: Callable[[str], Response] | None = None,
) -> Response:
    """Refuse what can never be served; 304 if the client has it; else admit, render, send —
    or, given ``stream``, the response that computes as it sends (:mod:`app.streaming`).

    The ETag names the canonical operation, so the ``?scheme=`` alias shares it; app/replay.py
    keeps the answer, so a repeat never comes this far.
    """
    decide(request.app.state.settings, need)
    route = f"/v1/{scheme.name}/{endpoint}"
    etag = responses.etag_for(route, {"scheme": scheme.name, "params": canonical}, fmt)
    matched = responses.matching_tag(request, etag)
    if matched is not None:
        return responses.not_modified(matched)
    await admit(request, need)
    if stream is not None:
        return stream(etag)
    body = await run(request, render, responses.accepts_gzip(request))
    return responses.send(body, etag)


async def send_array(
    request: Request,
    scheme: Scheme,
    members: BaseModel,
    params: Any,
    fmt: Format,
    shape: tuple[int, ...],
    cost: Cost,
    param: str,
    listed: dict[str, Any],
    make: Callable[[], npt.NDArray[Any]],
) -> Response:
    """A body's array answer (``POST /encode``): the cost of ``make``'s array of ``shape`` in
    ``fmt``, refused naming ``param``, then admitted, made in the pool and sent. ``listed`` is
    what the canonical parameters show beside the scheme's."""
    need = estimate(scheme, members, fmt, cost, shape, f"the array {list(shape)}")
    need = dataclasses.replace(need, param=param)
    envelope = {"scheme": scheme.name, "params": canonical(scheme, members, params, fmt, **listed)}
    figure = labels(scheme, members, params, shape, None)
    gzip = responses.accepts_gzip(request)

    def compute() -> Body:
        return Body.of(make(), fmt, envelope, figure, gzip)

    await admit(request, need)
    return responses.send(await run(request, compute), None)


def array_for(
    cache: ByteBoundedCache,
    scheme: Scheme,
    params: Any,
    positions: Rows | npt.NDArray[np.int64],
    dtype: str,
    component: str,
) -> npt.NDArray[Any]:
    """The scheme's array for consecutive ``Rows`` or listed positions, through the cache."""
    key = array_key(scheme, params, positions, dtype, component)

    def compute() -> npt.NDArray[Any]:
        if isinstance(positions, Rows) and not scheme.follows_rows(params, component):
            # Sized by the parameters alone: the rows count only through their end.
            return scheme.encode(params, np.array([positions.last]), dtype, component)
        if isinstance(positions, Rows):
            if scheme.table is not None:
                return scheme.table(params, positions.count, positions.offset, dtype, component)
            return scheme.encode(params, positions.array(), dtype, component)
        return scheme.encode(params, positions, dtype, component)

    return cache.get_or_compute(key, compute)


def array_key(
    scheme: Scheme,
    params: Any,
    positions: Rows | npt.NDArray[np.int64],
    dtype: str,
    component: str,
) -> tuple[object, ...]:
    ends: tuple[object, ...] = (
        (positions.offset, positions.count)
        if isinstance(positions, Rows)
        # Listed positions by a 256-bit digest: the cache counts values, not keys, and 65536
        # positions as bytes were a 512 KiB key for a 256 KiB table (d_model=1, float32).
        else (hashlib.blake2b(positions.tobytes(), digest_size=32).digest(),)
    )
    return ("array", scheme.name, params, dtype, component, isinstance(positions, Rows), *ends)


def labels(
    scheme: Scheme, query: BaseModel, params: Any, shape: tuple[int, ...], rows: list[int] | None
) -> formats.Labels:
    """What a picture of the array shows. A figure draws the last two axes (of a stack, its
    first slice): each is positions where it grows with the rows (a table's rows, both axes of
    a position-by-position bias), else dimensions (a table's columns, a cache's pairs)."""
    component = component_of(scheme, query)
    title = f"{scheme.name} {component}".strip()
    size = {"width": getattr(query, "width", None), "height": getattr(query, "height", None)}
    if len(shape) == 1:
        return formats.Labels(title, "index", "", "value", **size)
    one, two = scheme.shape(params, 1, component), scheme.shape(params, 2, component)
    down, across = (a != b for a, b in zip(one[-2:], two[-2:], strict=True))
    return formats.Labels(
        title,
        "position" if across else "dimension",
        "position" if down else "dimension",
        "value",
        x_values=rows if across else None,
        y_values=rows if down else None,
        **size,
    )

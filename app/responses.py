"""Bodies with the HTTP around them: ETag, Cache-Control, Vary, X-Array-*, gzip and 304."""

from __future__ import annotations

import gzip
import hashlib
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import orjson
from fastapi import Request, Response
from starlette.types import Receive, Scope, Send

import posenc
from app import formats, provenance
from app.models import Format
from posenc.errors import InconsistentError

VERSION = posenc.__version__
CACHE_CONTROL = "public, max-age=31536000, immutable"
VARY = "Accept, Accept-Encoding"
_GZIP_FORMATS = frozenset({"json", "csv", "plotly"})
_GZIP_MIN_BYTES = 1024


@dataclass(frozen=True)
class Body:
    """A serialized answer, ready to send and small enough to cache beside the arrays.

    ``head`` goes out before ``content``, as a piece of its own: npy's header, so that the
    values after it can stay a view of the cached array instead of being copied behind it.
    """

    # For npy and bin a read-only view of the array (the cached one for GETs), not a copy.
    # Safe to hand to the transport: the memoryview holds a reference to the array, so the
    # bytes outlive the array's eviction until the server has written the last of them; and
    # the cache froze the array down to its owner (posenc/cache.py), while an uncached one
    # (a POST's) has no other holder, so no thread can change them meanwhile.
    content: bytes | memoryview
    fmt: Format
    gzipped: bool
    shape: tuple[int, ...] | None = None
    dtype: str | None = None
    head: bytes = b""

    @property
    def nbytes(self) -> int:
        return len(self.head) + len(self.content)

    @classmethod
    def of(
        cls,
        array: npt.NDArray[Any],
        fmt: Format,
        envelope: dict[str, Any],
        labels: formats.Labels,
        accepts_gzip: bool,
    ) -> Body:
        _check_range(array)
        shape, dtype = tuple(array.shape), str(array.dtype)
        if fmt in ("npy", "bin"):
            head, values = formats.raw(array, fmt)
            return cls(values, fmt, False, shape, dtype, head)
        content = formats.serialize(array, fmt, envelope, labels)
        return cls.text(content, fmt, accepts_gzip, shape, dtype)

    @classmethod
    def text(
        cls,
        content: bytes | memoryview,
        fmt: Format,
        accepts_gzip: bool,
        shape: tuple[int, ...] | None = None,
        dtype: str | None = None,
    ) -> Body:
        compress = accepts_gzip and fmt in _GZIP_FORMATS and len(content) > _GZIP_MIN_BYTES
        if compress:
            # Level 1: three times faster than the default for ~10 % more bytes on number text.
            content = gzip.compress(content, compresslevel=1, mtime=0)
        return cls(content, fmt, compress, shape, dtype)


def _check_range(array: npt.NDArray[Any]) -> None:
    """float16 tops out at 65504: an answer whose values pass it would hold infinities, which
    JSON cannot carry and no client wants. (float32 and float64 hold every value served.)"""
    if array.dtype == np.float16 and not np.isfinite(array).all():
        raise InconsistentError(
            "dtype", "float16 cannot hold these values (beyond ±65504): ask for float32"
        )


def etag_for(route: str, canonical: dict[str, Any], fmt: Format) -> str:
    """Strong, from what the answer depends on: the code and platform that make it
    (:mod:`app.provenance`) and the query, so equal queries in any spelling share it."""
    made_by = provenance.digest()
    key = orjson.dumps([made_by, route, canonical, fmt], option=orjson.OPT_SORT_KEYS)
    return '"' + hashlib.sha256(key).hexdigest()[:32] + '"'


def _gzip_variant(etag: str) -> str:
    # A compressed body is another representation, so it needs a strong tag of its own.
    return etag[:-1] + '-gzip"'


def accepts_gzip(request: Request) -> bool:
    for item in request.headers.get("accept-encoding", "").split(","):
        coding, _, params = item.strip().partition(";")
        if coding.strip().lower() == "gzip":
            return params.replace(" ", "") not in {"q=0", "q=0.0", "q=0.00", "q=0.000"}
    return False


def matching_tag(request: Request, etag: str) -> str | None:
    """The tag of If-None-Match that names this answer, plain or gzipped, if any.

    The comparison is weak (RFC 9110 §13.1.2), so W/ prefixes do not matter.
    """
    return tag_in(request.headers.get("if-none-match"), etag)


def tag_in(header: str | None, etag: str) -> str | None:
    """``etag`` or its gzip variant if the If-None-Match ``header`` names it (``*`` names all)."""
    if header is None:
        return None
    if header.strip() == "*":
        return etag
    tags = {tag.strip().removeprefix("W/") for tag in header.split(",")}
    return next((tag for tag in (etag, _gzip_variant(etag)) if tag in tags), None)


def caching_headers(etag: str) -> dict[str, str]:
    return {"ETag": etag, "Cache-Control": CACHE_CONTROL, "Vary": VARY}


def not_modified(etag: str) -> Response:
    return Response(status_code=304, headers=caching_headers(etag))


def send(body: Body, etag: str | None) -> Response:
    headers = headers_for(body.shape, body.dtype, etag, body.gzipped, body.nbytes)
    return _PiecesResponse(body, media_type=formats.MEDIA_TYPES[body.fmt], headers=headers)


def headers_for(
    shape: tuple[int, ...] | None, dtype: str | None, etag: str | None, gzipped: bool, nbytes: int
) -> dict[str, str]:
    headers = {"Vary": VARY}
    if shape is not None and dtype is not None:
        headers["X-Array-Shape"] = ",".join(map(str, shape))
        headers["X-Array-Dtype"] = dtype
    if etag is not None:
        headers.update(caching_headers(_gzip_variant(etag) if gzipped else etag))
    else:
        headers["Cache-Control"] = "no-store"
    if gzipped:
        headers["Content-Encoding"] = "gzip"
    headers["Content-Length"] = str(nbytes)
    return headers


class _PiecesResponse(Response):
    """Sends a body's head and content as they are, one message each, never joined:
    Starlette's Response would encode anything but bytes, and takes one body only.

    The pieces are bytes or read-only memoryviews that keep their array alive (see ``Body``);
    FlowControlMiddleware slices them into further views, and the server awaits its
    transport's drain between messages, so what the transport holds is a view it owns a
    reference to, never a pointer into memory another owner may free."""

    def __init__(self, body: Body, media_type: str, headers: dict[str, str]) -> None:
        self.pieces = (body.head, body.content) if body.head else (body.content,)
        super().__init__(None, media_type=media_type, headers=headers)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send(
            {"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers}
        )
        for index, piece in enumerate(self.pieces, start=1):
            more = index < len(self.pieces)
            await send({"type": "http.response.body", "body": piece, "more_body": more})

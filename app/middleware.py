"""ASGI middleware that must see the raw request: the body-size limit, the refusal of coded
bodies, and common headers."""

from __future__ import annotations

import anyio
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.problems import problem

# How long a refused request's connection stays open, dropping what the client still sends,
# after its complete 413 has been written (nginx's lingering close, much shorter).
LINGER_S = 1.0


class BodyTooLargeError(Exception):
    """Raised from ``receive`` when a streamed body passes the limit; the middleware answers."""


class BodyLimitMiddleware:
    """413 for bodies over the limit: by Content-Length before a byte of the body is read, else
    counted as they stream and refused as soon as they pass it.

    The 413 is complete when written (Content-Length) and says ``Connection: close``: a client
    that sent ``Expect: 100-continue`` or waits for the verdict reads it at once and sends
    nothing. The connection then lingers for at most ``linger_s``, dropping (never holding)
    what the client is still sending — so a client that writes its whole body before reading
    has its 413 waiting rather than a reset connection — and is closed.
    """

    def __init__(self, app: ASGIApp, max_body_bytes: int, linger_s: float = LINGER_S) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.linger_s = linger_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_body_bytes):
            await self._refuse(receive, send)
            return
        received = 0
        started = False

        async def counting_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_body_bytes:
                    raise BodyTooLargeError
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counting_receive, tracking_send)
        except BodyTooLargeError:
            if not started:
                await self._refuse(receive, send)

    async def _refuse(self, receive: Receive, send: Send) -> None:
        response = problem(
            413,
            f"the request body is over the limit of {self.max_body_bytes} bytes "
            "(POSENC_MAX_BODY_BYTES)",
        )
        await refuse_unread(response, receive, send, self.linger_s)


class ContentCodingMiddleware:
    """415 for a request whose body comes in a content coding (``Content-Encoding: gzip`` …),
    naming it, before a byte of the body is read: the service reads bodies as they are sent
    (``identity``), and a decoded size is not one that ``POSENC_MAX_BODY_BYTES`` and the
    memory budget could reserve for before decoding (a gzip bomb). The answer says
    ``Accept-Encoding: identity`` (RFC 9110 §15.5.16)."""

    def __init__(self, app: ASGIApp, linger_s: float = LINGER_S) -> None:
        self.app = app
        self.linger_s = linger_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            given = b",".join(v for k, v in scope["headers"] if k == b"content-encoding")
            codings = [c.strip().lower() for c in given.decode("latin-1").split(",") if c.strip()]
            coded = [c for c in codings if c != "identity"]
            if coded:
                response = problem(
                    415,
                    f"the request body is in the content coding {', '.join(coded)} "
                    "(Content-Encoding): send it uncoded (identity)",
                    headers={"Accept-Encoding": "identity"},
                )
                await refuse_unread(response, receive, send, self.linger_s)
                return
        await self.app(scope, receive, send)


async def refuse_unread(response: Response, receive: Receive, send: Send, linger_s: float) -> None:
    """``response``, complete and saying ``Connection: close``, before the body is read; then,
    for at most ``linger_s``, what the client still sends is dropped (never held)."""
    headers = [*response.raw_headers, (b"connection", b"close")]
    await send({"type": "http.response.start", "status": response.status_code, "headers": headers})
    await send({"type": "http.response.body", "body": response.body, "more_body": True})
    with anyio.move_on_after(linger_s):
        while True:
            message = await receive()
            if message["type"] != "http.request" or not message.get("more_body", False):
                break
    await send({"type": "http.response.body", "body": b"", "more_body": False})


class SecurityHeadersMiddleware:
    """nosniff on every response: bodies are data, never something for a browser to run."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message.setdefault("headers", [])
                message["headers"] = [*message["headers"], (b"x-content-type-options", b"nosniff")]
            await send(message)

        await self.app(scope, receive, with_headers if scope["type"] == "http" else send)


# Slices of a large body handed to the server one at a time: the server awaits its transport's
# drain before taking the next, so at most one slice per connection sits in user space.
SEND_SLICE_BYTES = 256 * 1024


class FlowControlMiddleware:
    """Sends large response bodies in slices, at the pace the client reads them.

    A server writes a body it is given whole into its transport; what the socket does not take
    at once is copied into the transport's buffer, where it stays until a slow client reads it —
    after the app has returned and released its memory reservation. Sliced, the body leaves as
    the client reads, the copy is at most one slice, and the app returns (and releases) only once
    the last slice is out. The slices are views: no copy of the body is made here.
    """

    def __init__(self, app: ASGIApp, slice_bytes: int = SEND_SLICE_BYTES) -> None:
        self.app = app
        self.slice_bytes = slice_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def sliced(message: Message) -> None:
            body = message.get("body", b"")
            if message["type"] != "http.response.body" or len(body) <= self.slice_bytes:
                await send(message)
                return
            view = memoryview(body).cast("B")
            last = message.get("more_body", False)
            for start in range(0, len(view), self.slice_bytes):
                end = start + self.slice_bytes
                more = end < len(view) or last
                await send(
                    {"type": "http.response.body", "body": view[start:end], "more_body": more}
                )

        await self.app(scope, receive, sliced)

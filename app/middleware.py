"""ASGI middleware that must see the raw request: the body-size limit and common headers."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.problems import problem

_DRAIN_BYTES = 64 * 2**20


class _TooLargeError(Exception):
    pass


class BodyLimitMiddleware:
    """413 for bodies over the limit: by Content-Length up front, else counted as they stream."""

    def __init__(self, app: ASGIApp, max_body_bytes: int) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_body_bytes):
            await self._refuse(scope, receive, send)
            return
        received = 0
        started = False

        async def counting_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_body_bytes:
                    raise _TooLargeError
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counting_receive, tracking_send)
        except _TooLargeError:
            if not started:
                await self._refuse(scope, receive, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        # Read (and drop) what the client is still sending, so that it can read the 413
        # rather than a reset connection; past a bound, answer at once and close.
        drained, more = 0, True
        while more and drained <= _DRAIN_BYTES:
            message = await receive()
            if message["type"] != "http.request":
                break
            drained += len(message.get("body", b""))
            more = message.get("more_body", False)
        response = problem(
            413,
            f"the request body is over the limit of {self.max_body_bytes} bytes "
            "(POSENC_MAX_BODY_BYTES)",
            headers={"Connection": "close"} if more else None,
        )
        await response(scope, receive, send)


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

"""One JSON line per request, and a request id that follows it from client to log and back.

A client's ``X-Request-ID`` (printable ASCII, at most 128 characters) is kept; otherwise one is
made. Either way it is echoed in the response and written in the access log line with the
method, path, status, duration, bytes sent and whether the answer was replayed from cache.
"""

from __future__ import annotations

import json
import logging
import sys
import time
import uuid

from starlette.types import ASGIApp, Message, Receive, Scope, Send

access_log = logging.getLogger("posenc.access")


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
            **getattr(record, "fields", {}),
        }
        if record.exc_info:  # logged for operators, never sent to a client
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, separators=(",", ":"))


class _StdoutHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever ``sys.stdout`` is now, not what it was when logging was set up."""

    @property
    def stream(self) -> object:
        return sys.stdout

    @stream.setter
    def stream(self, _: object) -> None:
        pass


def configure_logging(level: str) -> None:
    """JSON lines on stdout for every ``posenc`` logger, at ``POSENC_LOG_LEVEL``."""
    logger = logging.getLogger("posenc")
    logger.setLevel(level.upper())
    _in_json_lines(logger)


def log_warnings_as_json() -> None:
    """A Python warning (NumPy's overflow in a cast, a library's deprecation) becomes a JSON
    line of the log, not free text on stderr between them. For a serving process: pytest
    turns warnings into errors, and this must not reroute them under a test."""
    logging.captureWarnings(True)
    _in_json_lines(logging.getLogger("py.warnings"))


def _in_json_lines(logger: logging.Logger) -> None:
    if not any(getattr(h, "posenc", False) for h in logger.handlers):
        handler = _StdoutHandler()
        handler.setFormatter(JsonFormatter())
        handler.posenc = True  # type: ignore[attr-defined]
        logger.addHandler(handler)
        logger.propagate = False


def _request_id(given: bytes | None) -> str:
    if given and len(given) <= 128 and all(0x21 <= c <= 0x7E for c in given):
        return given.decode()
    return uuid.uuid4().hex


class AccessLogMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        request_id = _request_id(dict(scope["headers"]).get(b"x-request-id"))
        status, sent = 500, 0

        async def tagged(message: Message) -> None:
            nonlocal status, sent
            if message["type"] == "http.response.start":
                status = message["status"]
                message["headers"] = [
                    *message.get("headers", ()),
                    (b"x-request-id", request_id.encode()),
                ]
            elif message["type"] == "http.response.body":
                sent += len(message.get("body", b""))
            await send(message)

        try:
            await self.app(scope, receive, tagged)
        finally:
            access_log.info(
                "request",
                extra={
                    "fields": {
                        "request_id": request_id,
                        "method": scope["method"],
                        "path": scope["path"],
                        "status": status,
                        "duration_ms": round((time.perf_counter() - start) * 1e3, 3),
                        "bytes": sent,
                        "cache_hit": "posenc.route" in scope,
                    }
                },
            )

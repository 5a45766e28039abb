"""Replay answers to repeated GETs without routing, validation or serialization.

Every computational GET is a pure function of its path, its query string and the two headers
it negotiates on (Accept, Accept-Encoding), and says so with an immutable Cache-Control. So the
first answer to a request is kept, under exactly those, in the app's byte-bounded cache, and
the next identical request is answered from it at the cost of a dictionary lookup — as fast as
serving pre-built bytes. If-None-Match is honoured here too. Anything else passes through.
"""

from __future__ import annotations

from dataclasses import dataclass

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.responses import tag_in
from posenc.cache import ByteBoundedCache

# The GET operations whose answers are immutable: /v1/{scheme}/{endpoint} and their aliases.
CACHEABLE_ENDPOINTS = frozenset({"table", "encode", "similarity", "verify"})


def cacheable(path: str) -> bool:
    return path.startswith("/v1/") and path.rsplit("/", 1)[-1] in CACHEABLE_ENDPOINTS


_REPLAYED_HEADERS = (b"accept", b"accept-encoding")
# What an entry's objects take beyond the bytes of its key, headers and body: the key tuple,
# the cache's index node, the Recorded, the headers' tuples and, for npy and bin answers, the
# memoryviews and array view behind the values. Measured with tracemalloc on Python 3.11:
# 1.6 KiB for a JSON answer, 2.0 KiB for a bin one; half as much again for other versions.
ENTRY_BYTES = 3072
# Each part past the two of a head and its values: a memoryview (184 bytes on 3.11) and its
# slot. A table sent as it was computed (app/streaming.py) comes in one part per batch of rows.
PART_BYTES = 192


@dataclass(frozen=True)
class Recorded:
    headers: tuple[tuple[bytes, bytes], ...]
    # As the app sent it: an npy header, then a read-only view of the cached array. The view
    # keeps the array alive after the array's own entry is evicted, which is why ``nbytes``
    # counts it (what a replay pins stays within the cache's capacity); it is read-only down
    # to its owner, so any number of connections may send it at once.
    body: tuple[bytes | memoryview, ...]
    etag: bytes
    key_bytes: int = 0  # the path, query and negotiated headers it is kept under

    @property
    def nbytes(self) -> int:
        # All the entry holds, its key and objects included: a tiny answer to a long query
        # would otherwise count a few hundred bytes for ten thousand (a cache of them held
        # 25 times its capacity; tests/api/test_replay_footprint.py).
        body = sum(map(len, self.body)) + sum(len(k) + len(v) for k, v in self.headers)
        parts = max(0, len(self.body) - 2) * PART_BYTES
        return body + self.key_bytes + ENTRY_BYTES + parts


class ReplayMiddleware:
    def __init__(self, app: ASGIApp, cache: ByteBoundedCache) -> None:
        self.app = app
        self.cache = cache

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "GET" or not cacheable(scope["path"]):
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        key = (
            "replay",
            scope["path"],
            scope["query_string"],
            *(headers.get(name, b"") for name in _REPLAYED_HEADERS),
        )
        found = self.cache.get(key)
        if isinstance(found, Recorded):
            scope["posenc.route"] = scope["path"]  # for the metrics: no router ran
            await self._replay(found, headers.get(b"if-none-match"), send)
            return
        await self.app(scope, receive, self._recording(key, send))

    async def _replay(self, recorded: Recorded, if_none_match: bytes | None, send: Send) -> None:
        header = if_none_match.decode("latin-1") if if_none_match is not None else None
        if tag_in(header, recorded.etag.decode("latin-1")) is not None:
            kept = tuple(
                h
                for h in recorded.headers
                if h[0] not in (b"content-length", b"content-type", b"content-encoding")
            )
            await send({"type": "http.response.start", "status": 304, "headers": list(kept)})
            await send({"type": "http.response.body", "body": b""})
            return
        await send(
            {"type": "http.response.start", "status": 200, "headers": list(recorded.headers)}
        )
        for index, part in enumerate(recorded.body, start=1):
            more = index < len(recorded.body)
            await send({"type": "http.response.body", "body": part, "more_body": more})

    def _recording(self, key: tuple[object, ...], send: Send) -> Send:
        start: Message = {}
        parts: list[bytes | memoryview] = []

        async def record(message: Message) -> None:
            nonlocal start
            if message["type"] == "http.response.start":
                # A snapshot: middleware further out (CORS) rewrites the message's headers
                # for this one request, and those must not be replayed to others.
                start = {**message, "headers": list(message.get("headers", ()))}
            elif message["type"] == "http.response.body":
                parts.append(message.get("body", b""))
                if not message.get("more_body", False):
                    # Kept in the parts they came in, never joined: a join would copy the
                    # values of an npy answer after its header, stalling the loop.
                    if sum(map(len, parts)) <= self.cache.capacity:
                        self._keep(key, start, tuple(parts))
            await send(message)

        return record

    def _keep(
        self, key: tuple[object, ...], start: Message, body: tuple[bytes | memoryview, ...]
    ) -> None:
        headers = tuple((bytes(k), bytes(v)) for k, v in start.get("headers", ()))
        names = dict(headers)
        immutable = b"immutable" in names.get(b"cache-control", b"")
        if start.get("status") == 200 and immutable and b"etag" in names:
            key_bytes = sum(len(part) for part in key if isinstance(part, str | bytes))
            self.cache.put(key, Recorded(headers, body, names[b"etag"], key_bytes))

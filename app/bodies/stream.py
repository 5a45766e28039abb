"""A body's bytes as they arrive, counted against what was reserved for them.

Reading is where a body without Content-Length is first measured, so the 413 for one that
outgrows its reservation is raised here, before the bytes past the limit are kept.
"""

from __future__ import annotations

from fastapi import HTTPException, Request


async def receive(request: Request, limit: int) -> bytearray:
    """The body in one buffer, sized by Content-Length when it is given (no join, no regrowth).

    ``app.middleware.BodyLimitMiddleware`` enforces POSENC_MAX_BODY_BYTES as the body streams;
    a body without Content-Length is refused here too past ``limit``, what it reserved.
    """
    declared = request.headers.get("content-length", "")
    buffer = bytearray(int(declared)) if declared.isdigit() else bytearray()
    filled = 0
    async for chunk in request.stream():
        if filled + len(chunk) <= len(buffer):
            buffer[filled : filled + len(chunk)] = chunk
        else:
            if filled + len(chunk) > limit:
                raise HTTPException(
                    413,
                    f"a body sent without Content-Length may hold at most {limit} bytes here "
                    "(a quarter of POSENC_MEMORY_BYTES); send its Content-Length for up to "
                    "POSENC_MAX_BODY_BYTES",
                )
            del buffer[filled:]
            buffer += chunk
        filled += len(chunk)
    del buffer[filled:]
    return buffer


async def receive_bounded(request: Request, limit: int) -> bytes:
    """A small body, refused with 413 past ``limit`` bytes (by Content-Length, or as it comes)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise HTTPException(413, f"this body may hold at most {limit} bytes")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise HTTPException(413, f"this body may hold at most {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)

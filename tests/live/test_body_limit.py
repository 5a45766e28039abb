"""The body limit over real sockets: a 413 that arrives before the body is sent, then a close."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest

from tests.live.conftest import LiveServer, start_server, stop_server

pytestmark = pytest.mark.live

LIMIT = 1_000_000


@pytest.fixture(scope="module")
def small_limit() -> Iterator[LiveServer]:
    server = start_server({"POSENC_MAX_BODY_BYTES": str(LIMIT)})
    yield server
    stop_server(server)


def _connect(server: LiveServer) -> socket.socket:
    sock = socket.create_connection((server.host, server.port), timeout=10)
    return sock


def _read_response(sock: socket.socket) -> tuple[bytes, bytes]:
    """The head and the Content-Length body of one response."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"closed before a full head: {data!r}"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1])
        for line in head.lower().split(b"\r\n")
        if line.startswith(b"content-length:")
    )
    while len(body) < length:
        chunk = sock.recv(65536)
        assert chunk, "closed before the whole body"
        body += chunk
    return head, body


def _closed_within(sock: socket.socket, seconds: float) -> bool:
    sock.settimeout(seconds)
    try:
        while sock.recv(65536):
            pass
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True
    return True


def test_an_announced_oversized_body_is_refused_before_a_byte_of_it_is_sent(
    small_limit: LiveServer,
) -> None:
    with _connect(small_limit) as sock:
        sock.sendall(
            b"POST /v1/encode HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 80000000\r\n\r\n"
        )
        started = time.monotonic()
        head, body = _read_response(sock)
        answered = time.monotonic() - started
        assert head.startswith(b"HTTP/1.1 413"), head
        assert b"connection: close" in head.lower()
        assert b"application/problem+json" in head.lower()
        assert b"POSENC_MAX_BODY_BYTES" in body
        assert answered < 0.5
        assert _closed_within(sock, 5)


def test_an_expect_continue_client_gets_the_413_instead_of_a_100(small_limit: LiveServer) -> None:
    with _connect(small_limit) as sock:
        sock.sendall(
            b"POST /v1/verify?d_model=4 HTTP/1.1\r\nHost: x\r\n"
            b"Content-Type: application/x-npy\r\nExpect: 100-continue\r\n"
            b"Content-Length: 2000000\r\n\r\n"
        )
        head, _ = _read_response(sock)
        assert head.startswith(b"HTTP/1.1 413"), head
        assert _closed_within(sock, 5)


def test_a_chunked_body_is_refused_as_soon_as_it_passes_the_limit(
    small_limit: LiveServer,
) -> None:
    chunk = b'{"d_model": 2, "positions": [' + b"0," * 32_000
    with _connect(small_limit) as sock:
        sock.sendall(
            b"POST /v1/encode HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )
        sent = 0
        while sent <= LIMIT:
            sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            sent += len(chunk)
        # No final chunk: the body never ends, so only a refusal while it streams can answer.
        head, _ = _read_response(sock)
        assert head.startswith(b"HTTP/1.1 413"), head
        assert b"connection: close" in head.lower()
        assert _closed_within(sock, 5)


def test_a_client_that_sends_everything_first_still_reads_its_413(small_limit: LiveServer) -> None:
    payload = b"x" * (2 * LIMIT)
    with _connect(small_limit) as sock:
        sock.sendall(
            b"POST /v1/encode HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(payload), payload)
        )
        head, _ = _read_response(sock)
        assert head.startswith(b"HTTP/1.1 413"), head


def test_a_body_within_the_limit_is_served_on_a_kept_alive_connection(
    small_limit: LiveServer,
) -> None:
    body = b'{"d_model": 2, "positions": [0, 1]}'
    request = (
        b"POST /v1/encode HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
    )
    with _connect(small_limit) as sock:
        for _ in range(2):
            sock.sendall(request)
            head, answer = _read_response(sock)
            assert head.startswith(b"HTTP/1.1 200"), head + answer

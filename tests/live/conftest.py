from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO

import httpx
import pytest


@dataclass
class LiveServer:
    url: str
    host: str
    port: int
    process: subprocess.Popen[bytes]
    log: IO[bytes]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(env: dict[str, str] | None = None) -> LiveServer:
    """uvicorn as `make run` starts it, on a free loopback port; its output goes to a file
    (a pipe nobody reads would fill with access-log lines and stall the server)."""
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "uvicorn",
        "--factory",
        "app.main:create_app",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--no-server-header",
        "--no-access-log",
    ]
    log = tempfile.TemporaryFile()
    process = subprocess.Popen(
        command, env={**os.environ, **(env or {})}, stdout=log, stderr=subprocess.STDOUT
    )
    server = LiveServer(f"http://127.0.0.1:{port}", "127.0.0.1", port, process, log)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"uvicorn exited with {process.returncode}:\n{_output(server)}")
        try:
            if httpx.get(server.url + "/healthz", timeout=1).status_code == 200:
                return server
        except httpx.TransportError:
            time.sleep(0.1)
    process.kill()
    raise RuntimeError("uvicorn did not answer /healthz within 30 s")


def _output(server: LiveServer) -> str:
    server.log.seek(0)
    return server.log.read().decode()


def stop_server(server: LiveServer) -> str:
    """SIGTERM, as an orchestrator sends it; returns what the server logged."""
    server.process.send_signal(signal.SIGTERM)
    try:
        server.process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        server.process.kill()
        server.process.wait()
        raise
    output = _output(server)
    server.log.close()
    return output


@pytest.fixture(scope="module")
def live() -> Iterator[LiveServer]:
    server = start_server({"POSENC_CACHE_BYTES": str(8 * 2**20)})
    yield server
    stop_server(server)

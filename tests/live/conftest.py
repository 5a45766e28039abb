from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest


@dataclass
class LiveServer:
    url: str
    host: str
    port: int
    process: subprocess.Popen[bytes]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(env: dict[str, str] | None = None) -> LiveServer:
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
    ]
    process = subprocess.Popen(
        command,
        env={**os.environ, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            output = process.stdout.read().decode() if process.stdout else ""
            raise RuntimeError(f"uvicorn exited with {process.returncode}:\n{output}")
        try:
            if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                return LiveServer(url, "127.0.0.1", port, process)
        except httpx.TransportError:
            time.sleep(0.1)
    process.kill()
    raise RuntimeError("uvicorn did not answer /healthz within 30 s")


def stop_server(server: LiveServer) -> str:
    """SIGTERM, as an orchestrator sends it; returns what the server logged."""
    server.process.send_signal(signal.SIGTERM)
    try:
        output, _ = server.process.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        server.process.kill()
        server.process.communicate()
        raise
    return output.decode()


@pytest.fixture(scope="module")
def live() -> Iterator[LiveServer]:
    server = start_server({"POSENC_CACHE_BYTES": str(8 * 2**20)})
    yield server
    stop_server(server)

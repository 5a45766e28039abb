from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
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
    uvicorn_pid: int | None = None  # when ``process`` is not uvicorn itself but `make run`

    @property
    def pid(self) -> int:
        """The serving process."""
        return self.uvicorn_pid or self.process.pid


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


ROOT = Path(__file__).resolve().parents[2]


def allocator_settings() -> dict[str, str]:
    """glibc's allocator settings of `make run` (the Makefile's ``MALLOC_SETTINGS``): the one
    place the tests take them from, so their servers allocate as `make run`'s does."""
    found = re.search(r"^MALLOC_SETTINGS := (.+)$", (ROOT / "Makefile").read_text(), re.M)
    if found is None:
        raise LookupError("the Makefile sets no MALLOC_SETTINGS")
    return dict(setting.split("=", 1) for setting in found.group(1).split())


def start_server(
    env: dict[str, str] | None = None, launcher: tuple[str, ...] = ("-m", "uvicorn")
) -> LiveServer:
    """uvicorn as `make run` starts it (its allocator settings included), on a free loopback
    port; its output goes to a file (a pipe nobody reads would fill with access-log lines and
    stall the server). ``launcher``: what the interpreter runs, given uvicorn's arguments."""
    port = free_port()
    command = [
        sys.executable,
        *launcher,
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
        command,
        env={**os.environ, **allocator_settings(), **(env or {})},
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
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
    if server.uvicorn_pid is not None and server.process.poll() is None:
        os.kill(server.uvicorn_pid, signal.SIGTERM)  # make would only pass it on
    else:
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

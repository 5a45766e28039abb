"""A live uvicorn that cannot take the machine with it, and its memory figures from /proc.

The tests here send queries that an unbounded replica answers by allocating gigabytes; the
machine that runs them is shared. The server therefore runs under an address-space limit
(RLIMIT_AS): a service that tries to allocate far beyond it gets a MemoryError at once instead
of swapping the host. The limit is a safety net only: what the tests assert is measured
(VmHWM), and a 500 from the net is a wrong answer like any other.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from tests.live.conftest import LiveServer, free_port

ADDRESS_SPACE = 3 * 2**30
# The allocator settings of the image (Dockerfile), so the process behaves as it does there.
CONTAINER_MALLOC = {"MALLOC_ARENA_MAX": "2", "MALLOC_MMAP_THRESHOLD_": "131072"}
ROOT = Path(__file__).resolve().parents[2]


def start_bounded_server(env: dict[str, str]) -> LiveServer:
    """uvicorn as `make run` starts it, with ``env`` added and at most ``ADDRESS_SPACE`` bytes
    of virtual memory; the worktree's code is what it imports."""
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

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))

    log = tempfile.TemporaryFile()
    process = subprocess.Popen(
        command,
        env={**os.environ, **CONTAINER_MALLOC, "POSENC_LOG_LEVEL": "warning", **env},
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
        preexec_fn=cap,  # setrlimit only: safe between fork and exec
    )
    server = LiveServer(f"http://127.0.0.1:{port}", "127.0.0.1", port, process, log)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            log.seek(0)
            raise RuntimeError(f"uvicorn exited with {process.returncode}:\n{log.read()!r}")
        try:
            if httpx.get(server.url + "/healthz", timeout=1).status_code == 200:
                return server
        except httpx.TransportError:
            time.sleep(0.1)
    process.kill()
    raise RuntimeError("uvicorn did not answer /healthz within 30 s")


def memory(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM (the peak resident set since the process started), in bytes."""
    figures = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            figures[name] = int(value.split()[0]) * 1024
    return figures


def reset_peak(pid: int) -> bool:
    """Start VmHWM again from the current RSS (Linux ≥ 4.0: write 5 to clear_refs); False
    where that is not allowed, and the peak then counts from the process's start."""
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
    except OSError:
        return False
    return True

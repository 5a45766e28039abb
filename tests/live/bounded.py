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

from tests.live.conftest import ROOT, LiveServer, allocator_settings, free_port

ADDRESS_SPACE = 3 * 2**30
# What the memory promise (idle + POSENC_MEMORY_BYTES + POSENC_CACHE_BYTES + slack) allows
# beyond what the budget and the cache count: the interpreter's and allocator's overheads that
# grow with load (thread stacks, connection buffers, free-list fragmentation, the largest
# request body while it is read). 64 MiB is a sixth of the crowd's budget; with the Makefile's
# allocator settings the crowd's peak stays far under it (tests/live/test_budget.py), as does
# the soak's (bench/soak.py).
SLACK_BYTES = 64 * 2**20


def start_bounded_server(env: dict[str, str], *, via_make: bool = False) -> LiveServer:
    """uvicorn as `make run` starts it, with ``env`` added and at most ``ADDRESS_SPACE`` bytes
    of virtual memory; the worktree's code is what it imports.

    ``via_make``: started by `make run` itself, its exact command and environment (with this
    interpreter's bin directory as ``BIN``); ``process`` is then make, and ``pid`` the uvicorn
    it started. Otherwise the same command, with the Makefile's allocator settings."""
    port = free_port()
    uvicorn = [
        "--factory",
        "app.main:create_app",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--no-server-header",
        "--no-access-log",
    ]
    if via_make:
        # -o install: the install step taken as done, so a test never reinstalls.
        command = ["make", "--no-print-directory", "-o", "install", "run"]
        command.append(f"BIN={Path(sys.executable).parent}")
        # The Makefile's own defaults for these are ?=, so the environment sets them.
        env = {**env, "POSENC_HOST": "127.0.0.1", "POSENC_PORT": str(port)}
        base = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    else:
        command = [sys.executable, "-m", "uvicorn", *uvicorn]
        base = {**os.environ, **allocator_settings()}

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))

    log = tempfile.TemporaryFile()
    process = subprocess.Popen(
        command,
        env={**base, "POSENC_LOG_LEVEL": "warning", **env},
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
            raise RuntimeError(f"{command[0]} exited with {process.returncode}:\n{log.read()!r}")
        try:
            if httpx.get(server.url + "/healthz", timeout=1).status_code == 200:
                if via_make:
                    server.uvicorn_pid = _serving(process.pid)
                return server
        except httpx.TransportError:
            time.sleep(0.1)
    process.kill()
    raise RuntimeError("uvicorn did not answer /healthz within 30 s")


def _serving(pid: int) -> int:
    """The uvicorn process among ``pid``'s descendants (make may run it through a shell)."""
    for _ in range(4):
        if "app.main:create_app" in Path(f"/proc/{pid}/cmdline").read_text().replace("\0", " "):
            if "uvicorn" in Path(f"/proc/{pid}/comm").read_text():
                return pid
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        if len(children) != 1:
            break
        pid = int(children[0])
    raise LookupError(f"no uvicorn process under {pid}")


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

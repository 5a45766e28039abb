"""A server killed by a fatal signal leaves every thread's Python stack in its log."""

from __future__ import annotations

import re
import signal
import subprocess
from typing import IO

import httpx
import pytest

from tests.live.conftest import start_server

pytestmark = pytest.mark.live


def _log(process: subprocess.Popen[bytes], log: IO[bytes]) -> str:
    process.wait(timeout=20)
    log.seek(0)
    return log.read().decode(errors="replace")


@pytest.mark.parametrize("sig", [signal.SIGSEGV, signal.SIGABRT], ids=["SIGSEGV", "SIGABRT"])
def test_a_fatal_signal_leaves_every_threads_python_stack_in_the_log(
    sig: signal.Signals, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The command of `make run` with nothing in its environment that enables faulthandler:
    # the server must do it itself.
    monkeypatch.delenv("PYTHONFAULTHANDLER", raising=False)
    server = start_server({"POSENC_LOG_LEVEL": "warning"})
    try:
        # A computation runs in a worker thread, which then waits for the next: the process
        # has at least two threads when the signal comes.
        answer = httpx.get(f"{server.url}/v1/sinusoidal/table?d_model=4&seq_len=3", timeout=30)
        assert answer.status_code == 200
        server.process.send_signal(sig)
        log = _log(server.process, server.log)
    finally:
        if server.process.poll() is None:
            server.process.kill()
            server.process.wait()
        server.log.close()
    assert server.process.returncode == -sig, log[-3000:]
    assert "Fatal Python error" in log, log[-3000:]
    # all_threads: "Thread 0x…" per thread, the signalled one as "Current thread 0x…"
    # (a single stack would be "Stack (most recent call first)").
    threads = re.findall(
        r"^(?:Current thread|Thread) 0x[0-9a-f]+ \(most recent call first\):", log, re.M
    )
    assert len(threads) >= 2, log[-3000:]
    assert "uvicorn" in log  # the event loop's stack
    assert "worker_thread" in log or "anyio" in log, log[-3000:]  # the idle worker's

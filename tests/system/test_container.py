"""The real image: built from the Dockerfile, run by a real dockerd on the host network."""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.live.conftest import free_port
from tests.system.dockerd import ROOT, docker

pytestmark = [pytest.mark.live, pytest.mark.system]
ENDPOINTS = [
    "/healthz",
    "/readyz",
    "/metrics",
    "/openapi.json",
    "/",
    "/v1/schemes",
    "/v1/table?d_model=8&seq_len=4",
    "/v1/table?d_model=8&seq_len=4&format=bin",
    "/v1/encode?d_model=8&positions=0,5",
    "/v1/similarity?d_model=8&seq_len=4",
    "/v1/verify?d_model=8",
    "/v1/table?scheme=rope&d_model=8&seq_len=4",
]


@dataclass
class Container:
    name: str
    url: str


@pytest.fixture
def container(image: str) -> Iterator[Container]:
    name, port = f"posenc-test-{uuid.uuid4().hex[:8]}", free_port()
    docker(
        "run",
        "-d",
        "--name",
        name,
        "--network",
        "host",
        "-e",
        f"POSENC_PORT={port}",
        "-e",
        "POSENC_HOST=127.0.0.1",
        # Four of the largest float64 tables need more than the default 1 GiB budget at once;
        # the last waits for memory, and on a slow machine past the 2 s default. These tests
        # are about the image and shutdown, not shedding (tests/system/test_small_box.py).
        "-e",
        "POSENC_ADMISSION_WAIT_S=30",
        image,
    )
    url = f"http://127.0.0.1:{port}"
    for _ in range(150):
        try:
            if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                break
        except httpx.TransportError:
            time.sleep(0.1)
    yield Container(name, url)
    docker("rm", "-f", name, check=False)


def test_the_dockerfile_passes_hadolint() -> None:
    hadolint = shutil.which("hadolint") or str(Path(sys.executable).with_name("hadolint"))
    result = subprocess.run([hadolint, str(ROOT / "Dockerfile")], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout


def test_every_endpoint_answers_from_the_container(container: Container) -> None:
    with httpx.Client(base_url=container.url, timeout=30) as client:
        for path in ENDPOINTS:
            assert client.get(path).status_code == 200, path


def test_the_container_runs_as_a_non_root_user_without_compilers(container: Container) -> None:
    assert docker("exec", container.name, "id", "-u") == "10001"
    assert docker("exec", container.name, "sh", "-c", "command -v gcc cc || true") == ""


def test_the_healthcheck_turns_healthy(container: Container) -> None:
    deadline = time.monotonic() + 40
    status = ""
    while time.monotonic() < deadline:
        status = docker("inspect", "--format", "{{.State.Health.Status}}", container.name)
        if status == "healthy":
            break
        time.sleep(1)
    assert status == "healthy"


def test_sigterm_finishes_the_requests_in_flight_and_stops_within_seconds(
    container: Container,
) -> None:
    # Four float64 tables of the largest size take seconds in all: some are still being
    # computed, or waiting for the pool, when the signal comes.
    answers: list[tuple[int, float]] = []

    def fetch(offset: int) -> None:
        url = (
            f"{container.url}/v1/table?d_model=4096&seq_len=4096&offset={offset}"
            "&dtype=float64&format=bin"
        )
        answers.append((httpx.get(url, timeout=30).status_code, time.monotonic()))

    workers = [threading.Thread(target=fetch, args=(k * 9999,)) for k in range(4)]
    for worker in workers:
        worker.start()
    time.sleep(0.3)
    signalled = time.monotonic()
    docker("kill", "--signal", "SIGTERM", container.name)
    docker("wait", container.name, timeout=30)
    stopped_after = time.monotonic() - signalled
    for worker in workers:
        worker.join(timeout=30)
    assert [status for status, _ in answers] == [200] * 4
    assert any(done > signalled for _, done in answers), "nothing was in flight"
    assert stopped_after < 8
    logs = subprocess.run(["docker", "logs", container.name], capture_output=True, text=True)
    assert "Finished server process" in logs.stdout + logs.stderr


def test_the_image_checks_a_cache_in_a_mounted_folder_as_the_readme_shows(
    image: str, tmp_path: Path
) -> None:
    """`docker run … posenc posenc check` for a repository with no Python: the entrypoint runs
    the given command with the compiled loops in place, and the exit code is the verdict."""
    config = tmp_path / "config.json"
    config.write_text(
        '{"model_type": "llama", "hidden_size": 512, "num_attention_heads": 8,'
        ' "max_position_embeddings": 256, "rope_theta": 10000.0}'
    )
    tmp_path.chmod(0o777)  # the image's user (10001) writes the cache here
    run = ["run", "--rm", "--network", "none", "-v", f"{tmp_path}:/w", "-w", "/w", image]
    docker(
        *run,
        "posenc",
        "table",
        "rope",
        "--config",
        "config.json",
        "--seq-len",
        "64",
        "-o",
        "cos_sin.npy",
    )
    verdict = subprocess.run(
        ["docker", *run, "posenc", "check", "cos_sin.npy", "--config", "config.json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert verdict.returncode == 0, verdict.stdout + verdict.stderr
    assert "conforms" in verdict.stdout
    # A cache of another base: exit 1 with the diagnosis.
    wrong = subprocess.run(
        [
            "docker",
            *run,
            "posenc",
            "check",
            "cos_sin.npy",
            "--config",
            "config.json",
            "--base",
            "500000",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert wrong.returncode == 1, wrong.stdout + wrong.stderr
    assert "base_mismatch" in wrong.stdout

"""The docker CLI for the system tests, and the image they run, built from this checkout."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# One tag per checkout: several checkouts may share one dockerd, and each tests its own code.
TAG = f"posenc:test-{hashlib.sha256(str(ROOT).encode()).hexdigest()[:8]}"


def docker(*args: str, check: bool = True, timeout: float = 600) -> str:
    result = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)
    if check and result.returncode != 0:
        raise RuntimeError(f"docker {' '.join(args)}: {result.stderr[-2000:]}")
    return result.stdout.strip()


def build_image() -> str:
    """The Dockerfile built on the test base of scripts/docker-test-env.sh; returns its tag."""
    base = subprocess.run(
        ["bash", str(ROOT / "scripts/docker-test-env.sh")],
        check=True,
        capture_output=True,
        text=True,
        timeout=900,
    ).stdout.strip()
    docker(
        "build",
        "--network",
        "host",
        "--build-arg",
        f"BASE_IMAGE={base}",
        "-t",
        TAG,
        str(ROOT),
        timeout=900,
    )
    return TAG

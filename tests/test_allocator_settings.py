"""`make run` and the image allocate alike: glibc's settings are the same in both.

The memory promise (idle + budget + cache + the allocator's slack) is measured with these
settings; without them glibc keeps freed NumPy buffers in per-thread heaps, and a crowd under
`make run` once peaked 77 MiB over the promise. The Makefile's ``MALLOC_SETTINGS`` is where the
live tests take them from (tests/live/conftest.py), so checking the image against it covers all
three.
"""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from tests.live.conftest import ROOT, allocator_settings


def _dockerfile_settings() -> dict[str, str]:
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    return dict(re.findall(r"\b(MALLOC_[A-Z_]+)=(\S+)", text))


def test_the_image_sets_the_allocator_as_make_run_does() -> None:
    settings = allocator_settings()
    assert {"MALLOC_ARENA_MAX", "MALLOC_MMAP_THRESHOLD_"} <= set(settings)
    assert _dockerfile_settings() == settings


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_run_hands_the_settings_to_uvicorn() -> None:
    # What make would run, install step taken as done: the settings reach the command itself.
    command = subprocess.run(
        ["make", "--no-print-directory", "-n", "-o", "install", "run"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    first = command.replace("\\\n", " ").split()
    given = dict(word.split("=", 1) for word in first[1 : first.index("--factory")] if "=" in word)
    assert first[0] == "env"
    assert given == allocator_settings()

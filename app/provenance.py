"""What an answer is made by, as one digest: the ETag of every computational GET carries it.

A tag is promised to name one sequence of bytes forever (``Cache-Control: immutable``), so it
must change whenever anything that makes those bytes does: posenc's and this layer's code, the
libraries that compute and write the numbers, and the machine's own arithmetic (glibc's
``cosf`` in llama.cpp's recipe, zlib in a PNG, whether libllama's multiply-adds fuse, which
differs by architecture). The version alone did not: 0.3.0 served changed text under unchanged
tags. Any edit of the code changes every tag, a refactor's included: a cache then asks once
more and gets the same bytes under a new tag, which costs a request, where a stale answer
cost a year.
"""

from __future__ import annotations

import hashlib
import platform
import sys
import zlib
from functools import lru_cache
from importlib import metadata
from pathlib import Path

import app
import posenc

# The libraries whose versions can move an answer's bytes: its numbers, their text, its files.
_LIBRARIES = ("numpy", "numba", "llvmlite", "orjson")


def _sources() -> list[tuple[str, Path]]:
    """Every module of the core and of this layer, by its name within its package."""
    found = []
    for package in (posenc, app):
        root = Path(package.__file__ or "").parent
        found += [(path.relative_to(root.parent).as_posix(), path) for path in root.rglob("*.py")]
    return sorted(found)


def system() -> list[str]:
    """The machine's own arithmetic and compression: what a rebuild of the same code on
    another machine can change."""
    return [
        f"machine {platform.machine()}",
        "libc {} {}".format(*platform.libc_ver()),
        f"zlib {zlib.ZLIB_RUNTIME_VERSION}",
    ]


def _platform() -> list[str]:
    return [
        f"python {sys.version_info.major}.{sys.version_info.minor}",
        *system(),
        *(f"{name} {metadata.version(name)}" for name in _LIBRARIES),
    ]


@lru_cache(maxsize=1)
def digest() -> str:
    """The version, the code and the platform that make this process's answers, hashed."""
    hasher = hashlib.sha256(f"posenc {posenc.__version__}\n".encode())
    for line in _platform():
        hasher.update(line.encode() + b"\n")
    for name, path in _sources():
        content = path.read_bytes()
        hasher.update(f"{name} {len(content)}\n".encode() + content)
    return hasher.hexdigest()

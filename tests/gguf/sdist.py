"""The llama-cpp-python 0.3.36 sdist (llama.cpp 0c1e57098): the one door through which the suite
reads any of its files.

It is downloaded once into ``~/.cache/posenc`` (or ``$POSENC_CACHE``), held to its digest. A
test asks for the member it reads with :func:`unpacked`, which unpacks that member alone into a
root of its own. So a path reached *around* the door (``unpacked("vendor/llama.cpp").parents[2] /
"CHANGELOG.md"``) exists on no machine, fresh or warm, and fails the first time it is written
rather than on a newcomer's first ``make test``. Concurrent workers take turns under a lock.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import tarfile
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

VERSION = "0.3.36"
NAME = f"llama_cpp_python-{VERSION}"
# The file PyPI's simple index lists for this release, and its digest there: fetched as it is,
# where `pip download` built the sdist's metadata first (scikit-build-core in an isolated
# environment, three minutes on a fresh machine, while every other worker waited on the lock).
URL = (
    "https://files.pythonhosted.org/packages/ec/e9/"
    f"e7de2b0463ea3ffbf0ede6cb21b58c1258a8f6521aae45ca773a59fe7cf3/{NAME}.tar.gz"
)
SHA256 = "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"


def cache() -> Path:
    return Path(os.environ.get("POSENC_CACHE", Path.home() / ".cache" / "posenc"))


@contextmanager
def _locked() -> Iterator[None]:
    cache().mkdir(parents=True, exist_ok=True)
    with open(cache() / f"{NAME}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def archive() -> Path:
    """The sdist itself, downloaded on first use and held to its digest (the llama.cpp build
    installs from it)."""
    path = cache() / f"{NAME}.tar.gz"
    with _locked():
        if not path.exists():
            partial = path.with_suffix(".part")
            with urllib.request.urlopen(URL, timeout=120) as response, open(partial, "wb") as out:
                shutil.copyfileobj(response, out)
            digest = hashlib.sha256(partial.read_bytes()).hexdigest()
            if digest != SHA256:
                partial.unlink()
                raise RuntimeError(f"{URL} has sha256 {digest}, not the release's {SHA256}")
            partial.rename(path)
    return path


def unpacked(member: str) -> Path:
    """The file or directory ``member`` of the sdist (a path below its top folder, such as
    ``vendor/llama.cpp`` or ``CHANGELOG.md``), unpacked on first use into a root of its own."""
    key = hashlib.sha256(member.encode()).hexdigest()[:12]
    root = cache() / f"{NAME}.members" / key
    path = root / NAME / member
    done = root / ".done"
    if done.exists():
        return path
    tarball = archive()
    with _locked():
        if done.exists():
            return path
        shutil.rmtree(root, ignore_errors=True)  # what an interrupted run left
        prefix = f"{NAME}/{member}"
        with tarfile.open(tarball) as tar:
            members = [m for m in tar if m.name == prefix or m.name.startswith(prefix + "/")]
            if not members:
                raise FileNotFoundError(f"the {NAME} sdist has no {member}")
            tar.extractall(root, members=members, filter="data")
        done.touch()
    return path

"""How much the command line may ask of this machine, and of a service it describes.

A table is computed whole, as the service computes it, so its declared cost (the scheme's
``cost``: peak bytes, before anything is allocated) is held to a budget first: half of this
machine's memory, or of its container's limit, as the service holds requests to half of its
container's (``app/settings.py``). A table of 2^31 rows is refused in microseconds with its
cost named, instead of swapping the machine.
"""

from __future__ import annotations

import os
from pathlib import Path

from posenc.declare import Limits
from posenc.errors import LimitError

# What a service started with the default settings answers at most in one request (values,
# work units, bytes; app/settings.py): the limits under which `posenc model` states the URLs
# and row counts that such a service would serve. tests/cli holds them to the settings.
SERVICE_DEFAULTS = Limits(max_values=2**24, max_work=2 * 10**9, max_bytes=2**30)

_CGROUP = Path("/sys/fs/cgroup")


def memory_budget(cgroup: Path = _CGROUP) -> int:
    """Half of the machine's memory, or of its cgroup's limit where that is lower."""
    physical = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    limit = _cgroup_limit(cgroup)
    return min(physical, limit if limit is not None else physical) // 2


def _cgroup_limit(cgroup: Path) -> int | None:
    for name in ("memory.max", "memory/memory.limit_in_bytes"):
        try:
            text = (cgroup / name).read_text().strip()
        except (OSError, ValueError):
            continue
        # cgroup v1 says "no limit" with a huge page-rounded number near 2^63.
        return None if text == "max" or int(text) >= 2**60 else int(text)
    return None


def admit(nbytes: int, what: str, param: str, budget: int | None = None) -> None:
    """Refuse work that would hold more than the budget at once, naming both."""
    allowed = memory_budget() if budget is None else budget
    if nbytes > allowed:
        raise LimitError(
            param,
            f"{what} would need {size(nbytes)} of memory at once, over this machine's budget "
            f"of {size(allowed)} (half its memory)",
        )


def size(nbytes: float) -> str:
    """
    >>> size(3 * 2**30), size(1536), size(10)
    ('3.0 GiB', '1.5 KiB', '10 bytes')
    """
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.1f} {unit}"
    return f"{int(nbytes)} bytes"

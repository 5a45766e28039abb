"""What this process may use: CPUs (affinity and cgroup quota) and memory (cgroup limit).

A container sees the host's cores in ``os.cpu_count()`` and the host's memory in ``/proc``; its
real share is in its cgroup. Read once, when the settings are made.
"""

from __future__ import annotations

import contextlib
import math
import os
from pathlib import Path

_CGROUP = Path("/sys/fs/cgroup")


def usable_cpus(cgroup: Path = _CGROUP) -> int:
    """CPUs this process may run on: its affinity set, capped by a cgroup CPU quota.

    cgroup v2 writes ``quota period`` (or ``max``) in ``cpu.max``; v1 uses two files and ``-1``.
    """
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    quota = _cpu_quota(cgroup)
    limit = math.ceil(quota) if quota is not None else None
    return max(1, min(cpus or 1, limit or cpus or 1))


def _cpu_quota(cgroup: Path) -> float | None:
    v2 = _read(cgroup / "cpu.max")
    if v2 is not None:
        quota, _, period = v2.partition(" ")
        return None if quota == "max" else int(quota) / int(period or 100000)
    quota_v1, period_v1 = (
        _read(cgroup / "cpu/cpu.cfs_quota_us"),
        _read(cgroup / "cpu/cpu.cfs_period_us"),
    )
    if quota_v1 is None or period_v1 is None or int(quota_v1) <= 0:
        return None
    return int(quota_v1) / int(period_v1)


def memory_limit(cgroup: Path = _CGROUP) -> int | None:
    """The cgroup's memory limit in bytes, or None when there is none."""
    text = _read(cgroup / "memory.max") or _read(cgroup / "memory/memory.limit_in_bytes")
    if text is None or text == "max":
        return None
    limit = int(text)
    # cgroup v1 reports "no limit" as a huge page-rounded number near 2^63.
    return limit if limit < 2**60 else None


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except (OSError, ValueError):
        return None


def confine_to_quota(cgroup: Path = _CGROUP) -> int | None:
    """Run every thread of this process on as many cores as its CPU quota buys.

    With a quota of one CPU, two threads running at once on two cores spend the quota in half
    a period, and then the cgroup is frozen — the event loop with it — until the next one:
    /healthz waits tens of milliseconds behind any computation. Confined to one core, the
    kernel shares that core between the loop and the workers instead, and the quota is never
    overrun. Returns the number of cores kept, or None when nothing needed confining.
    """
    quota = _cpu_quota(cgroup)
    if quota is None or not hasattr(os, "sched_setaffinity"):
        return None
    allowed = sorted(os.sched_getaffinity(0))
    keep = max(1, math.ceil(quota))
    if keep >= len(allowed):
        return None
    cores = set(allowed[:keep])
    for task in Path("/proc/self/task").iterdir():
        with contextlib.suppress(OSError):  # a thread may end meanwhile
            os.sched_setaffinity(int(task.name), cores)
    return keep

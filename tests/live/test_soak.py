"""A short soak (`make soak` runs the long one): mixed load, no 5xx, nothing kept, memory bounded.

The verdict is bench/soak.py's. Between rounds of load, with nothing in flight, the server (under
tracemalloc, bench/traced.py) says how many bytes Python and NumPy hold; what it holds beside its
cache must not grow from one half of the run to the other. Its resident set is held to the memory
promise: idle + budget + cache + the allocator's slack. The resident set's own growth is reported
but not judged: glibc's heaps keep growing for a while after the live bytes are flat, so a 20 s
window of it measures the allocator settling, not the service.
"""

from __future__ import annotations

import pytest

from bench import soak

pytestmark = [pytest.mark.live, pytest.mark.serial]


def test_a_short_mixed_load_gets_no_server_error_keeps_nothing_and_stays_bounded() -> None:
    report = soak.soak(seconds=20)
    print(report.summary())
    assert sum(report.statuses.values()) > 200
    assert {200, 413, 422} <= set(report.statuses)
    assert report.kept_growth is not None, "the server's live bytes were not measured"
    assert report.passed, report.summary()

"""The soak's verdict (bench/soak.py) can fail: on kept bytes that grow, and on a peak over the
promise, and on neither of the allocator's ways of growing while the live bytes are flat."""

from __future__ import annotations

from bench import soak
from tests.live.bounded import SLACK_BYTES

MiB = 2**20


def _report(kept: list[float], rss: list[float], peak: float | None = None) -> soak.SoakReport:
    report = soak.SoakReport(seconds=len(kept))
    report.statuses[200] = 1000
    report.idle = soak.Sample(0, 0, 180 * MiB, 180 * MiB, 0, 0, 0, 60 * MiB, 20 * MiB)
    for t, (mib, resident) in enumerate(zip(kept, rss, strict=True), start=1):
        cache = 16 * MiB
        report.samples.append(
            soak.Sample(
                t=t,
                requests=50 * t,
                rss=int(resident * MiB),
                peak=int((peak or resident) * MiB),
                cache=cache,
                cache_entries=500,
                series=8,
                traced=int(mib * MiB) + cache,
                tracemalloc=20 * MiB,
            )
        )
    return report


def test_flat_live_bytes_pass_while_the_resident_set_still_grows() -> None:
    kept = [58.0, 57.6, 57.2, 57.5, 57.9, 57.1, 57.4, 58.0, 57.3, 57.6, 57.8, 57.2]
    rss = [240.0 + 3 * t for t in range(len(kept))]  # the heap settling: 33 MiB in 12 s
    report = _report(kept, rss)
    assert report.kept_growth is not None and abs(report.kept_growth) < MiB
    assert report.passed, report.summary()


def test_live_bytes_that_keep_growing_fail() -> None:
    kept = [57.0 + 0.5 * t for t in range(12)]  # 0.5 MiB a second: 10 KiB a request here
    report = _report(kept, [250.0] * len(kept))
    assert report.kept_growth is not None and report.kept_growth > soak.KEPT_GROWTH_BYTES
    assert not report.passed


def test_a_peak_over_idle_budget_cache_and_slack_fails() -> None:
    kept = [57.0] * 12
    bound = 180 + soak.MEMORY_MIB + soak.CACHE_MIB + SLACK_BYTES / MiB
    assert _report(kept, [250.0] * 12, peak=bound).passed
    assert not _report(kept, [250.0] * 12, peak=bound + 1).passed

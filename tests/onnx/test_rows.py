"""The external parts a client sends, found for each range a cache's rows need: by bisection
among parts sorted by offset, whatever they overlap, in the time the request declares."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from posenc.declare import Part
from posenc.schemes.rope.onnx import rows
from posenc.schemes.rope.onnx.graph import MAX_ROPES

_SPANS = st.lists(st.tuples(st.integers(0, 64), st.integers(0, 32)), min_size=1, max_size=12)


@settings(max_examples=300, deadline=None)
@given(_SPANS, st.integers(0, 96), st.integers(1, 16), st.sampled_from(["data", "other"]))
def test_a_range_is_found_in_a_part_that_holds_it_wherever_the_parts_overlap(
    spans: list[tuple[int, int]], offset: int, length: int, location: str
) -> None:
    # Each part's bytes are their own offsets (mod 256): what is found says where it came from.
    sent = [
        Part(bytes((at + k) % 256 for k in range(size)), filename=f"data@{at}")
        for at, size in spans
    ]
    found = rows.Parts(sent).find(rows.Needed("t", location, offset, length))
    held = location == "data" and any(
        at <= offset and offset + length <= at + size for at, size in spans
    )
    if not held:
        assert found is None
    else:
        assert found is not None
        assert bytes(found) == bytes((offset + k) % 256 for k in range(length))


@pytest.mark.serial
def test_the_ranges_of_the_most_caches_are_found_among_the_most_parts_in_milliseconds() -> None:
    # The most ranges a request needs: 64 caches of cos and sin, each sampled at 30 runs of
    # rows over 2^31 positions; the most parts a request carries, each one range.
    needs = [rows.Needed("t", "data", 64 * k, 64) for k in range(MAX_ROPES * 2 * 30)]
    sent = [Part(bytes(64), filename=f"data@{64 * k}") for k in range(rows.MAX_PARTS)][::-1]
    started = time.thread_time()
    assert not rows.missing(needs, rows.Parts(sent))
    took = time.thread_time() - started
    # 0.1 s measured when each range scanned the parts (and read scans them again); 0.004 s.
    assert took < 0.03, f"{took:.3f} s"

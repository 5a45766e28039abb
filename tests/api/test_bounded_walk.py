"""The cost model holds everywhere, by construction: every declared operation × component ×
format × dtype of every scheme, at the extremes its schema allows (tests/walk.py), is refused or
answered, never a 5xx, and never allocates more than it reserved.

Measured in process by tracemalloc from the moment the request arrives until its last byte is
sent (the ``bounded_walk`` fixture of tests/conftest.py); tests/live/test_bounded_walk_live.py
sends the same matrix to a real uvicorn under an address-space limit and holds its resident
memory to the same reservations.
"""

from __future__ import annotations

from collections import Counter

import pytest

from posenc.registry import SCHEMES
from tests.walk import REFUSAL_BYTES, Outcome

# With the live walk, which reads the same session's walk: one walk, in the serial run.
pytestmark = pytest.mark.serial


def test_the_walk_covers_every_operation_of_every_scheme(bounded_walk: list[Outcome]) -> None:
    walked = {(o.walked.method, o.walked.path) for o in bounded_walk}
    for scheme in SCHEMES:
        for endpoint in scheme.endpoints:
            path = f"/v1/{scheme.name}/{'verify' if endpoint == 'conformance' else endpoint}"
            assert any(p == path for _, p in walked), f"{path} was not walked"
    # Both answers and refusals are walked: a matrix of refusals alone would prove little.
    statuses = Counter(o.status for o in bounded_walk)
    assert statuses[200] > 100 and statuses[422] > 100, statuses


def test_no_request_of_the_walk_is_a_server_error(bounded_walk: list[Outcome]) -> None:
    failed = [f"{o.status} {o.walked}" for o in bounded_walk if o.status >= 500]
    assert not failed, f"{len(failed)} of {len(bounded_walk)}:\n" + "\n".join(failed[:20])


def test_no_request_of_the_walk_allocates_more_than_it_reserved(
    bounded_walk: list[Outcome],
) -> None:
    over = [
        f"{o.status} {o.walked}: traced {o.peak:,} B, reserved {o.reserved:,} B"
        for o in bounded_walk
        if o.peak > max(o.reserved, REFUSAL_BYTES)
    ]
    assert not over, f"{len(over)} of {len(bounded_walk)}:\n" + "\n".join(over[:20])

"""The query parsers under whatever a client may send: never a 5xx, always a named parameter."""

from __future__ import annotations

import math
from urllib.parse import quote

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.settings import Settings
from tests.conftest import Client

CLIENT = Client()
SETTINGS = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def _answer(query: str) -> tuple[int, dict[str, object]]:
    response = CLIENT.get(f"/v1/encode?d_model=2&{query}")
    assert response.status_code < 500, response.text
    return response.status_code, response.json()


@SETTINGS
@given(st.lists(st.integers(0, 2**31 - 1), min_size=1, max_size=20))
def test_integer_position_lists_round_trip(positions: list[int]) -> None:
    status, body = _answer("positions=" + ",".join(map(str, positions)))
    assert status == 200 and body["params"]["positions"] == positions  # type: ignore[index]


@SETTINGS
@given(st.floats(allow_nan=True, allow_infinity=True))
def test_every_float_spelling_is_an_integer_or_a_named_422(value: float) -> None:
    # Spellings that all parse back to exactly this value.
    for spelling in {repr(value), f"{value:.17e}", f"{value:.17g}"}:
        status, body = _answer("positions=" + quote(spelling))
        integral = math.isfinite(value) and value.is_integer() and 0 <= value < 2**31
        if integral:
            assert status == 200 and body["params"]["positions"] == [int(value)]  # type: ignore[index]
        else:
            assert status == 422
            assert body["errors"][0]["loc"][:2] == ["query", "positions"]  # type: ignore[index]


@SETTINGS
@given(st.text(min_size=0, max_size=40))
def test_arbitrary_unicode_in_any_parameter_is_refused_cleanly(text: str) -> None:
    for name in ("positions", "d_model", "base", "layout", "scheme", "format"):
        response = CLIENT.get(f"/v1/table?seq_len=2&d_model=2&{name}={quote(text)}")
        assert response.status_code in (200, 422), response.text
        if response.status_code == 422:
            assert response.headers["content-type"] == "application/problem+json"


def test_a_very_long_query_string_is_answered_not_crashed() -> None:
    # httpx refuses URLs over 64 KiB; 25,000 positions (50 KB) against a limit of 1,000.
    client = Client(Settings(max_positions=1000))
    positions = ",".join(["1"] * 25_000)
    response = client.get(f"/v1/encode?d_model=2&positions={positions}")
    assert response.status_code == 422
    assert response.json()["type"] == "urn:posenc:problem:limit-exceeded"
    garbage = CLIENT.get("/v1/table?d_model=2&seq_len=2&" + "x=1&" * 5000)
    assert garbage.status_code == 422

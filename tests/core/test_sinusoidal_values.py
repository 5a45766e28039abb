"""Values of the sinusoidal table against mpmath at 200 bits, at small and very large positions."""

from __future__ import annotations

import numpy as np
import pytest

from posenc import SinusoidalParams, encode, table
from tests.core.reference import exact, ulps

LARGE = [2**24 - 1, 2**24, 2**24 + 1, 10**6, 10**9, 2**31 - 2, 2**31 - 1]


def test_seed_example_of_the_paper_for_three_positions() -> None:
    rows = table(SinusoidalParams(d_model=4), 3).round(4).tolist()
    assert rows == [
        [0.0, 1.0, 0.0, 1.0],
        [0.8415, 0.5403, 0.01, 1.0],
        [0.9093, -0.4161, 0.02, 0.9998],
    ]


def test_seed_example_with_base_100_at_position_3() -> None:
    row = table(SinusoidalParams(d_model=4, base=100.0), 4, dtype="float32")[3]
    # The seed's figures are the exact values to 8 decimals; float32 rounds them differently.
    expected = [0.14112001, -0.9899925, 0.29552021, 0.95533649]
    assert row.dtype == np.float32
    np.testing.assert_allclose(row, expected, rtol=0, atol=5e-8)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64])
@pytest.mark.parametrize("layout", ["interleaved", "split"])
@pytest.mark.parametrize("d_model", [1, 2, 7, 64, 513])
def test_every_value_is_within_one_ulp_of_the_exact_value(
    d_model: int, layout: str, dtype: type[np.floating]
) -> None:
    rng = np.random.default_rng(d_model)
    positions = np.concatenate([[0, 1, 2, 3], rng.integers(0, 2**31, 12), LARGE])
    params = SinusoidalParams(d_model=d_model, base=10000.0, layout=layout)  # type: ignore[arg-type]
    served = encode(params, positions, np.dtype(dtype).name)  # type: ignore[arg-type]
    columns = sorted({0, d_model - 1, *rng.integers(0, d_model, 8).tolist()})
    worst = max(
        ulps(float(served[r, c]), exact(int(p), c, d_model, 10000.0, layout), dtype)
        for r, p in enumerate(positions)
        for c in columns
    )
    # float32/float16 are one rounding of a much better float64: at most half an ulp plus a hair.
    # float64 carries NumPy's sin/cos error of up to one ulp.
    assert worst <= (1.0 if dtype == np.float64 else 0.5 + 2**-20)


@pytest.mark.parametrize("base", [1.0001, 2.0, 100.0, 10000.0, 500000.0, 1e12])
def test_other_bases_are_exact_too(base: float) -> None:
    positions = np.array([0, 7, 12345, 2**24 + 3, 2**31 - 1])
    served = encode(SinusoidalParams(d_model=10, base=base), positions, "float32")
    worst = max(
        ulps(float(served[r, c]), exact(int(p), c, 10, base, "interleaved"), np.float32)
        for r, p in enumerate(positions)
        for c in range(10)
    )
    assert worst <= 0.5 + 2**-20


def test_values_near_zero_are_exact_relative_to_their_own_size() -> None:
    # sin(pos·ω) passes close to zero where pos·ω is near a multiple of π: 355/113 ≈ π makes
    # position 355 the closest integer below 10^3 at ω = 1, and 2^31 − 1 reaches near zeros
    # of the cosine column for some frequency. The ulp there is tiny.
    d_model = 256
    positions = np.array([355, 710, 103993, 2**31 - 1])
    served = encode(SinusoidalParams(d_model=d_model), positions, "float32")
    assert abs(float(served[0, 0])) < 1e-4
    worst = max(
        ulps(float(served[r, c]), exact(int(p), c, d_model, 10000.0, "interleaved"), np.float32)
        for r, p in enumerate(positions)
        for c in range(d_model)
    )
    assert worst <= 0.5 + 2**-20


def test_the_usual_float32_recipe_is_far_off_at_a_million_where_posenc_is_not() -> None:
    d_model, position = 64, 10**6
    i = np.arange(0, d_model, 2, dtype=np.float32)
    inv_freq = np.exp(i * np.float32(-np.log(10000.0) / d_model)).astype(np.float32)
    recipe = np.sin(np.float32(position) * inv_freq)
    truth = np.array(
        [
            float(exact(position, 2 * k, d_model, 10000.0, "interleaved"))
            for k in range(d_model // 2)
        ]
    )
    served = encode(SinusoidalParams(d_model=d_model), np.array([position]), "float32")[0, 0::2]
    assert np.max(np.abs(recipe - truth)) > 0.01
    assert np.max(np.abs(served - truth)) < 2**-24


def test_odd_d_model_keeps_the_last_sine_and_has_no_padded_column() -> None:
    d_model = 5
    row = encode(SinusoidalParams(d_model=d_model), np.array([3]))[0]
    last_frequency = 10000.0 ** (-2 * 2 / d_model)
    assert row.shape == (5,)
    assert row[4] == pytest.approx(np.sin(3 * last_frequency), rel=1e-15)
    assert row[4] != 0.0


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize(
    ("offset", "layout"), [(0, "interleaved"), (2**31 - 700, "split"), (10**9 + 3, "interleaved")]
)
def test_rotated_tables_stay_within_the_bound_against_mpmath(
    offset: int, layout: str, dtype: type[np.floating]
) -> None:
    # Consecutive float32/float16 tables come from rotation of exact anchors (numerics.rotation).
    d_model, seq_len = 97, 700
    params = SinusoidalParams(d_model=d_model, layout=layout)  # type: ignore[arg-type]
    served = table(params, seq_len, offset, np.dtype(dtype).name)  # type: ignore[arg-type]
    rng = np.random.default_rng(offset)
    rows = [0, 15, 16, 255, 256, seq_len - 1, *rng.integers(0, seq_len, 6).tolist()]
    worst = max(
        ulps(float(served[r, c]), exact(offset + r, c, d_model, 10000.0, layout), dtype)
        for r in rows
        for c in range(d_model)
    )
    assert worst <= 0.5 + 2**-14


def test_rotated_table_agrees_with_the_exact_path_value_for_value() -> None:
    params = SinusoidalParams(d_model=256)
    offset = 2**31 - 4096
    rotated = table(params, 4096, offset, "float32")
    direct = encode(params, np.arange(offset, offset + 4096), "float32")
    # Only a value within 2^-14 ulp of a rounding tie could round differently: none here.
    assert np.array_equal(rotated, direct)
    # ~0.07 % of the values are near zero and came from the exact path: make sure some were.
    assert np.count_nonzero(np.abs(rotated) < 2**-10) > 100

"""Properties of the sinusoidal table, for parameters drawn by hypothesis."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from posenc import SinusoidalParams, encode, frequencies, table
from posenc.numerics.exact import MAX_POSITION

d_models = st.integers(1, 96)
bases = st.floats(1.5, 1e6)
layouts = st.sampled_from(["interleaved", "split"])
positions = st.integers(0, MAX_POSITION - 64)


@settings(max_examples=60, deadline=None)
@given(d_models, bases, layouts, positions, st.integers(1, 64))
def test_shifting_by_k_rotates_every_pair_by_k_omega(
    d_model: int, base: float, layout: str, start: int, k: int
) -> None:
    params = SinusoidalParams(d_model=d_model, base=base, layout=layout)  # type: ignore[arg-type]
    rows = encode(params, np.array([start, start + k]))
    as_interleaved = encode(
        SinusoidalParams(d_model=d_model, base=base), np.array([start, start + k])
    )
    pairs = d_model // 2
    s, c = as_interleaved[0, 0 : 2 * pairs : 2], as_interleaved[0, 1::2]
    omega_k = encode(SinusoidalParams(d_model=d_model, base=base), np.array([k]))[0]
    sk, ck = omega_k[0 : 2 * pairs : 2], omega_k[1::2]
    np.testing.assert_allclose(s * ck + c * sk, as_interleaved[1, 0 : 2 * pairs : 2], atol=1e-14)
    np.testing.assert_allclose(c * ck - s * sk, as_interleaved[1, 1::2], atol=1e-14)
    assert rows.shape == (2, d_model)


@settings(max_examples=60, deadline=None)
@given(d_models, bases, positions)
def test_split_layout_is_a_column_permutation_of_interleaved(
    d_model: int, base: float, start: int
) -> None:
    interleaved = table(SinusoidalParams(d_model=d_model, base=base), 3, start)
    split = table(SinusoidalParams(d_model=d_model, base=base, layout="split"), 3, start)
    h = (d_model + 1) // 2
    order = list(range(0, d_model, 2)) + list(range(1, d_model, 2))
    assert np.array_equal(split, interleaved[:, order])
    assert np.array_equal(split[:, :h], interleaved[:, 0::2])


@settings(max_examples=60, deadline=None)
@given(d_models, bases, layouts, positions, st.sampled_from(["float16", "float32", "float64"]))
def test_values_are_bounded_and_positions_unique(
    d_model: int, base: float, layout: str, start: int, dtype: str
) -> None:
    params = SinusoidalParams(d_model=d_model, base=base, layout=layout)  # type: ignore[arg-type]
    rows = table(params, 16, start, dtype)  # type: ignore[arg-type]
    assert rows.dtype == np.dtype(dtype)
    assert np.all(np.abs(rows) <= 1.0)
    if dtype != "float16":  # float16's 11 bits may round two distinct rows alike
        assert len({row.tobytes() for row in rows}) == 16


@settings(max_examples=40, deadline=None)
@given(d_models, bases, st.lists(positions, min_size=1, max_size=8))
def test_encode_of_a_list_equals_the_rows_of_the_consecutive_table(
    d_model: int, base: float, chosen: list[int]
) -> None:
    params = SinusoidalParams(d_model=d_model, base=base)
    listed = encode(params, np.array(chosen), "float32")
    for row, p in zip(listed, chosen, strict=True):
        assert np.array_equal(row, table(params, 1, p, "float32")[0])


def test_frequencies_fall_geometrically_from_one() -> None:
    omega = frequencies(512, 10000.0).radians
    assert omega[0] == 1.0
    np.testing.assert_allclose(omega[1:] / omega[:-1], 10000.0 ** (-2 / 512), rtol=1e-15)
    assert omega[-1] == np.float64(10000.0 ** (-2 * 255 / 512))

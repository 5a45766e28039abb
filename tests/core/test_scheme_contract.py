"""One contract for every scheme of the registry, and the properties each scheme promises."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import posenc
from posenc.errors import ParameterError
from posenc.schemes.alibi import maths as alibi
from posenc.schemes.rope import maths as rope
from posenc.schemes.rope.params import RopeParams
from posenc.schemes.t5 import maths as t5

EXAMPLES: dict[str, dict[str, Any]] = {
    "sinusoidal": {"d_model": 7},
    "rope": {"d_model": 8},
    "alibi": {"num_heads": 3},
    "t5": {},
    "sinusoidal2d": {"d_model": 8, "grid": (2, 3)},
    "sinusoidal3d": {"d_model": 12, "grid": (2, 1, 2)},
    "index": {"d_model": 3},
    "normalized": {"d_model": 3},
    "binary": {"d_model": 3},
}


def _rows(scheme: posenc.Scheme, params: Any, count: int) -> np.ndarray:
    """``count`` positions, or every cell of a grid scheme."""
    return np.arange(int(np.prod(params.grid)) if scheme.rows == "grid" else count, dtype=np.int64)


def test_every_registered_scheme_has_an_example() -> None:
    assert set(EXAMPLES) == {s.name for s in posenc.SCHEMES}


@pytest.mark.parametrize("name", [s.name for s in posenc.SCHEMES])
def test_each_component_has_the_shape_and_dtype_the_scheme_announces(name: str) -> None:
    scheme = posenc.get(name)
    params = scheme.params(**EXAMPLES[name])
    positions = _rows(scheme, params, 4)
    for component in scheme.components or ("",):
        for dtype in scheme.dtypes or ("int32",):
            array = scheme.encode(params, positions, dtype, component)
            assert array.shape == scheme.shape(params, len(positions), component)
            assert array.dtype == np.dtype(dtype)
            assert np.all(np.isfinite(array))


@pytest.mark.parametrize(
    "name", [n for n, s in ((s.name, s) for s in posenc.SCHEMES) if s.rows != "grid"]
)
def test_a_single_position_works(name: str) -> None:
    scheme = posenc.get(name)
    params = scheme.params(**EXAMPLES[name])
    array = scheme.encode(
        params, np.array([5]), (scheme.dtypes or ("int32",))[0], (scheme.components or ("",))[0]
    )
    assert array.size >= 1


@pytest.mark.parametrize("name", [s.name for s in posenc.SCHEMES])
def test_verify_reports_measured_checks(name: str) -> None:
    scheme = posenc.get(name)
    params = scheme.params(**EXAMPLES[name])
    positions = _rows(scheme, params, 6)
    component = (scheme.components or ("",))[0]
    served = scheme.encode(params, positions, (scheme.dtypes or ("int32",))[0], component)
    report = scheme.verify(params, served, positions)
    assert report.checks and all(check.detail for check in report.checks)


@pytest.mark.parametrize(
    ("name", "kwargs", "named"),
    [
        ("rope", {"d_model": 7}, "d_model"),
        ("rope", {"d_model": 8, "scaling": "linear"}, "factor"),
        (
            "rope",
            {"d_model": 8, "scaling": "yarn", "factor": 2.0},
            "original_max_position_embeddings",
        ),
        ("rope", {"d_model": 8, "factor": 2.0}, "factor"),
        (
            "rope",
            {
                "d_model": 4,
                "scaling": "longrope",
                "original_max_position_embeddings": 8,
                "short_factor": (1.0,),
                "long_factor": (1.0, 2.0),
            },
            "short_factor",
        ),
        ("alibi", {"num_heads": 0}, "num_heads"),
        ("t5", {"num_buckets": 32, "max_distance": 4}, "max_distance"),
        ("sinusoidal", {"d_model": 4, "convention": "tensor2tensor", "layout": "split"}, "layout"),
        ("sinusoidal", {"d_model": 4, "padding_idx": 3}, "padding_idx"),
        ("sinusoidal2d", {"d_model": 6, "grid": (2, 2)}, "d_model"),
        ("sinusoidal3d", {"d_model": 12, "grid": (2, 2)}, "grid"),
    ],
)
def test_bad_scheme_parameters_name_themselves(
    name: str, kwargs: dict[str, Any], named: str
) -> None:
    with pytest.raises(ParameterError) as raised:
        posenc.get(name).params(**kwargs)
    assert raised.value.param == named


@settings(max_examples=40, deadline=None)
@given(
    st.sampled_from([2, 8, 64]),
    st.sampled_from(["split", "interleaved"]),
    st.sampled_from(["none", "linear", "llama3"]),
    st.integers(0, 2**31 - 100),
    st.integers(0, 60),
    st.integers(0, 60),
)
def test_rope_inner_product_depends_on_the_offset_alone(
    d: int, layout: str, scaling: str, start: int, m: int, n: int
) -> None:
    factor = None if scaling == "none" else 4.0
    params = RopeParams(d_model=d, layout=layout, scaling=scaling, factor=factor)  # type: ignore[arg-type]
    rng = np.random.default_rng(d + m)
    q, k = rng.normal(size=(2, d))
    positions = np.array([start + m, start + n, start + 60 + m, start + 60 + n])
    rotated_q = rope.rotate(params, np.tile(q, (4, 1)), positions)
    rotated_k = rope.rotate(params, np.tile(k, (4, 1)), positions)
    near = rotated_q[0] @ rotated_k[1]
    far = rotated_q[2] @ rotated_k[3]
    assert near == pytest.approx(far, abs=1e-12 * d)
    assert np.linalg.norm(rotated_q[0]) == pytest.approx(np.linalg.norm(q), rel=1e-13)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 64), st.lists(st.integers(0, 10**6), min_size=2, max_size=8))
def test_alibi_bias_depends_on_distance_alone(heads: int, chosen: list[int]) -> None:
    positions = np.array(chosen)
    bias = alibi.encode(alibi.AlibiParams(heads), positions, "float64")
    distance = np.abs(positions[:, None] - positions[None, :])
    for h in range(heads):
        expected = -alibi.slopes(heads)[h] * distance
        assert np.array_equal(bias[h], expected + 0.0)
    assert np.all(np.diff(alibi.slopes(heads)[: 2 ** int(np.log2(heads))]) < 0)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from([8, 16, 32, 64]), st.integers(70, 500), st.booleans())
def test_t5_buckets_are_monotone_and_symmetric(buckets: int, distance: int, both: bool) -> None:
    params = t5.T5Params(buckets, distance, both)
    ahead = t5.buckets(params, np.arange(0, 3 * distance))
    behind = t5.buckets(params, -np.arange(0, 3 * distance))
    assert np.all(np.diff(behind) >= 0)
    assert behind.max() < buckets and behind.min() >= 0
    if both:
        assert np.all(np.diff(ahead) >= 0)
        assert np.array_equal(ahead[1:], behind[1:] + buckets // 2)
    else:
        assert not ahead.any()


def _position_sets(scheme: posenc.Scheme, params: Any) -> list[np.ndarray]:
    if scheme.rows == "grid":
        return [_rows(scheme, params, 0)]
    return [np.arange(4), np.arange(60_000, 60_010), np.array([5, 70_001, 3])]


@pytest.mark.parametrize("name", [s.name for s in posenc.SCHEMES])
def test_the_declared_magnitude_bounds_every_array_and_is_reached(name: str) -> None:
    """What refuses float16 before computing (``Scheme.magnitude``) is an upper bound of every
    value, and a tight one: at least half the largest, so nothing float16 holds is refused."""
    scheme = posenc.get(name)
    if scheme.dtypes is None:  # integers: no dtype to overflow
        assert scheme.magnitude is None
        return
    assert scheme.magnitude is not None
    for example in scheme.examples:
        params = scheme.params(**example)
        for positions in _position_sets(scheme, params):
            first, last = int(positions.min()), int(positions.max())
            for component in scheme.components or ("",):
                largest = float(
                    np.abs(scheme.encode(params, positions, "float64", component)).max()
                )
                declared = scheme.magnitude(params, first, last, component)
                assert declared / 2 <= largest <= declared * (1 + 1e-12), (example, component)


@pytest.mark.parametrize("name", [s.name for s in posenc.SCHEMES])
def test_an_array_without_rows_depends_on_their_last_position_alone(name: str) -> None:
    """What lets a component of fixed shape (rope's inv_freq, ALiBi's slopes) be served for a
    seq_len of 2^31 from one position (``Scheme.follows_rows``)."""
    scheme = posenc.get(name)
    for example in scheme.examples:
        params = scheme.params(**{**example, **_dynamic(scheme, example)})
        for component in scheme.components or ("",):
            if scheme.follows_rows(params, component):
                continue
            for first, last in ((0, 9), (100, 5000), (7, 7)):
                every = scheme.encode(params, np.arange(first, last + 1), "float64", component)
                alone = scheme.encode(params, np.array([last]), "float64", component)
                np.testing.assert_array_equal(every, alone)


def _dynamic(scheme: posenc.Scheme, example: dict[str, Any]) -> dict[str, Any]:
    """Where the scheme scales with the sequence length, a scaling that does: the case where
    the last position matters."""
    if scheme.name == "rope" and "scaling" not in example:
        return {"scaling": "dynamic", "factor": 2.0, "original_max_position_embeddings": 64}
    return {}

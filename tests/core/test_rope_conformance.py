"""RoPE conformance on caches built in NumPy: each finding fires on its fault, with its fitted
evidence, and stays silent on a correct cache of every component."""

from __future__ import annotations

import tracemalloc
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from posenc.cancel import CancelToken, WorkCancelledError, scope
from posenc.errors import ParameterError
from posenc.schemes.rope import conformance as rope_conformance
from posenc.schemes.rope import maths as rope
from posenc.schemes.rope.params import RopeParams
from posenc.schemes.rope.scaling import scaled

N = 512
COMPONENTS = ["cos_sin", "cos", "sin", "angle"]
PLANES = ["cos_sin", "cos", "sin"]
LLAMA = RopeParams(d_model=128, base=500000.0)
YARN = RopeParams(
    d_model=128, base=1e6, scaling="yarn", factor=4.0, original_max_position_embeddings=32768
)


def cache(params: RopeParams, component: str, offset: int = 0, n: int = N) -> Any:
    return rope.table(params, n, offset, "float32", component)


def names(params: RopeParams, array: Any, component: str, offset: int = 0) -> list[str]:
    return [f.name for f in rope_conformance.check(params, array, component, offset).diagnosis]


def finding(result: Any, name: str) -> Any:
    (found,) = [f for f in result.diagnosis if f.name == name]
    return found


def bfloat16(values: Any) -> Any:
    bits = values.astype(np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return rounded.astype(np.uint32).view(np.float32)


@pytest.mark.parametrize("component", COMPONENTS)
@pytest.mark.parametrize(
    ("params", "offset", "dtype"),
    [
        (LLAMA, 0, "float32"),
        (replace(LLAMA, layout="interleaved"), 7000, "float32"),
        (YARN, 100, "float32"),
        (RopeParams(d_model=16, base=10000.0), 3, "float64"),
        (RopeParams(d_model=2), 0, "float16"),
    ],
)
def test_a_correct_cache_conforms_and_only_value_rounding_is_said(
    params: RopeParams, offset: int, dtype: str, component: str
) -> None:
    exact = rope.table(params, 300, offset, "float64", component).astype(dtype)
    result = rope_conformance.check(params, exact, component, offset)
    assert result.max_ulp_error <= 0.5 + 1e-9
    assert result.first_bad_position is None and len(result.error_by_position) == 300
    assert [f.name for f in result.diagnosis] == ["value_rounding"]


@pytest.mark.parametrize("component", COMPONENTS)
def test_another_base_is_fitted(component: str) -> None:
    result = rope_conformance.check(
        LLAMA, cache(replace(LLAMA, base=10000.0), component), component
    )
    assert [f.name for f in result.diagnosis] == ["base_mismatch"]
    assert finding(result, "base_mismatch").evidence["fitted_base"] == 10000.0
    assert result.first_bad_position == 1


@pytest.mark.parametrize("component", COMPONENTS)
def test_the_other_layout_is_named_from_how_the_values_repeat(component: str) -> None:
    array = cache(replace(LLAMA, layout="interleaved"), component)
    if component == "angle":  # angles hold one value a pair: no layout to get wrong
        assert names(LLAMA, array, component) == ["value_rounding"]
        return
    result = rope_conformance.check(LLAMA, array, component)
    assert [f.name for f in result.diagnosis] == ["layout_mismatch"]
    assert finding(result, "layout_mismatch").evidence["matches"] == "interleaved"


@pytest.mark.parametrize("component", PLANES)
def test_sin_in_place_of_cos_is_named(component: str) -> None:
    if component == "cos_sin":
        swapped = cache(LLAMA, "cos_sin")[::-1]
    else:
        swapped = cache(LLAMA, "sin" if component == "cos" else "cos")
    result = rope_conformance.check(LLAMA, swapped, component)
    (layout,) = result.diagnosis
    assert layout.name == "layout_mismatch" and "exchanged" in layout.evidence["matches"]


@pytest.mark.parametrize("component", COMPONENTS)
@pytest.mark.parametrize(
    ("built", "scaling", "factor", "original"),
    [
        (replace(LLAMA, scaling="linear", factor=4.0), "linear", 4.0, None),
        (
            replace(LLAMA, scaling="llama3", factor=8.0, original_max_position_embeddings=8192),
            "llama3",
            8.0,
            8192,
        ),
        (replace(YARN, base=500000.0), "yarn", 4.0, 32768),
    ],
)
def test_the_scaling_and_factor_that_built_the_cache_are_fitted(
    component: str, built: RopeParams, scaling: str, factor: float, original: int | None
) -> None:
    # cos or sin alone cannot read the slowest frequencies of a short cache: a longer one.
    n = N if component in ("cos_sin", "angle") or scaling == "linear" else 8192
    result = rope_conformance.check(LLAMA, cache(built, component, n=n), component)
    assert [f.name for f in result.diagnosis][:1] == ["scaling_mismatch"]
    evidence = finding(result, "scaling_mismatch").evidence
    assert (evidence["fitted_scaling"], evidence["fitted_factor"]) == (scaling, factor)
    assert evidence["fitted_original_max_position_embeddings"] == original
    assert evidence["max_abs_error_as_fitted"] < 1e-3 * evidence["max_abs_error_as_stated"]


@pytest.mark.parametrize("component", COMPONENTS)
def test_a_cache_left_unscaled_is_named_against_its_stated_scaling(component: str) -> None:
    result = rope_conformance.check(
        YARN,
        cache(
            replace(YARN, scaling="none", factor=None, original_max_position_embeddings=None),
            component,
        ),
        component,
    )
    evidence = finding(result, "scaling_mismatch").evidence
    assert evidence["fitted_scaling"] == "none"


@pytest.mark.parametrize("component", PLANES)
def test_a_missing_attention_factor_is_fitted(component: str) -> None:
    attention = scaled(YARN, N)[1]
    array = (cache(YARN, component) / np.float32(attention)).astype(np.float32)
    result = rope_conformance.check(YARN, array, component)
    assert [f.name for f in result.diagnosis] == ["attention_factor_mismatch"]
    evidence = finding(result, "attention_factor_mismatch").evidence
    assert evidence["fitted_factor"] == pytest.approx(1.0, abs=1e-5)
    assert evidence["expected_factor"] == pytest.approx(0.1 * np.log(4.0) + 1)


@pytest.mark.parametrize("component", COMPONENTS)
@pytest.mark.parametrize(("built", "stated"), [(100, 0), (0, 4096), (123456, 123000)])
def test_a_cache_of_other_positions_is_placed(component: str, built: int, stated: int) -> None:
    result = rope_conformance.check(LLAMA, cache(LLAMA, component, built), component, stated)
    assert [f.name for f in result.diagnosis] == ["offset_mismatch"]
    assert finding(result, "offset_mismatch").evidence["fitted_offset"] == built


@pytest.mark.parametrize("component", COMPONENTS)
def test_float32_angles_are_named_by_their_precision(component: str) -> None:
    # The common hand-written recipe, frequencies by numpy's float32 power: not the framework's.
    offset = 200_000
    inv_freq = (1 / np.float32(5e5) ** (np.arange(0, 128, 2, dtype=np.float32) / 128)).astype(
        np.float32
    )
    angles = (np.arange(offset, offset + N, dtype=np.float32)[:, None] * inv_freq).astype(
        np.float32
    )
    cos = np.tile(np.cos(angles), 2)
    sin = np.tile(np.sin(angles), 2)
    array = {"cos_sin": np.stack([cos, sin]), "cos": cos, "sin": sin, "angle": angles}[component]
    result = rope_conformance.check(LLAMA, array, component, offset)
    precision = finding(result, "angle_precision").evidence
    assert 22 < precision["implied_bits"] < 27  # float32: ~2^-24·pos·ω
    assert set(names(LLAMA, array, component, offset)) <= {
        "angle_precision",
        "matches_framework_recipe",  # angles alone: numpy's float32 power agrees with torch's
    }


@pytest.mark.parametrize("component", COMPONENTS)
def test_positions_held_in_bfloat16_collapse(component: str) -> None:
    offset = 1000
    held = bfloat16(np.arange(offset, offset + N, dtype=np.float32)).astype(np.int64)
    array = rope.encode(LLAMA, held, "float32", component)
    result = rope_conformance.check(LLAMA, array, component, offset)
    assert [f.name for f in result.diagnosis] == ["collapsed_positions"]
    evidence = finding(result, "collapsed_positions").evidence
    assert evidence["first_collapsed_position"] == 1001 and evidence["collapsed_rows"] > 400


@pytest.mark.parametrize("component", COMPONENTS)
def test_a_pass_through_tail_is_named_partial_rotary(component: str) -> None:
    rotary = cache(RopeParams(d_model=32, base=10000.0), component)
    full = np.zeros((*rotary.shape[:-1], 128 if component != "angle" else 64), np.float32)
    if component == "cos_sin":
        full[0] = 1.0
    elif component == "cos":
        full[:] = 1.0
    full[..., : rotary.shape[-1]] = rotary
    result = rope_conformance.check(RopeParams(d_model=128), full, component)
    assert [f.name for f in result.diagnosis] == ["partial_rotary"]
    evidence = finding(result, "partial_rotary").evidence
    assert (evidence["rotating_dimensions"], evidence["partial_rotary_factor"]) == (32, 0.25)


@pytest.mark.parametrize("component", COMPONENTS)
@pytest.mark.parametrize("layout", ["split", "interleaved"])
@pytest.mark.parametrize(("stated", "served"), [(None, 8), (8, None), (8, 16)])
def test_pairs_held_still_where_the_stated_rope_turns_them_are_named_rotary_pairs(
    component: str, layout: str, stated: int | None, served: int | None
) -> None:
    """A proportional rope's still pairs are not a partial rotary (in rotate_half they are not
    a tail, and the pairs that turn keep the whole head's exponents): the finding names the
    pairs that turn, whichever side holds the others still."""
    params = RopeParams(d_model=64, layout=layout, rotary_pairs=stated)  # type: ignore[arg-type]
    array = cache(replace(params, rotary_pairs=served), component)
    result = rope_conformance.check(params, array, component)
    assert [f.name for f in result.diagnosis] == ["rotary_pairs"]
    evidence = finding(result, "rotary_pairs").evidence
    assert evidence == {"turning_pairs": served or 32, "stated_pairs": stated or 32, "pairs": 32}


@pytest.mark.parametrize("component", COMPONENTS)
def test_frequencies_spaced_over_the_whole_head_are_named_partial_rotary(component: str) -> None:
    # inv_freq = base^(−2i/head_dim) for the 16 pairs of a 32-wide rotary part.
    wide = RopeParams(d_model=32, base=10000.0 ** (32 / 128))
    result = rope_conformance.check(RopeParams(d_model=32), cache(wide, component), component)
    assert [f.name for f in result.diagnosis] == ["partial_rotary"]
    assert finding(result, "partial_rotary").evidence["head_dim"] == 128


@pytest.mark.parametrize("component", COMPONENTS)
@pytest.mark.parametrize("params", [LLAMA, YARN])
def test_the_float32_recipe_is_recognised_with_its_distance_from_exact(
    component: str, params: RopeParams
) -> None:
    offset = 30_000
    recipe = rope.table(replace(params, recipe="framework"), N, offset, "float32", component)
    result = rope_conformance.check(params, recipe, component, offset)
    assert set(names(params, recipe, component, offset)) <= {
        "matches_framework_recipe",
        "angle_precision",
    }
    evidence = finding(result, "matches_framework_recipe").evidence
    assert evidence["max_abs_error_from_exact"] == result.max_abs_error > 1e-4
    assert evidence["exceeds_tolerance_from_position"] == result.first_bad_position == offset


def test_a_shape_that_does_not_fit_is_refused_naming_the_expected_one() -> None:
    with pytest.raises(ParameterError, match=r"\(2, n, 128\)"):
        rope_conformance.check(LLAMA, np.zeros((4, 128), np.float32), "cos_sin")
    with pytest.raises(ParameterError, match=r"\(n, 64\)"):
        rope_conformance.check(LLAMA, np.zeros((4, 128), np.float32), "angle")


def test_a_cancelled_check_stops_at_a_checkpoint() -> None:
    token = CancelToken()
    token.cancel()
    with scope(token), pytest.raises(WorkCancelledError):
        rope_conformance.check(LLAMA, cache(LLAMA, "cos_sin"), "cos_sin")


def _peak(build: Any, run: Any) -> int:
    tracemalloc.start()
    try:
        made = build()
        tracemalloc.reset_peak()
        run(made)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("component", COMPONENTS)
@pytest.mark.parametrize(("n", "d"), [(1, 4), (70, 66), (3000, 128)])
def test_declared_bytes_hold_above_the_measured_peak(component: str, n: int, d: int) -> None:
    # Offsets wrong and an interleaved cache take the diagnosis's longest road.
    params = RopeParams(d_model=d, base=500000.0)
    built = replace(params, layout="interleaved", base=10000.0)
    # Once before measuring: the first call's one-time imports are no request's cost.
    rope_conformance.check(params, rope.table(built, 2, 0, "float64", component), component)
    peak = _peak(
        lambda: rope.table(built, n, 5000, "float64", component),
        lambda array: rope_conformance.check(params, array, component, 0),
    )
    assert peak <= rope_conformance.conformance_cost(params, n, component).bytes

"""recipe=ggml and recipe=mlx against the runtimes themselves: ggml through ggml-python (the
ggml llama.cpp builds, compiled here against this machine's glibc) with llama.cpp's arguments
(tests.reference.llama_cpp_args, held to llama.cpp's own in tests/gguf/records), and MLX through
mlx[cpu] with mlx-lm's rope modules. Random widths, bases and layouts for every scaling each runtime
implements; positions from 0, around 2^24 (where positions stop being exact in float32) and up
to 2^31 − 1. Both runtimes call the service's libm (glibc) or none, so every value must be
bit-identical, which is stronger than the 1 ulp the README promises elsewhere."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from posenc.schemes.rope import recipes
from posenc.schemes.rope.params import Layout, Recipe, RopeParams
from tests.reference import runtimes
from tests.reference.llama_cpp_args import call

pytest.importorskip("ggml", reason="ggml-python is part of the reference extra")
pytest.importorskip("mlx.core", reason="mlx[cpu] is part of the reference extra")

_SEED = 20261126
_DRAWS = 4


def _positions(rng: np.random.Generator) -> npt.NDArray[np.int64]:
    return np.concatenate(
        [
            np.arange(0, 96),
            np.arange(2**24 - 16, 2**24 + 16),
            rng.integers(0, 2**31 - 1, 96),
            [2**31 - 1],
        ]
    ).astype(np.int64)


def _scaled(scaling: str, rng: np.random.Generator, d: int) -> dict[str, Any]:
    factor = float(rng.choice([2.0, 4.0, 8.0, 16.0, 40.0]))
    original = int(rng.choice([2048, 4096, 8192, 32768]))
    if scaling == "none":
        return {}
    if scaling == "linear":
        return {"factor": factor}
    if scaling == "dynamic":
        return {"factor": factor, "original_max_position_embeddings": original}
    if scaling == "yarn":
        extra = {"mscale": 0.707, "mscale_all_dim": 0.707} if rng.random() < 0.3 else {}
        return {"factor": factor, "original_max_position_embeddings": original, **extra}
    if scaling == "llama3":
        return {"factor": factor, "original_max_position_embeddings": original}
    short = tuple(float(f) for f in np.round(1 + rng.random(d // 2), 4))
    long = tuple(float(f) for f in np.round(1 + 30 * rng.random(d // 2), 4))
    return {
        "factor": factor,
        "original_max_position_embeddings": original,
        "short_factor": short,
        "long_factor": long,
    }


def _cases(recipe: str, scalings: tuple[str, ...]) -> list[Any]:
    rng = np.random.default_rng(_SEED + len(recipe))
    cases = []
    for scaling in scalings:
        for draw in range(_DRAWS):
            d = int(rng.integers(1, 129)) * 2
            base = float(np.round(10 ** rng.uniform(2, 7), 1))
            mlx_longrope = recipe == "mlx" and scaling == "longrope"  # split pairs only
            layout: Layout = "interleaved" if draw % 2 and not mlx_longrope else "split"
            params = RopeParams(
                d_model=d,
                base=base,
                layout=layout,
                scaling=scaling,  # type: ignore[arg-type]
                recipe=recipe,  # type: ignore[arg-type]
                **_scaled(scaling, rng, d),
            )
            cases.append(pytest.param(params, id=f"{recipe}-{scaling}-{d}-{layout}-{draw}"))
    return cases


def _assert_identical(
    expected: tuple[npt.NDArray[np.float32], ...], got: tuple[npt.NDArray[np.float32], ...]
) -> None:
    for want, have in zip(expected, got, strict=True):
        ulps = np.abs(have.astype(np.float64) - want) / np.spacing(np.abs(want))
        assert ulps.max() <= 1, f"{ulps.max()} ulp from the runtime"
        mismatched = np.argwhere(have != want)
        assert mismatched.size == 0, f"{len(mismatched)} values differ, first at {mismatched[0]}"


@pytest.mark.parametrize("params", _cases("ggml", ("none", "linear", "yarn", "llama3", "longrope")))
def test_ggml_recipe_is_ggml_cpu_bit_for_bit(params: RopeParams) -> None:
    positions = _positions(np.random.default_rng(params.d_model))
    cos, sin, _ = recipes.prepare(params, int(positions.max()) + 1)(positions)
    _assert_identical(runtimes.ggml_halves(call(params), positions), (cos, sin))


@pytest.mark.parametrize("recipe", ["ggml", "mlx"])
def test_llama_4_s_rope_without_a_smooth_band(recipe: Recipe) -> None:
    """Llama 4 gives low_freq_factor = high_freq_factor: the band's division is by zero, and
    both runtimes keep only the values on either side of it."""
    params = RopeParams(
        d_model=128,
        base=500000.0,
        recipe=recipe,
        scaling="llama3",
        factor=16.0,
        low_freq_factor=1.0,
        high_freq_factor=1.0,
        original_max_position_embeddings=8192,
    )
    positions = _positions(np.random.default_rng(4))
    cos, sin, _ = recipes.prepare(params, int(positions.max()) + 1)(positions)
    if recipe == "ggml":
        reference = runtimes.ggml_halves(call(params), positions)
    else:
        reference = runtimes.mlx_halves(params, positions)
    _assert_identical(reference, (cos, sin))


def test_ggml_recipe_with_a_gguf_s_own_factor_tensor() -> None:
    rng = np.random.default_rng(7)
    factors = tuple(float(f) for f in np.round(1 + 10 * rng.random(32), 3))
    params = RopeParams(d_model=64, base=500000.0, recipe="ggml", freq_factors=factors)
    positions = _positions(rng)
    cos, sin, _ = recipes.prepare(params, int(positions.max()) + 1)(positions)
    _assert_identical(runtimes.ggml_halves(call(params), positions), (cos, sin))


@pytest.mark.parametrize("params", _cases("mlx", ("none", "linear", "yarn", "llama3", "longrope")))
def test_mlx_recipe_is_mlx_cpu_bit_for_bit(params: RopeParams) -> None:
    positions = _positions(np.random.default_rng(params.d_model))
    cos, sin, _ = recipes.prepare(params, int(positions.max()) + 1)(positions)
    _assert_identical(runtimes.mlx_halves(params, positions), (cos, sin))


@pytest.mark.parametrize("params", _cases("mlx", ("dynamic",)))
def test_mlx_dynamic_grows_its_base_with_the_table_as_a_prefill_does(params: RopeParams) -> None:
    n = 3 * (params.original_max_position_embeddings or 1) // 2
    cos, sin, _ = recipes.prepare(params, n)(np.arange(n, dtype=np.int64))
    _assert_identical(runtimes.mlx_prefill(params, n), (cos, sin))


def test_the_served_table_is_the_runtime_s_laid_out() -> None:
    """maths.encode (what /v1/rope/table serves) lays the runtime's halves out by layout."""
    from posenc.schemes.rope.maths import encode

    positions = np.arange(1_000_000, 1_000_040, dtype=np.int64)
    runtimes_compared: tuple[Recipe, ...] = ("ggml", "mlx")
    for recipe in runtimes_compared:
        params = RopeParams(
            d_model=16,
            base=10000.0,
            layout="interleaved",
            recipe=recipe,
        )
        table = encode(params, positions, "float32", "cos_sin")
        if recipe == "ggml":
            cos, sin = runtimes.ggml_halves(call(params), positions)
        else:
            cos, sin = runtimes.mlx_halves(params, positions)
        assert np.array_equal(table[0][:, 0::2], cos) and np.array_equal(table[0][:, 1::2], cos)
        assert np.array_equal(table[1][:, 0::2], sin) and np.array_equal(table[1][:, 1::2], sin)


def test_at_a_million_the_runtimes_differ_from_exact_and_from_each_other() -> None:
    """The issue's table: the recipes are each ~1e-2 from exact and from one another at 10^6,
    which is why a porter needs the runtime's own table to compare with."""
    from posenc.schemes.rope.maths import encode

    positions = np.array([1_000_000], dtype=np.int64)
    tables = {}
    recipes_compared: tuple[Recipe, ...] = ("exact", "framework", "ggml", "mlx")
    for recipe in recipes_compared:
        params = RopeParams(d_model=128, base=500000.0, recipe=recipe)
        tables[recipe] = encode(params, positions, "float64", "cos")
    for recipe in ("framework", "ggml", "mlx"):
        assert 1e-3 < np.abs(tables[recipe] - tables["exact"]).max() < 0.2, recipe
    assert np.abs(tables["ggml"] - tables["framework"]).max() > 1e-3
    assert np.abs(tables["mlx"] - tables["ggml"]).max() > 1e-3


@pytest.mark.parametrize("imrope", [False, True], ids=["mrope-chunked", "imrope-interleaved"])
def test_ggml_turns_m_rope_ids_as_ggml_rope_multi_does(imrope: bool) -> None:
    """POST /v1/rope/encode with position_ids and recipe=ggml is llama.cpp's MROPE (Qwen2-VL)
    or IMROPE (Qwen3-VL) bit for bit: each pair of ggml's four thetas is the one-dimensional
    recurrence at that pair's id."""
    from posenc.schemes.rope.mrope import tables
    from posenc.schemes.rope.mrope.families import Rotary

    rng = np.random.default_rng(11)
    params = RopeParams(d_model=128, base=1000000.0, recipe="ggml")
    sections = (24, 20, 20) if imrope else (16, 24, 24)
    ids = rng.integers(0, 2**31 - 1, size=(3, 64)).astype(np.int64)
    ids[:, :8] = np.arange(8)  # text tokens: three equal ids
    rotary: Rotary = "interleaved" if imrope else "chunked"
    table = tables.encode(params, ids, rotary, sections, "float32", "cos_sin")
    cos, sin = runtimes.ggml_multi_halves(call(params), ids, sections, imrope)
    _assert_identical((cos, sin), (table[0][:, :64], table[1][:, :64]))


@pytest.mark.parametrize(
    ("sections", "d", "imrope"),
    [
        ((24, 20, 20, 0), 128, True),  # Qwen3-VL: pairs 61 and 62 turn by the fourth id
        ((2, 3, 3, 0), 16, True),  # the converter test's tiny Qwen3-VL: pair 6
        ((16, 24, 24, 0), 128, False),  # Qwen2-VL
        ((4, 6, 6, 0), 64, False),  # sections over half the pairs: ggml wraps around them
        ((3, 2, 2, 1), 32, True),
    ],
)
def test_the_gguf_check_knows_which_id_ggml_turns_each_pair_by(
    sections: tuple[int, ...], d: int, imrope: bool
) -> None:
    """mrope_check.ggml_axes against ggml_rope_multi itself: four distinct ids for one token,
    each pair's value found among the one-dimensional rope's at those ids."""
    from posenc.schemes.rope.gguf.mrope_check import ggml_axes

    params = RopeParams(d_model=d, base=10000.0, recipe="ggml")
    ids = np.array([[10], [20], [30], [40]], dtype=np.int64)
    _, sin = runtimes.ggml_multi_halves(call(params), ids, sections, imrope)
    _, candidates, _ = recipes.prepare(params, 41)(ids[:, 0])
    matches = sin[0][None, :] == candidates  # (4 ids, d/2 pairs)
    assert (matches.sum(axis=0) == 1).all()  # each pair is one id's, and only one's
    assert matches.argmax(axis=0).tolist() == ggml_axes(sections, d // 2, imrope).tolist()

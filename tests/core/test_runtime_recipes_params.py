"""Whatever parameters pass RopeParams, the runtimes' recipes answer with finite values or a
refusal naming a parameter — never an exception of their own (which the service would turn
into a 500). Drawn at the edges of each range, where the runtimes' formulas divide by zero."""

from __future__ import annotations

import warnings

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from posenc.errors import PosencError
from posenc.schemes.rope.maths import encode, magnitude
from posenc.schemes.rope.params import RopeParams

_FACTORS = st.sampled_from([2.0**-16, 0.5, 1.0, 1.5, 8.0, 1e6])
_ORIGINALS = st.sampled_from([1, 2, 100, 8192, 2**31 - 1])


@st.composite
def _params(draw: st.DrawFn) -> dict[str, object]:
    d = draw(st.sampled_from([2, 4, 6, 8, 64, 130]))
    scaling = draw(st.sampled_from(["none", "linear", "dynamic", "yarn", "llama3", "longrope"]))
    given_: dict[str, object] = {
        "d_model": d,
        "base": draw(st.sampled_from([1.0001, 10.0, 1e4, 5e5, 1e12])),
        "layout": draw(st.sampled_from(["split", "interleaved"])),
        "recipe": draw(st.sampled_from(["ggml", "mlx"])),
        "scaling": scaling,
    }
    if scaling != "none" and (scaling != "longrope" or draw(st.booleans())):
        given_["factor"] = draw(_FACTORS)
    if scaling in ("dynamic", "yarn", "longrope") or draw(st.booleans()):
        given_["original_max_position_embeddings"] = draw(_ORIGINALS)
    if scaling == "llama3":
        given_["low_freq_factor"] = draw(st.sampled_from([1e-6, 1.0, 1e6]))
        given_["high_freq_factor"] = draw(st.sampled_from([1.0, 4.0, 1e6]))
    if scaling == "yarn":
        for key in ("beta_fast", "beta_slow", "mscale", "mscale_all_dim"):
            if draw(st.booleans()):
                given_[key] = draw(st.sampled_from([1e-6, 0.5, 1.0, 32.0, 1e6]))
    pairs = st.lists(_FACTORS, min_size=d // 2, max_size=d // 2).map(tuple)
    if scaling == "longrope":
        given_["short_factor"], given_["long_factor"] = draw(pairs), draw(pairs)
    if given_["recipe"] == "ggml" and draw(st.booleans()):
        given_["freq_factors"] = draw(pairs)
    return given_


@settings(max_examples=300, deadline=None)
@given(
    _params(),
    st.lists(st.integers(0, 2**31 - 1), min_size=1, max_size=4),
    st.sampled_from(["float16", "float32", "float64"]),
)
def test_a_runtime_recipe_answers_finite_values_or_refuses_by_name(
    given_: dict[str, object], positions: list[int], dtype: str
) -> None:
    """As the service does: float16 is refused before computing where the declared magnitude
    passes its range, so the magnitude must bound every value the runtime computes."""
    ids = np.array(sorted(positions))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            params = RopeParams(**given_)  # type: ignore[arg-type]
            for component in ("cos_sin", "angle", "inv_freq"):
                bound = magnitude(params, int(ids[0]), int(ids[-1]), component)
                if dtype == "float16" and bound > float(np.finfo(np.float16).max):
                    continue  # refused by the service before computing
                table = encode(params, ids, dtype, component)
                assert np.isfinite(table).all(), (given_, component)
                # rounded once to dtype: at most half its ulp above the bound (subnormals too)
                slack = bound * 2**-10 + float(np.finfo(dtype).smallest_subnormal)
                assert float(np.abs(table).max()) <= bound + slack, (given_, component)
        except PosencError as refused:
            assert refused.args[0].split(":")[0] in given_ or "recipe" in str(refused)

"""``attention_factor_mismatch``: the amplitude ``√(cos² + sin²)`` read off the cache is another
constant than the scaling's attention factor."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from posenc.conformance import Finding
from posenc.schemes.rope.conformance.reading import Reading
from posenc.schemes.rope.conformance.rows import Model, table_length
from posenc.schemes.rope.recipes import framework


def fit_attention(
    model: Model, reading: Reading, component: str, n: int, dtype: np.dtype[Any]
) -> tuple[Model, list[Finding]]:
    """``model`` with the amplitude read as its attention factor, when it differs from the
    expected factor by more than ``max(16 eps, 10^-4)`` of that factor (or of 1, if larger)."""
    # The factor alone: a GGUF's factor tensor turns no amplitude, and transformers takes none.
    recipe = replace(model.params, recipe="framework", freq_factors=None)
    expected = framework.frequencies(recipe, table_length(model, n))[1]
    if reading.amplitude is not None and component != "angle":
        eps = float(np.finfo(dtype).eps)
        if abs(reading.amplitude - expected) > max(16 * eps, 1e-4) * max(expected, 1.0):
            factor = float(f"{reading.amplitude:.6g}")
            return replace(model, attention=reading.amplitude), [
                _attention_finding(factor, expected)
            ]
    return model, []


def _attention_finding(factor: float, expected: float) -> Finding:
    if abs(factor - 1.0) < 1e-5:
        why = "no attention factor was applied"
    elif abs(factor - expected**2) < 1e-5 * expected**2:
        why = "the attention factor was applied twice"
    else:
        why = "cos and sin are scaled by another constant"
    return Finding(
        "attention_factor_mismatch",
        f"cos and sin have amplitude {factor:g}, not the expected attention factor "
        f"{expected:g}: {why}",
        {"fitted_factor": factor, "expected_factor": expected, "ratio": factor / expected},
    )

"""Assertions on a kernel's input and output (q or k before and after its rope), held to the
model's rope with ``POST /v1/rope/applied``'s diagnosis."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from posenc.errors import ParameterError
from posenc.testing.common import finding_lines, load_config, prefixed, value_text


def assert_rope_applied(
    before: Any,
    after: Any,
    positions: npt.ArrayLike | None = None,
    config: Mapping[str, Any] | str | os.PathLike[str] | None = None,
    *,
    layer: int = 0,
    token_axis: int = 0,
    head_dim: int | None = None,
    offset: int = 0,
    rotary_offset: int | None = None,
    err_msg: str = "",
    **params: Any,
) -> None:
    """Assert that a kernel turned ``before`` into ``after`` by the rope of ``config`` (a
    ``config.json``, loaded or its path, at ``layer``) or of ``params`` (``d_model``, ``base``,
    ``scaling`` … as the HTTP API names them): the model's pairs, dimensions, frequencies,
    scaling, attention factor and positions, with angles within the resolution of the arrays'
    dtypes under one recipe (exact, framework, ggml or mlx).

    ``before`` and ``after`` are NumPy arrays (float16, float32, float64, or ml_dtypes'
    bfloat16) or torch tensors (bfloat16 ones read as bfloat16); the tokens run along
    ``token_axis``, the last axis is one head (or heads of ``head_dim``); every other axis is
    more samples. ``positions`` are ``(n,)`` ids, or M-RoPE's ``(3, n)``; by default ``offset,
    offset + 1, …``. The message is the answer's diagnosis; a verdict the data cannot give
    (``holds`` null: zero vectors, rotations below the resolution) fails too, with its reason.
    """
    answer = rope_applied(
        before, after, positions, config, layer=layer, token_axis=token_axis,
        head_dim=head_dim, offset=offset, rotary_offset=rotary_offset, **params,
    )  # fmt: skip
    if answer["holds"] is not True:
        raise AssertionError(prefixed(err_msg, applied_text(answer)))


def rope_applied(
    before: Any,
    after: Any,
    positions: npt.ArrayLike | None = None,
    config: Mapping[str, Any] | str | os.PathLike[str] | None = None,
    *,
    layer: int = 0,
    token_axis: int = 0,
    head_dim: int | None = None,
    offset: int = 0,
    rotary_offset: int | None = None,
    **params: Any,
) -> dict[str, Any]:
    """The answer of ``POST /v1/rope/applied`` for ``before`` and ``after``, computed in this
    process (the arguments as :func:`assert_rope_applied` takes them)."""
    from posenc.schemes.rope.applied.answer import of_given

    query: dict[str, Any] = {"token_axis": token_axis, "offset": offset, **params}
    if head_dim is not None:
        query["head_dim"] = head_dim
    if rotary_offset is not None:
        query["rotary_offset"] = rotary_offset
    loaded = None
    if config is not None:
        loaded = load_config(config)
        query["layer"] = layer
    ids = None if positions is None else np.asarray(positions)
    before_given, after_given = _kernel_array(before, "before"), _kernel_array(after, "after")
    return of_given(before_given, after_given, ids, loaded, query)


def _kernel_array(values: Any, name: str) -> Any:
    """A kernel's array as the analyser reads it: bfloat16 (torch's or ml_dtypes') as its
    words, other floats as NumPy holds them."""
    from posenc.schemes.rope.applied.reader import FLOATS, Given

    if type(values).__module__.startswith("torch"):
        if str(values.dtype) == "torch.bfloat16":
            import torch

            words = values.detach().cpu().contiguous().view(torch.int16).numpy()
            return Given(words.view(np.uint16), "bfloat16")
        values = values.detach().cpu().numpy()
    array = np.asarray(values)
    if array.dtype.name == "bfloat16":
        return Given(array.view(np.uint16), "bfloat16")
    if array.dtype.name not in FLOATS:
        raise ParameterError(name, f"dtype must be one of {', '.join(FLOATS)}, got {array.dtype}")
    return Given(array, array.dtype.name)


def applied_text(answer: Mapping[str, Any]) -> str:
    """An answer of ``POST /v1/rope/applied`` as a few lines: the verdict, what was measured,
    each recipe's largest angle error, then each finding with its evidence."""
    measured = answer.get("measured", {})
    holds = answer.get("holds")
    verdict = {
        True: "the kernel applied the model's rope",
        False: "the kernel did not apply the model's rope",
        None: "cannot tell whether the kernel applied the model's rope",
    }[holds]
    recipe = measured.get("recipe")
    also = measured.get("also_within") or []
    named = f" (recipe {recipe}" + (f"; also within: {', '.join(also)})" if also else ")")
    lines = [
        f"{verdict}{named if recipe else ''}: {measured.get('tokens')} tokens × "
        f"{measured.get('samples')} samples, head {measured.get('head_dim')}, "
        f"{measured.get('dtypes', {}).get('after', '')}"
    ]
    if answer.get("reason"):
        lines.append(f"  {answer['reason']}")
    shown = ("pairs", "rotated_dims", "magnitude", "max_angle_error", "resolution")
    lines.append("  " + ", ".join(f"{key} {value_text(measured.get(key))}" for key in shown))
    recipes = measured.get("recipes") or {}
    if recipes:
        lines.append("  " + ", ".join(_recipe_text(name, fit) for name, fit in recipes.items()))
    lines += finding_lines(answer.get("diagnosis", ()), "detail")
    return "\n".join(lines)


def _recipe_text(name: str, fit: Mapping[str, Any]) -> str:
    if fit.get("holds") is None:
        return f"{name} n/a"
    return f"{name} {value_text(fit.get('max_angle_error'))} rad" + (
        " ✓" if fit.get("holds") else ""
    )

"""Assertions for the test suite of a port, in the style of ``numpy.testing``: no server, no torch.

:func:`assert_rope_matches` holds a rotary cache to the rope a model's ``config.json`` states
(or to explicit parameters), :func:`assert_table_matches` any scheme's array to its parameters.
Both raise :class:`AssertionError` whose message is the diagnosis that ``POST
/v1/{scheme}/verify`` would give: the first bad position, the largest error in ulps, and each
finding with its evidence. :func:`conformance` returns that answer itself, as a dict.
:func:`assert_rope_applied` holds a kernel's input and output (q or k before and after its rope)
to the model's rope, as ``POST /v1/rope/applied`` does; :func:`rope_applied` returns its answer.

>>> import numpy as np
>>> from posenc.registry import get
>>> cache = get("rope").table(get("rope").params(d_model=8), 16, 0, "float32", "cos_sin")
>>> assert_rope_matches(cache, d_model=8)
>>> assert_rope_matches(cache, d_model=8, base=500000.0)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
AssertionError: does not conform to rope d_model=8 base=500000 layout=split ... tolerance 1 ulp)
  max error 0.7743 = 2.928e+08 ulps of float32, first bad position 1
  base_mismatch: the frequencies fit base 10000, not the stated 500000
      fitted_base=10000, stated_base=500000, ...
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from posenc.errors import InconsistentError, NotApplicableError, ParameterError

__all__ = [
    "applied_text",
    "assert_rope_applied",
    "assert_rope_matches",
    "assert_table_matches",
    "conformance",
    "report_text",
    "rope_applied",
]

# The array types the service reads from a client (app/bodies/dtypes.py says the same).
DTYPES = ("float16", "float32", "float64", "int32")
# What the report lists under the parameters rather than among them.
_SETTINGS = ("dtype", "component", "seq_len", "offset", "tolerance_ulp")


def assert_rope_matches(
    actual: npt.ArrayLike,
    config: Mapping[str, Any] | str | os.PathLike[str] | None = None,
    *,
    component: str | None = None,
    offset: int = 0,
    tolerance_ulp: float = 1.0,
    err_msg: str = "",
    **params: Any,
) -> None:
    """Assert that ``actual`` is the rope of ``config`` (a ``config.json``, loaded or its path)
    or of ``params`` (``d_model``, ``base``, ``scaling`` … as the HTTP API names them), each
    value within ``tolerance_ulp`` of the correctly rounded one. ``params`` given beside a
    config override what it states.

    ``actual`` is the ``component`` (default ``cos_sin``, shape ``(2, n, d)``; ``cos`` or
    ``sin`` ``(n, d)``, ``angle`` ``(n, d/2)``, ``inv_freq`` ``(d/2,)``) for positions
    ``offset … offset+n-1``. A wrong shape, NaN or infinity fail the assertion; parameters the
    rope cannot take raise :class:`posenc.errors.ParameterError`.
    """
    if config is not None:
        from posenc.schemes.rope.models import config as rope_config

        loaded = _load_config(config)
        stated = rope_config.from_config(loaded).params
        params = {**_given(stated), **params}
    assert_table_matches(
        actual,
        "rope",
        component=component,
        offset=offset,
        tolerance_ulp=tolerance_ulp,
        err_msg=err_msg,
        **params,
    )


def assert_table_matches(
    actual: npt.ArrayLike,
    scheme: str,
    *,
    component: str | None = None,
    offset: int = 0,
    tolerance_ulp: float = 1.0,
    err_msg: str = "",
    **params: Any,
) -> None:
    """Assert that ``actual`` is ``scheme``'s array for ``params`` (the HTTP API's names) at
    positions ``offset …``, each value within ``tolerance_ulp`` of the correctly rounded one
    (integer arrays, T5's buckets: equal). The message is the diagnosis.

    >>> import numpy as np
    >>> assert_table_matches(np.zeros((3, 4), np.float32), "sinusoidal", d_model=4)
    Traceback (most recent call last):
    ...
    AssertionError: does not conform to sinusoidal d_model=4 base=10000 ...
    """
    try:
        document = conformance(
            actual,
            scheme,
            component=component,
            offset=offset,
            tolerance_ulp=tolerance_ulp,
            **params,
        )
    except InconsistentError as e:
        if e.param != "array":
            raise
        raise AssertionError(_prefixed(err_msg, f"{scheme}: {e.message}")) from None
    if not document["conforms"]:
        raise AssertionError(_prefixed(err_msg, report_text(document)))


def conformance(
    actual: npt.ArrayLike,
    scheme: str,
    *,
    component: str | None = None,
    offset: int = 0,
    tolerance_ulp: float = 1.0,
    **params: Any,
) -> dict[str, Any]:
    """The answer of ``POST /v1/{scheme}/verify`` for ``actual``, computed in this process:
    ``scheme``, ``params`` (canonical), ``conforms``, ``max_abs_error``, ``max_ulp_error``,
    ``first_bad_position``, ``error_by_position`` and ``diagnosis``.

    Raises :class:`ParameterError` for parameters the scheme does not take, and
    :class:`InconsistentError` on ``"array"`` when the array does not fit them (its shape) or
    holds NaN or infinity.
    """
    from posenc.registry import get
    from posenc.rows import Rows

    declared = get(scheme)
    if declared.conformance is None:
        raise ParameterError("scheme", f"{scheme!r} offers no conformance check")
    stated = params_of(declared, params)
    chosen = component if component is not None else (declared.components or ("",))[0]
    if declared.components and chosen not in declared.components:
        raise ParameterError(
            "component", f"must be one of {', '.join(declared.components)}, got {chosen!r}"
        )
    if not 0 < tolerance_ulp <= 1e6:
        raise ParameterError("tolerance_ulp", f"must be in (0, 1e6], got {tolerance_ulp}")
    array = np.asarray(actual)
    if array.dtype.name not in DTYPES:
        raise ParameterError("dtype", f"must be one of {', '.join(DTYPES)}, got {array.dtype}")
    if not 1 <= array.ndim <= 3 or 0 in array.shape:
        raise InconsistentError(
            "array", f"must be 1-, 2- or 3-D and non-empty, got shape {list(array.shape)}"
        )
    count = declared.rows_in(stated, array.shape, chosen)
    expected = declared.shape(stated, count, chosen)
    if array.shape != expected:
        raise InconsistentError(
            "array",
            f"expected shape {list(expected)} for {chosen or 'the array'}, got {list(array.shape)}",
        )
    flat = array.reshape(array.shape[0], -1)
    finite = np.isfinite(flat).all(axis=1)
    if not finite.all():
        raise InconsistentError("array", f"row {int(np.argmin(finite))} holds NaN or infinity")
    Rows(count, offset)
    conforms, result = declared.conforms(stated, array, chosen, offset, tolerance_ulp)
    canonical = {k: v for k, v in dataclasses.asdict(stated).items() if v is not None}
    canonical.update(
        dtype=str(array.dtype), seq_len=count, offset=offset, tolerance_ulp=tolerance_ulp
    )
    if declared.components:
        canonical["component"] = chosen
    return {
        "scheme": declared.name,
        "params": canonical,
        "conforms": conforms,
        **dataclasses.asdict(result),
    }


def params_of(declared: Any, values: Mapping[str, Any]) -> Any:
    """``declared.params`` from values named as the HTTP API names them (lists as tuples);
    a name the scheme does not take, or a missing required one, is named."""
    fields = {f.name: f for f in declared.fields()}
    for name in values:
        if name not in fields:
            raise NotApplicableError(name, declared.name)
    for name, f in fields.items():
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        if required and name not in values:
            raise ParameterError(name, f"is required by scheme {declared.name!r}")
    given = {k: tuple(v) if isinstance(v, list) else v for k, v in values.items()}
    return declared.params(**given)


def report_text(document: Mapping[str, Any]) -> str:
    """A conformance answer (in process or from the service) as a few lines for a terminal or
    an assertion: the verdict, the worst error and where it starts, then each finding."""
    params = document.get("params", {})
    stated = " ".join(f"{k}={_text(v)}" for k, v in params.items() if k not in _SETTINGS)
    verdict = "conforms" if document.get("conforms") else "does not conform"
    dtype = params.get("dtype", "")
    first, last = params.get("offset", 0), params.get("offset", 0) + params.get("seq_len", 1) - 1
    where = [
        *([f"component {params['component']}"] if "component" in params else []),
        str(dtype),
        f"positions {first}…{last}",
        f"tolerance {_text(params.get('tolerance_ulp', 1.0))} ulp",
    ]
    bad = document.get("first_bad_position")
    lines = [
        f"{verdict} to {document.get('scheme')} {stated} ({', '.join(where)})",
        f"  max error {_text(document.get('max_abs_error'))} = "
        f"{_text(document.get('max_ulp_error'))} ulps of {dtype}"
        + ("" if bad is None else f", first bad position {bad}"),
    ]
    for finding in document.get("diagnosis", ()):
        lines.append(f"  {finding['name']}: {finding['summary']}")
        evidence = finding.get("evidence") or {}
        if evidence:
            lines.append("      " + ", ".join(f"{k}={_text(v)}" for k, v in evidence.items()))
    return "\n".join(lines)


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
        raise AssertionError(_prefixed(err_msg, applied_text(answer)))


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
        loaded = _load_config(config)
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
    lines.append("  " + ", ".join(f"{key} {_text(measured.get(key))}" for key in shown))
    recipes = measured.get("recipes") or {}
    if recipes:
        lines.append("  " + ", ".join(_recipe_text(name, fit) for name, fit in recipes.items()))
    for finding in answer.get("diagnosis", ()):
        lines.append(f"  {finding['name']}: {finding['detail']}")
        evidence = finding.get("evidence") or {}
        if evidence:
            lines.append("      " + ", ".join(f"{k}={_text(v)}" for k, v in evidence.items()))
    return "\n".join(lines)


def _recipe_text(name: str, fit: Mapping[str, Any]) -> str:
    if fit.get("holds") is None:
        return f"{name} n/a"
    return f"{name} {_text(fit.get('max_angle_error'))} rad" + (" ✓" if fit.get("holds") else "")


def _text(value: Any) -> str:
    if isinstance(value, float):
        if math.isfinite(value) and value.is_integer() and abs(value) < 1e16:
            return str(int(value))
        return f"{value:.4g}" if abs(value) >= 1e-3 or value == 0 else f"{value:.3e}"
    if isinstance(value, list | tuple):
        shown = ",".join(_text(v) for v in value[:8])
        return f"[{shown}{',…' if len(value) > 8 else ''}]"
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def _given(params: Any) -> dict[str, Any]:
    return {k: v for k, v in dataclasses.asdict(params).items() if v is not None}


def _load_config(config: Mapping[str, Any] | str | os.PathLike[str]) -> Any:
    if isinstance(config, Mapping):
        return config
    with open(config, encoding="utf-8") as file:
        return json.load(file)


def _prefixed(err_msg: str, message: str) -> str:
    return f"{err_msg}\n{message}" if err_msg else message

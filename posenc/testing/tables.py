"""Assertions on a table or cache in hand: held to a scheme's parameters, or to the rope a
model's ``config.json`` states, with ``POST /v1/{scheme}/verify``'s diagnosis."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from posenc.errors import InconsistentError, NotApplicableError, ParameterError
from posenc.testing.common import finding_lines, load_config, prefixed, value_text

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

        loaded = load_config(config)
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
        raise AssertionError(prefixed(err_msg, f"{scheme}: {e.message}")) from None
    if not document["conforms"]:
        raise AssertionError(prefixed(err_msg, report_text(document)))


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
    stated = " ".join(f"{k}={value_text(v)}" for k, v in params.items() if k not in _SETTINGS)
    verdict = "conforms" if document.get("conforms") else "does not conform"
    dtype = params.get("dtype", "")
    first, last = params.get("offset", 0), params.get("offset", 0) + params.get("seq_len", 1) - 1
    where = [
        *([f"component {params['component']}"] if "component" in params else []),
        str(dtype),
        f"positions {first}…{last}",
        f"tolerance {value_text(params.get('tolerance_ulp', 1.0))} ulp",
    ]
    bad = document.get("first_bad_position")
    lines = [
        f"{verdict} to {document.get('scheme')} {stated} ({', '.join(where)})",
        f"  max error {value_text(document.get('max_abs_error'))} = "
        f"{value_text(document.get('max_ulp_error'))} ulps of {dtype}"
        + ("" if bad is None else f", first bad position {bad}"),
    ]
    lines += finding_lines(document.get("diagnosis", ()), "summary")
    return "\n".join(lines)


def _given(params: Any) -> dict[str, Any]:
    return {k: v for k, v in dataclasses.asdict(params).items() if v is not None}

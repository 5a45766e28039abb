"""The URLs ``/v1/rope/config`` gives each rope: its table (exact, and as each recipe computes
it where that recipe serves the rope), its verify, and their ``/v1/table`` and ``/v1/verify``
aliases, each in the canonical query of its parameters."""

from __future__ import annotations

import dataclasses

from posenc.errors import PosencError
from posenc.schemes.rope import recipes
from posenc.schemes.rope.params import RUNTIMES, RopeParams
from posenc.schemes.rope.recipes import ggml


def query(params: RopeParams) -> str:
    """The canonical query string of ``params``: every parameter that differs from its default.

    >>> query(RopeParams(d_model=128, base=500000.0))
    'd_model=128&base=500000'
    """
    defaults = RopeParams(d_model=params.d_model)
    parts = [f"d_model={params.d_model}"]
    # Every field but d_model, in the dataclass's order: the URL cannot drift from the params.
    for name in (f.name for f in dataclasses.fields(RopeParams)[1:]):
        value = getattr(params, name)
        if value is None or value == getattr(defaults, name):
            continue
        if isinstance(value, tuple):
            text = ",".join(_number_text(v) for v in value)
        elif isinstance(value, bool):
            text = str(value).lower()
        elif isinstance(value, float):
            text = _number_text(value)
        else:
            text = str(value)
        parts.append(f"{name}={text}")
    return "&".join(parts)


def _number_text(value: float) -> str:
    """The shortest text that reads back as the same float: ``500000``, ``0.25``, ``1e-05``."""
    return str(int(value)) if value.is_integer() and abs(value) < 1e16 else repr(value)


def _runtimes(params: RopeParams) -> list[str]:
    """The runtimes whose recipe serves this rope (llama.cpp has no dynamic scaling, …)."""
    served: list[str] = []
    for runtime in RUNTIMES:
        try:
            recipes.check(dataclasses.replace(params, recipe=runtime))
        except PosencError:
            continue
        served.append(runtime)
    return served


def urls(params: RopeParams, table_rows: int, verify_rows: int) -> dict[str, str]:
    given = query(params)
    rows, checked = f"seq_len={table_rows}", f"seq_len={verify_rows}"
    urls: dict[str, str] = {}
    if table_rows:
        urls["table"] = f"/v1/rope/table?{given}&{rows}&format=npy"
        urls["table_framework"] = f"/v1/rope/table?{given}&recipe=framework&{rows}&format=npy"
        for runtime in _runtimes(params):
            ported = query(ggml.as_converted(params)) if runtime == "ggml" else given
            urls[f"table_{runtime}"] = f"/v1/rope/table?{ported}&recipe={runtime}&{rows}&format=npy"
        urls["alias_table"] = f"/v1/table?scheme=rope&{given}&{rows}&format=npy"
        urls["alias_table_framework"] = (
            f"/v1/table?scheme=rope&{given}&recipe=framework&{rows}&format=npy"
        )
    if verify_rows:
        urls["verify"] = f"/v1/rope/verify?{given}&{checked}"
        urls["alias_verify"] = f"/v1/verify?scheme=rope&{given}&{checked}"
    return urls

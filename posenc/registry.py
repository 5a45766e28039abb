"""The registry: every scheme's declaration (:class:`posenc.declare.Scheme`), one entry each.

This is the only list of schemes. Everything else — the HTTP operations, ``/v1/schemes``, the
OpenAPI document, the page's controls, the contract tests — is derived from these entries, so
adding a scheme is its package under :mod:`posenc.schemes` and one entry here.
"""

from __future__ import annotations

from posenc.declare import Scheme
from posenc.errors import ParameterError
from posenc.schemes import alibi, baselines, grid, rope, sinusoidal, t5

SCHEMES: tuple[Scheme, ...] = (
    sinusoidal.declaration,
    rope.declaration,
    alibi.declaration,
    t5.declaration,
    grid.sinusoidal2d,
    grid.sinusoidal3d,
    baselines.index,
    baselines.normalized,
    baselines.binary,
)

# The scheme the older form /v1/{endpoint} (no ?scheme=) has always meant.
DEFAULT = SCHEMES[0].name


def by_name(schemes: tuple[Scheme, ...] = SCHEMES) -> dict[str, Scheme]:
    return {scheme.name: scheme for scheme in schemes}


def get(name: str, schemes: tuple[Scheme, ...] = SCHEMES) -> Scheme:
    found = by_name(schemes).get(name)
    if found is None:
        known = ", ".join(scheme.name for scheme in schemes)
        raise ParameterError("scheme", f"must be one of {known}, got {name!r}")
    return found

"""A runtime's ropes held to a model's, layer by layer (a GGUF file's, an ONNX model's): the
model's rope at each layer, read from what ``POST /v1/rope/config`` answers for its config, and
the findings as they are gathered, each with the layers it shows at."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from posenc.schemes.rope.params import RopeParams

# A finding: its kind, what it says, and its evidence.
Found = tuple[str, str, dict[str, Any]]


def params_of(canonical: Mapping[str, Any]) -> RopeParams:
    """The parameters a rope's canonical dict states (as answers and JSON bodies give them:
    lists where the dataclass holds tuples)."""
    given: dict[str, Any] = {
        k: tuple(v) if isinstance(v, list) else v for k, v in canonical.items()
    }
    return RopeParams(**given)


def per_layer(model: Mapping[str, Any], n_layer: int) -> list[dict[str, Any] | None]:
    """The model's rope (an item of its config answer's ``ropes``) at each of ``n_layer``
    layers; None where no rope turns. ``n_layer`` is bounded by the caller."""
    layers: list[dict[str, Any] | None] = [None] * n_layer
    for rope in model["ropes"]:
        for il in rope["layers"] if rope["layers"] is not None else range(n_layer):
            if 0 <= il < n_layer:
                layers[il] = rope
    return layers


class Findings:
    """Findings by (kind, detail), each with the layers it shows at."""

    def __init__(self) -> None:
        self._found: dict[tuple[str, str], tuple[dict[str, Any], set[int]]] = {}

    def add(self, layers: Iterable[int], found: Found) -> None:
        kind, detail, evidence = found
        entry = {"kind": kind, "detail": detail, "evidence": evidence}
        self._found.setdefault((kind, detail), (entry, set()))[1].update(layers)

    def listed(self) -> list[dict[str, Any]]:
        return [{**entry, "layers": sorted(layers)} for entry, layers in self._found.values()]

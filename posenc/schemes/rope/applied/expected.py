"""The rope a kernel should have applied: the query's parameters (as for ``GET
/v1/rope/table``), or what ``POST /v1/rope/config`` says of one layer of the model's
``config.json`` — its rope or none (a NoPE layer), the dimensions it turns, the pairs q and k
turn in (the family's ``apply``), and M-RoPE's sections."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from posenc.errors import InconsistentError
from posenc.schemes.rope.models import config as model_config
from posenc.schemes.rope.models.verdict import params_of
from posenc.schemes.rope.mrope import config as mrope_config
from posenc.schemes.rope.mrope.families import MROPE_FAMILIES, Rotary
from posenc.schemes.rope.mrope.tables import frequency_rows
from posenc.schemes.rope.params import Layout, RopeParams

# The query parameters that say where the rope sits, not what it is.
PLACING = ("layer", "head_dim", "token_axis", "offset", "rotary_offset")
# RopeParams' fields a query does not state here: every recipe is tried, none is assumed.
UNSTATED = ("recipe", "framework_precision", "n_ctx")


@dataclass(frozen=True)
class Expected:
    """What the kernel should do to one head: turn dimensions ``rotary_offset …`` by
    ``params`` (none where ``params`` is None) in ``pairs``, by −θ where ``reversed``, the
    pairs of the input written to ``pairs`` of the output where ``relaid`` (DeepSeek's
    interleaved q/k against a rotate_half cache), each frequency turned by the id its M-RoPE
    section names."""

    params: RopeParams | None
    layer: int | None
    rotary_offset: int
    pairs: Layout
    reversed: bool = False
    relaid: bool = False
    mrope: tuple[Rotary, tuple[int, ...]] | None = None
    head_dim: int | None = None

    @property
    def width(self) -> int:
        return 0 if self.params is None else self.params.d_model

    def id_rows(self) -> npt.NDArray[np.intp]:
        """Which of M-RoPE's three ids turns each pair (all 0: one id a token)."""
        half = self.width // 2
        if self.mrope is None:
            return np.zeros(half, np.intp)
        rotary, section = self.mrope
        return frequency_rows(rotary, section, half)

    def describe(self) -> dict[str, Any]:
        params = None
        if self.params is not None:
            fields = dataclasses.asdict(self.params)
            params = {k: v for k, v in fields.items() if v is not None and k not in UNSTATED}
        apply = "interleaved_to_rotate_half" if self.relaid else None
        return {
            "params": params,
            "layer": self.layer,
            "rotary_offset": self.rotary_offset,
            "pairs": self.pairs,
            "apply": "reversed" if self.reversed else apply,
            "mrope": None
            if self.mrope is None
            else {"rotary": self.mrope[0], "section": list(self.mrope[1])},
        }


def from_query(query: Mapping[str, Any]) -> Expected:
    """The rope the query states (``d_model`` required, every other parameter as for
    ``table``), at ``rotary_offset``."""
    values = {k: v for k, v in query.items() if k not in PLACING}
    if "d_model" not in values:
        raise InconsistentError(
            "d_model", "is required without a config part: the rotated width of the rope"
        )
    params = params_of(values)
    return Expected(params, None, int(query.get("rotary_offset", 0)), params.layout)


def from_config(config: Any, query: Mapping[str, Any]) -> Expected:
    """What ``/v1/rope/config`` says of layer ``query["layer"]`` (default 0) of ``config``."""
    stated = [k for k in query if k not in PLACING]
    if stated:
        raise InconsistentError(
            stated[0], "comes from the config part when one is sent: give one or the other"
        )
    if "rotary_offset" in query:
        raise InconsistentError(
            "rotary_offset", "comes from the config part when one is sent: give one or the other"
        )
    if not isinstance(config, Mapping):
        raise InconsistentError("config", "must be a JSON object, a model's config.json")
    layer = int(query.get("layer", 0))
    model = model_config.read(config)
    count = model.num_hidden_layers
    if count is not None and layer >= count:
        raise InconsistentError(
            "layer", f"the model has {count} layers (0 … {count - 1}), got {layer}"
        )
    mrope = None
    if config.get("model_type") in MROPE_FAMILIES:
        read = mrope_config.read(config, where="", ids=False)
        mrope = (read.family.rotary, read.section)
    if layer in model.nope_layers:
        return Expected(None, layer, 0, "split", head_dim=model.head_dim)
    ropes = [rope for rope in model.ropes if rope.layers is None or layer in rope.layers]
    if len(ropes) != 1:
        raise InconsistentError(
            "layer", f"the config does not say which of its {len(model.ropes)} ropes layer "
            f"{layer} applies (it states no layer count)"
        )  # fmt: skip
    (rope,) = ropes
    pairs: Layout = "interleaved" if rope.apply == "interleaved" else rope.params.layout
    relaid = rope.apply == "interleaved_to_rotate_half"
    return Expected(
        rope.params,
        layer,
        rope.rotary_offset,
        pairs,
        reversed=rope.apply == "reversed",
        relaid=relaid,
        mrope=mrope,
        head_dim=model.head_dim,
    )

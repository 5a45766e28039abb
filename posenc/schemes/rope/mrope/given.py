"""``POST /v1/rope/encode`` with ``position_ids``: the cos/sin a multimodal model applies for
``(3, n)`` ids the client computed, under the ``mrope`` that ``/v1/rope/config`` answers.

Only the two members of that ``mrope`` that the table depends on are read: its ``section`` and
its ``rotary`` rule (:data:`~.families.Rotary`); the rest (merge sizes, clocks) place tokens,
which the ids already did.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast, get_args

from posenc.declare import Array, Ids, Positions
from posenc.errors import InconsistentError, NotApplicableError, ParameterError
from posenc.schemes.rope.models.values import MAX_SECTION, sections
from posenc.schemes.rope.mrope import tables
from posenc.schemes.rope.mrope.config import check_cover
from posenc.schemes.rope.mrope.families import Rotary
from posenc.schemes.rope.params import RopeParams

# ERNIE-VL's image tokens turn by frequencies permuted for its sections: not answered (its
# text tokens' rope is, by /v1/rope/config).
_ROTARIES = tuple(rule for rule in get_args(Rotary) if rule != "ernie")

SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "the model's mrope, as POST /v1/rope/config answers it: the table reads "
    "its section and rotary rule (its other members are ignored)",
    "properties": {
        "section": {
            "type": "array",
            "items": {"type": "integer", "minimum": 1, "maximum": MAX_SECTION},
            "minItems": 3,
            "maxItems": 3,
            "description": "how many frequencies the temporal, height and width ids turn",
        },
        "rotary": {
            "type": "string",
            "enum": list(_ROTARIES),
            "description": "chunked: in that order; interleaved: Qwen3-VL's T H W T H W …; "
            "glm_pairs: chunked, the cache's pairs repeated (GLM-4V)",
        },
    },
    "required": ["section", "rotary"],
}


@dataclass(frozen=True)
class MRopeGiven:
    section: tuple[int, ...]
    rotary: Rotary

    def describe(self) -> dict[str, Any]:
        return {"section": list(self.section), "rotary": self.rotary}


def read(params: RopeParams, given: Any, component: str) -> MRopeGiven:
    """The ``mrope`` member, checked against the rope it splits."""
    if not isinstance(given, Mapping):
        raise ParameterError(
            "mrope", "is required with position_ids: the model's mrope, as /v1/rope/config says"
        )
    section = sections(given.get("section"), "mrope.section")
    rotary = given.get("rotary")
    if rotary not in _ROTARIES:
        raise ParameterError("mrope.rotary", f"must be one of {', '.join(_ROTARIES)}")
    if component == "inv_freq":
        raise InconsistentError(
            "component", "inv_freq does not depend on the ids: GET /v1/rope/encode gives it"
        )
    if rotary == "glm_pairs" and params.layout != "interleaved":
        raise InconsistentError(
            "mrope.rotary", "glm_pairs is GLM-4V's, whose cache is laid out interleaved"
        )
    _check_runtime(params, cast(Rotary, rotary))
    if rotary != "interleaved" or params.recipe == "ggml":
        # ggml's sectors wrap around the sections' sum: the same only where they cover the head
        check_cover(section, params.d_model, "mrope.section")
    return MRopeGiven(section, cast(Rotary, rotary))


def _check_runtime(params: RopeParams, rotary: Rotary) -> None:
    """llama.cpp turns M-RoPE ids as mode MROPE (chunked) or IMROPE (interleaved); mlx-lm's
    ``mrope`` rope turns text positions only."""
    if params.recipe == "mlx":
        raise NotApplicableError(
            "recipe", "rope", "mlx-lm's mrope rope turns text positions only, not position ids"
        )
    if params.recipe == "ggml" and rotary == "glm_pairs":
        raise NotApplicableError(
            "recipe",
            "rope",
            "recipe=ggml serves llama.cpp's MROPE (chunked) and IMROPE "
            "(interleaved) ids, not GLM-4V's pairs",
        )


def encode(
    params: RopeParams, ids: Positions, given: MRopeGiven, dtype: str, component: str
) -> Array:
    return tables.encode(params, ids, given.rotary, given.section, dtype, component)


IDS = Ids(3, "mrope", SCHEMA, read, encode, tables.cost)

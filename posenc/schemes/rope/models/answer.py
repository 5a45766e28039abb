"""What ``POST /v1/rope/config`` answers: a model's rope (read by :mod:`.config`), the
canonical GET of its table and verify for as many rows as the service admits, and the OpenAPI
schemas of the body and the answer."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping
from typing import Any

from posenc.cost import Cost
from posenc.declare import Limits
from posenc.errors import ParameterError
from posenc.numerics import costs
from posenc.schemes.rope import maths
from posenc.schemes.rope.models.config import LayerRope, read
from posenc.schemes.rope.models.urls import urls
from posenc.schemes.rope.mrope import config as mrope_config
from posenc.schemes.rope.mrope.families import MROPE_FAMILIES
from posenc.schemes.rope.params import RopeParams
from posenc.schemes.rope.verify import verify_rope_cost


def servable_rows(limits: Limits) -> Callable[[RopeParams, int, bool], int]:
    """The most rows, up to ``wanted``, of a cos/sin table served as ``.npy`` (or of its
    verify) that ``limits`` admit, 0 when not even one row is: the estimate
    ``app/serving.py`` and ``app/handlers.py`` make of those requests, with its values, work
    and bytes held to the limits as ``app/admission.decide`` holds them."""
    return functools.partial(_servable, limits)


@functools.lru_cache(maxsize=1024)
def _servable(limits: Limits, params: RopeParams, wanted: int, verify: bool) -> int:
    # A bisection over the costs (a few dozen of them): remembered, since the same models are
    # asked about again and again, and their rows are a number.
    framework = dataclasses.replace(params, recipe="framework")

    def fits(n: int) -> bool:
        values = 2 * n * params.d_model
        # The exact table and the framework's: the links offer both.
        cost = costs.larger(
            maths.cost(params, n, "float32", "cos_sin"),
            maths.cost(framework, n, "float32", "cos_sin"),
        )
        # verify adds its checks; a table its serialisation (a header, then a view).
        cost = cost + (verify_rope_cost(params, n) if verify else Cost(2**16, values))
        return (
            values <= limits.max_values
            and cost.work <= limits.max_work
            and cost.bytes <= limits.max_bytes
        )

    if not fits(1):
        return 0
    low, high = 1, wanted  # costs grow with the rows: the largest that fits, by bisection
    while low < high:
        middle = (low + high + 1) // 2
        low, high = (middle, high) if fits(middle) else (low, middle - 1)
    return low


def describe(
    config: Mapping[str, Any], servable: Callable[[RopeParams, int, bool], int]
) -> dict[str, Any]:
    """What ``POST /v1/rope/config`` answers: every rope of the model (:func:`.config.read`)
    with the layers that apply it, its canonical parameters and the cacheable GETs of its table
    (as ``.npy``) and verify, exact and as the framework computes it, for
    ``max_position_embeddings`` positions (else 4096) — or for fewer where the service would
    refuse that many: ``servable(params, n, verify)`` is the most rows up to ``n`` it serves
    (Llama 3.1's 131072 × 128 cos/sin are 2^25 values, over the default limit of 2^24;
    verifying them all is more work than one request may do), and a URL the service would
    refuse even for one row is left out. A model with one rope also states it at the top, as
    answers did before models with several were read."""
    if not isinstance(config, Mapping):
        raise ParameterError("body", f"must be a JSON object, got {type(config).__name__}")
    mrope = None
    if config.get("model_type") in MROPE_FAMILIES:
        mrope = mrope_config.read(config, where="", ids=False)
    model = read(config)  # which also holds the sections to the text rope's width
    wanted = model.max_position_embeddings or 4096
    ropes = [_rope(rope, wanted, servable) for rope in model.ropes]
    answer: dict[str, Any] = {
        "scheme": "rope",
        "model_type": model.model_type,
        "text_config": model.text_config or None,
        "num_hidden_layers": model.num_hidden_layers,
        "head_dim": model.head_dim,
        "max_position_embeddings": model.max_position_embeddings,
        "ropes": ropes,
        "nope_layers": list(model.nope_layers),
        "mrope": None if mrope is None else mrope.describe(),
    }
    if len(ropes) == 1:
        answer.update({key: ropes[0][key] for key in _SINGLE})
    return answer


# What a single-rope answer repeats at its top.
_SINGLE = ("params", "rotary_dim", "partial_rotary_factor", "seq_len", "urls")


def _rope(
    rope: LayerRope, wanted: int, servable: Callable[[RopeParams, int, bool], int]
) -> dict[str, Any]:
    params = rope.params
    table_rows, verify_rows = servable(params, wanted, False), servable(params, wanted, True)
    return {
        "layer_types": list(rope.layer_types),
        "layers": None if rope.layers is None else list(rope.layers),
        "params": {k: v for k, v in dataclasses.asdict(params).items() if v is not None},
        "rotary_dim": params.d_model if params.rotary_pairs is None else 2 * params.rotary_pairs,
        "rotary_offset": rope.rotary_offset,
        "partial_rotary_factor": rope.partial_rotary_factor,
        "apply": rope.apply,
        "query_scaling": None if rope.query_scaling is None else dict(rope.query_scaling),
        "seq_len": {"table": table_rows, "verify": verify_rows},
        "urls": urls(params, table_rows, verify_rows),
    }

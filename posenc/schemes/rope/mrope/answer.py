"""``POST /v1/rope/positions``: a multimodal model's config and a layout of text, images and
videos → the ``(3, n)`` position ids and the decode delta per sequence, and on request the
cos/sin the model applies for them; ``…/positions/verify``: a client's ids, diagnosed."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from posenc.cost import Cost
from posenc.declare import Limits, Sized
from posenc.errors import (
    InconsistentError,
    LimitError,
    NotApplicableError,
    ParameterError,
    PosencError,
    against_model_type,
)
from posenc.numerics.costs import SCRATCH
from posenc.schemes.rope import maths
from posenc.schemes.rope.models import config as rope_config
from posenc.schemes.rope.mrope import tables
from posenc.schemes.rope.mrope.config import MRope, check_widths, read
from posenc.schemes.rope.mrope.diagnose import Expected, diagnose
from posenc.schemes.rope.mrope.layout import Run, check_size, runs_of
from posenc.schemes.rope.mrope.positions import sequence_ids
from posenc.schemes.rope.params import RopeParams

# Per id: int64 (8 bytes) held up to six times while a video's frames are assembled, its JSON
# text (at most 10 digits and a comma), and the work of writing both (measured ≈ 10 ns;
# counted at 25). Per run: its Python objects and the per-run overhead of building its ids.
_BYTES_PER_ID = 6 * 8 + 11
_WORK_PER_ID = 25
_BYTES_PER_RUN = 2048
_WORK_PER_RUN = 30_000
# Per table value: its JSON text (at most 25 characters) and writing it (≈ 30 ns).
_BYTES_PER_VALUE = 25
_WORK_PER_VALUE = 40


def _sequences(body: Mapping[str, Any]) -> tuple[str, Sequence[Any]]:
    if ("segments" in body) == ("sequences" in body):
        raise InconsistentError("segments", "give segments (one sequence) or sequences, not both")
    if "segments" in body:
        return "segments", [body["segments"]]
    if not body["sequences"]:
        raise ParameterError("sequences", "must hold at least one sequence")
    return "sequences", body["sequences"]


def _read(body: Mapping[str, Any], max_values: int) -> tuple[MRope, str, list[list[Run]]]:
    mrope = read(body["config"])
    key, sequences = _sequences(body)
    runs = [
        runs_of(segments, mrope.vision, key if key == "segments" else f"sequences[{index}]")
        for index, segments in enumerate(sequences)
    ]
    total = sum(check_size(sequence, max_values, key) for sequence in runs)
    if 3 * total > max_values:
        raise LimitError(
            key, f"{total} tokens give {3 * total} ids, over the limit of {max_values}"
        )
    return mrope, key, runs


def _text_rope(body: Mapping[str, Any], mrope: MRope) -> RopeParams | None:
    """The rope the table is asked of (None: no table asked): the config's, one for every
    layer, in the recipe asked."""
    if "component" not in body:
        for key in ("recipe", "dtype"):
            if key in body:
                raise InconsistentError(key, "applies to a table: give component")
        return None
    try:
        model = rope_config.read(body["config"])  # its sections taken out, and checked
    except PosencError as error:
        raise _in_config(error) from None
    if len(model.ropes) != 1:
        raise InconsistentError(
            "config.layer_types", f"the model has {len(model.ropes)} ropes: not answered"
        )
    params = model.ropes[0].params
    check_widths(mrope, [params.d_model])
    return dataclasses.replace(params, recipe=body.get("recipe", "exact"))


def _in_config(error: PosencError) -> PosencError:
    """The reader names fields of a config.json; here it sits at ``config``."""
    if not isinstance(error, ParameterError) or isinstance(error, NotApplicableError):
        return error
    moved = type(error)(f"config.{error.param}", error.message)
    return against_model_type(moved)


def _given(params: RopeParams) -> dict[str, Any]:
    """The text rope's parameters, as /v1/rope/config states them."""
    return {k: v for k, v in dataclasses.asdict(params).items() if v is not None}


def size(body: Mapping[str, Any], limits: Limits) -> Sized:
    """What the answer costs, from the layout's numbers alone."""
    mrope, key, runs = _read(body, limits.max_values)
    tokens = [sum(run.tokens for run in sequence) for sequence in runs]
    ids, count = 3 * sum(tokens), sum(len(sequence) for sequence in runs)
    cost = Cost(ids * _BYTES_PER_ID + count * _BYTES_PER_RUN + SCRATCH, ids * _WORK_PER_ID)
    cost += Cost(0, count * _WORK_PER_RUN)
    params = _text_rope(body, mrope)
    if params is None:
        return Sized(cost, ids, key)
    dtype, component = body.get("dtype", "float32"), body["component"]
    # Every sequence's table is held until the answer is written; the working memory of
    # computing one is let go before the next.
    values, transient = 0, Cost(0, 0)
    for n in tokens:
        shape = maths.shape(params, n, component)
        values += math.prod(shape)
        transient = transient.peak(tables.cost(params, n, dtype, component))
    held = values * np.dtype(dtype).itemsize
    cost += transient + Cost(held + values * _BYTES_PER_VALUE, values * _WORK_PER_VALUE)
    return Sized(cost, ids + values, key)


def positions(body: Mapping[str, Any], limits: Limits) -> dict[str, Any]:
    mrope, key, runs = _read(body, limits.max_values)
    params = _text_rope(body, mrope)
    answers = []
    for sequence in runs:
        ids, delta = sequence_ids(sequence, mrope.family)
        one = {"tokens": ids.shape[1], "position_ids": ids, "next_position_delta": delta}
        if params is not None:
            family, dtype = mrope.family, body.get("dtype", "float32")
            one["table"] = tables.encode(
                params, ids, family.rotary, mrope.section, dtype, body["component"]
            )
        answers.append(one)
    answer: dict[str, Any] = {
        "scheme": "rope",
        "model_type": mrope.model_type,
        "mrope": mrope.describe(),
        "params": None if params is None else _given(params),
    }
    # One sequence's ids stand at the top, several in a list: each array once.
    answer.update(answers[0] if key == "segments" else {"sequences": answers})
    return answer


def positions_array(
    body: Mapping[str, Any], limits: Limits
) -> tuple[npt.NDArray[np.int64], dict[str, str]]:
    """One sequence's ids alone, as ``format=npy`` sends them: int64 ``(3, n)``, the decode
    delta in a header."""
    if "sequences" in body:
        raise InconsistentError("format", "npy holds one sequence's ids: JSON holds several")
    if "component" in body:
        raise InconsistentError("format", "npy holds the ids alone: JSON holds their table")
    mrope, _, runs = _read(body, limits.max_values)
    ids, delta = sequence_ids(runs[0], mrope.family)
    return ids, {"X-Next-Position-Delta": str(delta)}


# A diagnosis rebuilds the ids under each fault it knows (≈ ten arrays of the layout's ids,
# each written in ≈ 10 ns an id and held at once while compared).
_DIAGNOSIS_BYTES_PER_ID = 10 * 8 + 40  # and the client's ids as Python ints, parsed
_DIAGNOSIS_WORK_PER_ID = 200
_DIAGNOSIS_WORK_PER_RUN = 12 * _WORK_PER_RUN  # every candidate rebuilds every run


def _decode_steps(body: Mapping[str, Any], key: str, tokens: int, max_values: int) -> int:
    steps = int(body.get("decode_steps", 0))
    if steps and key == "sequences":
        raise InconsistentError("decode_steps", "applies to one sequence (segments)")
    if 3 * (tokens + steps) > max_values:
        raise LimitError("decode_steps", f"{tokens + steps} tokens' ids are over {max_values}")
    return steps


def _tokens(runs: list[list[Run]]) -> int:
    return sum(run.tokens for sequence in runs for run in sequence)


def verify_size(body: Mapping[str, Any], limits: Limits) -> Sized:
    _, key, runs = _read(body, limits.max_values)
    tokens = _tokens(runs)
    ids = 3 * (tokens + _decode_steps(body, key, tokens, limits.max_values))
    count = sum(len(sequence) for sequence in runs)
    cost = Cost(
        ids * _DIAGNOSIS_BYTES_PER_ID + count * _BYTES_PER_RUN + SCRATCH,
        ids * _DIAGNOSIS_WORK_PER_ID + count * _DIAGNOSIS_WORK_PER_RUN,
    )
    return Sized(cost, 0, key)


def verify(body: Mapping[str, Any], limits: Limits) -> dict[str, Any]:
    mrope, key, runs = _read(body, limits.max_values)
    steps = _decode_steps(body, key, _tokens(runs), limits.max_values)
    expected = Expected(mrope.family, runs, steps)
    given = body["position_ids"]
    if given and isinstance(given[0], list) and len({len(row) for row in given}) > 1:
        raise InconsistentError("position_ids", "its rows must be equally long")
    ids = np.asarray(given, dtype=np.int64)
    if ids.ndim == 2 and ids.shape[0] == 2:
        raise InconsistentError("position_ids", "must be (3, n) ids, or (n,) of one row")
    return {
        "scheme": "rope",
        "model_type": mrope.model_type,
        "mrope": mrope.describe(),
        **diagnose(expected, ids),
    }

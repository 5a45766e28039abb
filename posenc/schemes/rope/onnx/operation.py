"""``POST /v1/rope/onnx`` as an operation: what it costs, and its answer for a model's graph
alone (:mod:`.answer`) or beside the model's config.json (:mod:`.conformance`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from posenc.cost import Cost
from posenc.declare import Limits, Sized, Upload
from posenc.errors import ParameterError
from posenc.schemes.rope.onnx import answer, conformance, genai, reader, rows

# Work units (≈ ns) per body byte: a graph of the smallest fields (empty nodes, 2 bytes each)
# or of the smallest kept nodes (11 bytes each) is read at 0.5–0.8 µs a byte (measured),
# capped by the fields and nodes the reader walks at most (≈ 0.55 s measured at either cap).
WORK_PER_BODY_BYTE = 1000
WALK_WORK = 10**9
# Bytes of Python objects the reader keeps per body byte (the densest: 56 measured for a kept
# node's attribute of 2^19 unpacked ints, the fields it holds while reading one; 29 for 2^15
# Identity nodes of 11 bytes), capped by the most it keeps.
BYTES_PER_BODY_BYTE = 64
WALK_BYTES = 64 * 2**20
# Measuring the ropes, one at a time: a rope's sampled rows in about a dozen float64 arrays
# (stored, lengths, angles, the exact and float32 recipes' rows; ≈ 140 bytes a value
# measured), ≈ 1 µs a value in all (the exact rows' angle reduction is most of it).
ROPE_BYTES = 160 * answer.MAX_ROPE_VALUES
ROPE_WORK = 1000 * answer.MAX_VALUES
ANSWER_BYTES = 8 * 2**20


def size(given: Upload, limits: Limits) -> Sized:
    """What reading ``given`` and answering costs beyond the body itself, from its length."""
    model = given.file("model")
    length = 0 if model is None else len(model.data)
    walk = Cost(
        min(BYTES_PER_BODY_BYTE * length, WALK_BYTES), min(WORK_PER_BODY_BYTE * length, WALK_WORK)
    )
    ropes = Cost(ROPE_BYTES + ANSWER_BYTES, ROPE_WORK)
    return Sized(walk + ropes, 0, "model")


def _object(given: Upload, name: str) -> Mapping[str, Any] | None:
    value = given.parts.get(name)
    if value is not None and not isinstance(value, Mapping):
        raise ParameterError(name, f"must be a JSON object, got {type(value).__name__}")
    return value


def handle(given: Upload, limits: Limits) -> dict[str, Any]:
    """``POST /v1/rope/onnx``: the ropes of the graph in ``given``, measured from the rows its
    caches hold (asking for the external ranges that hold them), and checked against the
    model's config.json where it is given."""
    stated = genai.read(_object(given, "genai_config"))
    config = _object(given, "config")
    # The HTTP layer refuses a body without it, naming it; the command line sends its own.
    (sent,) = given.files["model"]
    model = reader.read(sent.data)
    found, attention = answer.ropes(model, stated)
    n_layer = answer.layer_count(stated, found, attention)
    external = given.files.get("external", ())
    parts = rows.Parts(external)
    missing = rows.missing(answer.needed(found), parts)
    if missing:
        raise rows.refuse(missing, external)
    described = None if config is None else conformance.describe(config, limits)
    hint = None
    if described is not None:
        n_layer = conformance.layer_count(n_layer, described)
        hint = conformance.hint(described, n_layer)
    answer.measure(model, found, parts, hint)
    result = answer.answer_of(model, stated, found, attention)
    if described is None:
        return result
    return conformance.check(result, found, described, n_layer or 0)

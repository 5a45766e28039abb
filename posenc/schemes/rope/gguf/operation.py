"""``POST /v1/rope/gguf`` as an operation: what it costs, and its answer for a file's prefix
alone (:mod:`.answer`) or beside the model's config.json (:mod:`.conformance`)."""

from __future__ import annotations

from typing import Any

from posenc.cost import Cost
from posenc.declare import Limits, Sized, Upload
from posenc.schemes.rope import maths
from posenc.schemes.rope.gguf import conformance, reader
from posenc.schemes.rope.gguf.answer import answer
from posenc.schemes.rope.params import RopeParams

# What an answer holds at most, whatever the file: two distinct calls (full and sliding layers),
# each with up to 32768 factors as Python floats and JSON, 4096 layer numbers, 256 keys.
ANSWER_BYTES = 8 * 2**20
# Work units (≈ ns) per body byte: stepping over a prefix of nothing but empty strings (8 bytes
# each) is the slowest a body can be read, ≈ 160 ns a string.
WORK_PER_BODY_BYTE = 25


def _noise_cost() -> Cost:
    """Beside a config, each of up to two ropes measures its recipe noise: three tables (exact,
    framework, ggml) of NOISE_POSITIONS rows at the widest head a file may state."""
    widest = RopeParams(d_model=65536)  # rules.py refuses a wider rope
    one = maths.cost(widest, conformance.NOISE_POSITIONS, "float64", "cos_sin")
    return Cost(one.bytes, 2 * 3 * one.work)


NOISE_COST = _noise_cost()


def size(given: Upload, limits: Limits) -> Sized:
    """What reading ``given`` and answering costs beyond the body itself, from its length (and,
    beside a config, the recipe noise of each rope)."""
    cost = Cost(ANSWER_BYTES, WORK_PER_BODY_BYTE * len(given.data))
    if "config" in given.parts:
        cost = cost + NOISE_COST
    return Sized(cost, 0, "gguf")


def handle(given: Upload, limits: Limits) -> dict[str, Any]:
    """``POST /v1/rope/gguf``: the header of the prefix in ``given``, under llama.cpp's rules."""
    header = reader.read(given.data, limits.max_upload_bytes)
    if "config" in given.parts:
        return conformance.check(header, given.parts["config"], given.query.get("n_ctx"), limits)
    return answer(header, given.query.get("n_ctx"))

"""schemathesis hooks for the contract run: the one rule for refusing schema-valid requests,
and the cross-parameter rules that a JSON schema of separate query parameters cannot state.

Each rule below is written in its parameter's description in the OpenAPI document; the hooks
teach them to the generator (by repairing generated queries) so that positive data is data the
service promises to serve. They are stated here independently of the service's own code.
"""

from __future__ import annotations

from typing import Any

import schemathesis
from schemathesis import Case

# Too large (a limit bounds a sum or product of parameters), two parameters that break a rule
# tying them, stated in their descriptions, or a file that keeps what is read in another file
# not sent (an ONNX graph's external data, a 422 that names the bytes to send): none is
# expressible in the schema.
ALLOWED_REFUSALS = frozenset(
    {
        "urn:posenc:problem:limit-exceeded",
        "urn:posenc:problem:inconsistent-parameters",
        "urn:posenc:problem:external-data-needed",
    }
)


# The HTTP server refuses a request line longer than this with a 400 before the service sees
# it (uvicorn's h11 and httptools both stop near 16 KiB; nginx at 8 KiB): a URL length is a
# transport limit no schema can state. Schema-valid longrope queries reach it (d_model/2
# factors per list), so a 400 is allowed for them, and only for them.
MAX_URL_BYTES = 8192


@schemathesis.check
def refuses_valid_data_only_when_too_large_or_busy(
    ctx: Any, response: Any, case: Case[Any]
) -> None:
    meta = case.meta
    if meta is None or not meta.generation.mode.is_positive:
        return
    if response.status_code == 400:
        if len(response.request.url) <= MAX_URL_BYTES:
            raise AssertionError(f"schema-valid request refused with 400: {response.text[:200]}")
        return
    if response.status_code != 422:
        return
    problem = response.json()
    if problem.get("type") not in ALLOWED_REFUSALS:
        raise AssertionError(f"schema-valid request refused: {problem.get('detail')}")


@schemathesis.hook
def map_query(ctx: Any, query: dict[str, Any] | None) -> dict[str, Any] | None:
    if not query:
        return query
    try:
        return _consistent(ctx.operation.path, query)
    except (TypeError, ValueError, KeyError):
        return query  # negative data: leave it as generated


def _consistent(path: str, query: dict[str, Any]) -> dict[str, Any]:
    scheme = path.split("/")[2]
    fixed = dict(query)
    fmt = fixed.get("format")
    if fmt != "png":  # width and height shape a picture only
        fixed.pop("width", None)
        fixed.pop("height", None)
    if scheme == "sinusoidal":
        convention = fixed.get("convention", "vaswani")
        if convention != "vaswani":
            fixed.pop("layout", None)  # tensor2tensor and fairseq fix it
        if convention != "fairseq":
            fixed.pop("padding_idx", None)
    if scheme == "rope":
        _rope(fixed)
    if scheme == "t5":
        bidirectional = fixed.get("bidirectional", True) not in (False, "false")
        buckets = int(fixed.get("num_buckets", 32))
        if bidirectional and buckets < 4:
            fixed["num_buckets"] = buckets = 4
        exact = (buckets // 2 if bidirectional else buckets) // 2
        if int(fixed.get("max_distance", 128)) <= exact:
            fixed["max_distance"] = exact + 1
    mae = fixed.get("convention", "mae") == "mae"
    if scheme in ("sinusoidal2d", "sinusoidal3d") and mae and "d_model" in fixed:
        axes = 2 if scheme == "sinusoidal2d" else 3
        d_model = int(fixed.get("d_model", 2 * axes))
        fixed["d_model"] = max(2 * axes, d_model - d_model % (2 * axes))
    if "vector" in fixed and "d_model" in fixed:
        # d_model numbers, and at most 4096 of them (the vector's maxItems): a rope with a
        # vector is at most 4096 wide. (Repeated items once kept only the last, which hid it.)
        fixed["d_model"] = min(int(fixed["d_model"]), 4096)
        fixed["vector"] = [1.0] * int(fixed["d_model"])
    return fixed


# Which rope parameters each scaling takes, and which it needs (transformers' rules).
_TAKES = {
    "none": set(),
    "linear": {"factor"},
    "dynamic": {"factor", "original_max_position_embeddings"},
    "yarn": {
        "factor",
        "original_max_position_embeddings",
        "beta_fast",
        "beta_slow",
        "attention_factor",
        "mscale",
        "mscale_all_dim",
        "truncate",
    },
    "llama3": {"factor", "original_max_position_embeddings", "low_freq_factor", "high_freq_factor"},
    "longrope": {
        "factor",
        "original_max_position_embeddings",
        "short_factor",
        "long_factor",
        "attention_factor",
    },
}
_NEEDS = {
    "none": set(),
    "linear": {"factor"},
    "dynamic": {"factor", "original_max_position_embeddings"},
    "yarn": {"factor", "original_max_position_embeddings"},
    "llama3": {"factor"},
    "longrope": {"short_factor", "long_factor", "original_max_position_embeddings"},
}


def _rope(fixed: dict[str, Any]) -> None:
    scaling = fixed.get("scaling", "none")
    for name in set().union(*_TAKES.values()) - _TAKES[scaling]:
        fixed.pop(name, None)
    half = int(fixed.get("d_model", 2)) // 2
    for name in _NEEDS[scaling] - set(fixed):
        fixed[name] = 2.0 if "factor" in name else 16
    # Only for a d_model in the schema's range: the negative phase sends others (10^12 once
    # made this list 23 GB, and the kernel's OOM killer took the client).
    for name in ("short_factor", "long_factor"):
        if name in fixed and 1 <= half <= 2**15:
            fixed[name] = [1.0] * half
    if "rotary_pairs" in fixed:  # at most d_model/2: the pairs there are
        fixed["rotary_pairs"] = max(1, min(int(fixed["rotary_pairs"]), half))
    if fixed.get("framework_precision") == "float64" and (
        scaling != "none" or "rotary_pairs" in fixed
    ):
        # RoFormer's float64 table has neither a scaling nor pairs held still.
        fixed.pop("framework_precision")
    if scaling == "llama3":
        low = float(fixed.get("low_freq_factor", 1.0))
        high = float(fixed.get("high_freq_factor", 4.0))
        if high <= low:
            # Swapped, not doubled: both stay within the schema's range (0, 1e6], where a
            # doubled 6e5 was a schema-invalid 1.2e6 (refused, rightly, as about:blank).
            low, high = min(low, high), max(low, high)
            fixed["low_freq_factor"] = low if low < high else high / 2
            fixed["high_freq_factor"] = high

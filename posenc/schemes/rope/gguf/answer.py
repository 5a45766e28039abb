"""What ``POST /v1/rope/gguf`` answers: llama.cpp's rope calls (:mod:`.rules`) as the canonical
parameters of ``/v1/rope/table``, grouped by layer, in the shape of ``/v1/rope/config``'s answer.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from posenc.schemes.rope.gguf import vision
from posenc.schemes.rope.gguf.arches import LLAMA_CPP_SOURCE, LLAMA_CPP_VERSION, Arch
from posenc.schemes.rope.gguf.reader import Header
from posenc.schemes.rope.gguf.rules import Call, Read, calls
from posenc.schemes.rope.recipes.llama_cpp import yarn_growth

_F32 = np.float32
_LAYOUTS: dict[str, str] = {
    "norm": "interleaved",
    "neox": "split",
    "mrope": "split",
    "imrope": "split",
    "vision": "split",
}


_LONG_SHORT = ("rope_factors_long.weight", "rope_factors_short.weight")


def params_of(
    call: Call,
    factors: Mapping[str, Any],
    padded_n_ctx: int,
    mscales: tuple[float, float] | None = None,
) -> dict[str, Any]:
    """The canonical GET parameters of ``/v1/rope/table`` whose ``recipe=ggml`` is ``call``.

    One function, so the mapping follows RopeParams: NORM pairs are ``interleaved``, NEOX
    (and M-RoPE on text positions) ``split``; ``freq_scale ≠ 1`` is ``linear`` with
    ``factor = 1/freq_scale``, or ``yarn`` with ``ext_factor = 1`` (DeepSeek-V2's
    ``yarn_log_multiplier`` as its ``mscale_all_dim``, and ``mscale``); ``rope_freqs`` is
    ``freq_factors`` (its first ``n_dims/2``: ggml reads no more; ones then frozen pairs, Gemma
    4's proportional rope, are ``rotary_pairs``); the long and short factors
    are ``longrope``'s, with the ``n_ctx`` that
    chooses between them (padded to 256 as llama.cpp pads it) and the file's attention factor;
    ``attention_factor`` is otherwise the multiplier of cos and sin where it differs from the
    scaling's own (1, or YaRN's ``1 + 0.1·ln(factor)``).
    """
    params: dict[str, Any] = {
        "d_model": call.n_dims,
        "base": call.freq_base,
        "layout": _LAYOUTS[call.rope_type],
    }
    half = call.n_dims // 2
    scale = _F32(call.freq_scale)
    factor = float(_F32(1) / scale)
    # ggml multiplies cos and sin by attn_factor, and with ext_factor ≠ 0 by
    # 1 + 0.1·ln(1/freq_scale) too (rope_yarn's mscale).
    total = _F32(call.attn_factor)
    if call.ext_factor != 0:
        total = _F32(total * yarn_growth(_F32(1) / scale))
    default = _F32(1)
    both = all(name in factors for name in _LONG_SHORT)
    if call.factors in _LONG_SHORT and both and scale == 1 and call.ext_factor == 0:
        short, long = (factors[name] for name in reversed(_LONG_SHORT))
        params["scaling"] = "longrope"
        params["short_factor"] = [float(x) for x in short[:half]]
        params["long_factor"] = [float(x) for x in long[:half]]
        params["original_max_position_embeddings"] = call.n_ctx_orig
        params["attention_factor"] = float(total)
        params["n_ctx"] = padded_n_ctx
        return params
    if call.ext_factor != 0 and scale != 1:
        params["scaling"] = "yarn"
        params["factor"] = factor
        params["original_max_position_embeddings"] = call.n_ctx_orig
        if call.beta_fast != 32:
            params["beta_fast"] = call.beta_fast
        if call.beta_slow != 1:
            params["beta_slow"] = call.beta_slow
        default = yarn_growth(_F32(factor))
        if mscales is not None:
            params["mscale"], params["mscale_all_dim"] = mscales
            default = total  # the ratio of the two mscales, which both recipes compute
    elif scale != 1:
        params["scaling"] = "linear"
        params["factor"] = factor
    else:
        params["scaling"] = "none"
    if total != default:
        params["attention_factor"] = float(total)
    if call.factors is not None:
        values = [float(x) for x in factors[call.factors][:half]]
        turning = _turning_pairs(values)
        if turning is not None:
            params["rotary_pairs"] = turning
        else:
            params["freq_factors"] = values
    return params


# A factor past RopeParams' largest (1e6) freezes its pair: Gemma 4's converter writes 1e30,
# an angle of ~1e-30 rad per position, below float32's resolution at any context.
_FROZEN = 1e6


def _turning_pairs(factors: list[float]) -> int | None:
    """Gemma 4's proportional rope as the factor tensor states it — ones, then frozen pairs —
    as the rope's ``rotary_pairs``; None for any other factors."""
    turning = next((i for i, f in enumerate(factors) if f > _FROZEN), len(factors))
    frozen = all(f > _FROZEN for f in factors[turning:])
    if turning == len(factors) or not frozen or any(f != 1.0 for f in factors[:turning]):
        return None
    return turning


def answer(header: Header, n_ctx: int | None) -> dict[str, Any]:
    """What ``POST /v1/rope/gguf`` answers for a file's header (a vision projector's, an
    ``mmproj`` file, by :mod:`.vision`)."""
    if header.architecture == "clip":
        return vision.answer(header)
    return answer_of(header, calls(header, n_ctx))


def _ropes(header: Header, read: Read) -> list[dict[str, Any]]:
    """The layers' ropes, grouped by call and what it turns: the attention's first, then the
    other ropes of the same layers (an indexer's)."""
    groups: dict[tuple[Call, tuple[str, ...]], list[int]] = {}
    for il, call in enumerate(read.per_layer):
        if call is not None:
            groups.setdefault((call, read.applies[il]), []).append(il)
    for il, turns in enumerate(read.extras):
        for turn in turns:
            groups.setdefault((turn.call, turn.applies_to), []).append(il)
    ropes = []
    for (call, applies_to), layers in groups.items():
        tensors = [] if call.factors is None else [call.factors]
        ropes.append(
            {
                "layers": layers,
                "rope_type": call.rope_type,
                "applies_to": list(applies_to),
                "params": params_of(call, header.rope_tensors, read.padded_n_ctx, read.mscales),
                "ggml": call.ggml(),
                "read_from": {"keys": list(read.keys), "tensors": tensors},
            }
        )
    return ropes


def answer_of(header: Header, read: Read) -> dict[str, Any]:
    """:func:`answer` from the file's calls (:func:`.rules.calls`), read once by a caller that
    needs them too."""
    row: Arch = read.row
    calls_made = [c for c in read.per_layer if c is not None]
    calls_made += [t.call for turns in read.extras for t in turns]
    sections = next((c.sections for c in calls_made if c.sections is not None), None)
    mrope = None
    if sections is not None:
        mrope = {
            "section": list(sections),
            "interleaved": any(c.rope_type == "imrope" for c in calls_made),
        }
    notes = list(read.notes)
    for turns in read.extras:
        notes += [t.note for t in turns if t.note is not None and t.note not in notes]
    return {
        "architecture": row.name,
        "num_hidden_layers": read.n_layer,
        "context_length": read.n_ctx_train,
        "n_ctx": read.n_ctx,
        "head_dim": read.head_dim,
        "ropes": _ropes(header, read),
        "nope_layers": [il for il, call in enumerate(read.per_layer) if call is None],
        "mrope": mrope,
        "mtp_layers": read.mtp_layers,
        "unstated": [
            {"layers": layers, "applies_to": list(applies_to), "reason": reason}
            for layers, applies_to, reason in read.unstated
        ],
        "notes": notes,
        "llama_cpp_version": {"commit": LLAMA_CPP_VERSION, "source": LLAMA_CPP_SOURCE},
        "llama_cpp_rules": row.source if row.graph is None else f"{row.source}, {row.graph}",
    }

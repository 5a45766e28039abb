"""What llama.cpp applies at each layer of a GGUF file: its header (:mod:`.reader`) under its
architecture's row (:mod:`.arches`), for the context ``n_ctx`` llama.cpp runs with.

Each layer's rope is the call its graph makes, ``ggml_rope_ext(x, pos, factors, n_dims, mode,
n_ctx_orig, freq_base, freq_scale, ext_factor, attn_factor, beta_fast, beta_slow)``, with the
values llama.cpp computes in float32: ``freq_scale = 1/rope.scaling.factor``; ``ext_factor``
1 for YaRN, else 0; the attention factor ``llama_context`` derives for YaRN (``mscale``, then
divided by the ``1 + 0.1·ln(1/freq_scale)`` ggml multiplies back), times
``rope.scaling.attn_factor``. Layers with the same call are one rope.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from posenc.schemes.rope.gguf.arches import (
    ARCHES,
    LLAMA_CPP_VERSION,
    Arch,
    RopeType,
)
from posenc.schemes.rope.gguf.reader import ROPE_TENSORS, GGUFError, Header, Value
from posenc.schemes.rope.recipes.llama_cpp import RopeArguments, yarn_attention

# ggml's rope modes (ggml.h: GGML_ROPE_TYPE_*).
MODES: dict[str, int] = {"norm": 0, "neox": 2, "mrope": 8, "vision": 24, "imrope": 40}
_SCALINGS = ("none", "linear", "yarn", "longrope")
_PAD = 256  # llama_context pads n_ctx (and n_ctx_seq) to a multiple of 256
_F32 = np.float32


@dataclass(frozen=True)
class Call(RopeArguments):
    """One layer's ``ggml_rope_ext`` (or ``ggml_rope_multi``) arguments, as llama.cpp passes
    them; ``factors`` is the name of the factor tensor, or None."""

    rope_type: RopeType
    sections: tuple[int, ...] | None
    factors: str | None

    def ggml(self) -> dict[str, Any]:
        return {
            "n_dims": self.n_dims,
            "mode": MODES[self.rope_type],
            "n_ctx_orig": self.n_ctx_orig,
            "freq_base": self.freq_base,
            "freq_scale": self.freq_scale,
            "ext_factor": self.ext_factor,
            "attn_factor": self.attn_factor,
            "beta_fast": self.beta_fast,
            "beta_slow": self.beta_slow,
            "sections": None if self.sections is None else list(self.sections),
            "freq_factors": self.factors,
        }


class _Keys:
    """The header's values under ``{arch}.``, remembering which were read."""

    def __init__(self, header: Header, arch: str) -> None:
        self.values: Mapping[str, Value] = header.values
        self.arch = arch
        self.read: list[str] = []

    def get(self, suffix: str) -> Value | None:
        key = f"{self.arch}.{suffix}"
        value = self.values.get(key)
        if value is not None and key not in self.read:
            self.read.append(key)
        return value

    def integer(self, suffix: str, default: int | None = None) -> int:
        value = self.get(suffix)
        if isinstance(value, tuple):  # get_key_or_arr: a per-layer array; llama.cpp's [0]
            value = value[0] if value else None
        if value is None:
            if default is None:
                raise GGUFError(f"the file has no {self.arch}.{suffix}, which llama.cpp needs")
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            raise GGUFError(f"{self.arch}.{suffix} is {value!r}: an integer is needed")
        return value

    def number(self, suffix: str, default: float) -> float:
        value = self.get(suffix)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise GGUFError(f"{self.arch}.{suffix} is {value!r}: a number is needed")
        return float(_F32(value))

    def flag(self, suffix: str, default: bool) -> bool:
        value = self.get(suffix)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise GGUFError(f"{self.arch}.{suffix} is {value!r}: a boolean is needed")
        return value

    def text(self, suffix: str, default: str) -> str:
        value = self.get(suffix)
        if value is None:
            return default
        if not isinstance(value, str):
            raise GGUFError(f"{self.arch}.{suffix} is {value!r}: a string is needed")
        return value


def row_of(header: Header) -> Arch:
    arch = header.architecture
    if arch not in ARCHES:
        raise GGUFError(
            f"architecture {arch!r} has no row in the table read from llama.cpp "
            f"{LLAMA_CPP_VERSION[:9]}: its rope is not served (answered: "
            f"{', '.join(sorted(ARCHES))})"
        )
    return ARCHES[arch]


def _recurrent_layers(row: Arch, keys: _Keys, n_layer: int) -> list[bool]:
    """The layers of linear attention (no rope), as the hybrids' load_arch_hparams mark them."""
    if not row.recurrent:
        return [False] * n_layer
    given = keys.get("attention.recurrent_layers")
    if isinstance(given, tuple):
        if len(given) < n_layer:
            raise GGUFError(
                f"{keys.arch}.attention.recurrent_layers has {len(given)} flags for {n_layer} "
                "layers"
            )
        return [bool(flag) for flag in given[:n_layer]]
    interval = keys.integer("full_attention_interval", 4)
    if interval <= 0:
        raise GGUFError(f"{keys.arch}.full_attention_interval is {interval}: at least 1")
    return [(il + 1) % interval != 0 for il in range(n_layer)]


def _swa_layers(row: Arch, keys: _Keys, n_layer: int) -> list[bool]:
    swa = row.swa
    if swa is None:
        return [False] * n_layer
    if swa.when == "window" and keys.integer("attention.sliding_window", 0) <= 0:
        return [False] * n_layer
    if swa.when == "layers" and n_layer != swa.when_layers:
        return [False] * n_layer
    if swa.when == "unless_zero_window" and keys.integer("attention.sliding_window", 1) == 0:
        return [False] * n_layer
    pattern = keys.get("attention.sliding_window_pattern")
    if isinstance(pattern, tuple):
        if len(pattern) < n_layer:
            raise GGUFError(
                f"{keys.arch}.attention.sliding_window_pattern has {len(pattern)} flags for "
                f"{n_layer} layers"
            )
        return [bool(flag) for flag in pattern[:n_layer]]
    n = keys.integer("attention.sliding_window_pattern", swa.pattern)
    if swa.dense_first:
        return [n == 0 or il % n != 0 for il in range(n_layer)]
    return [n == 0 or il % n < n - 1 for il in range(n_layer)]


def calls(header: Header, n_ctx: int | None) -> dict[str, Any]:
    """Every layer's rope call, grouped, with what they were read from.

    Raises :class:`GGUFError` for an architecture without a row, a key of the wrong type, or a
    file llama.cpp would refuse (a factor tensor of the wrong length or one it does not read).
    """
    row = row_of(header)
    keys = _Keys(header, row.name)
    keys.read.append("general.architecture")
    n_layer_all = keys.integer("block_count")
    n_layer = n_layer_all - keys.integer("nextn_predict_layers", 0)
    if not 0 < n_layer <= 4096:
        raise GGUFError(f"{row.name}.block_count is {n_layer_all}: 1 to 4096 layers are read")
    n_ctx_train = keys.integer("context_length")
    n_embd = keys.integer("embedding_length")
    n_head = keys.integer("attention.head_count")
    if n_head <= 0:
        raise GGUFError(f"{row.name}.attention.head_count is {n_head}: no attention heads")
    head_k = keys.integer("attention.key_length", n_embd // n_head)
    n_rot = keys.integer("rope.dimension_count", head_k)
    if row.n_rot_is_head and n_rot != head_k:
        raise GGUFError(
            f"{row.name}.rope.dimension_count is {n_rot}: llama.cpp refuses a {row.name} file "
            f"whose rope is not the head width {head_k}"
        )
    n_rot_swa = keys.integer("rope.dimension_count_swa", n_rot)
    for name, width in (("rope.dimension_count", n_rot), ("rope.dimension_count_swa", n_rot_swa)):
        if not 2 <= width <= 65536 or width % 2:
            raise GGUFError(
                f"{row.name}.{name} (or the head width) is {width}: an even width of 2 to "
                "65536 is served"
            )
    n_ctx_orig = keys.integer("rope.scaling.original_context_length", n_ctx_train) or n_ctx_train
    n_ctx = n_ctx_train if n_ctx is None or n_ctx == 0 else n_ctx
    padded = -(-n_ctx // _PAD) * _PAD

    base = _F32(keys.number("rope.freq_base", 10000.0))
    scaling = keys.text("rope.scaling.type", "linear")
    if scaling not in _SCALINGS:
        raise GGUFError(
            f"{row.name}.rope.scaling.type is {scaling!r}: llama.cpp reads {', '.join(_SCALINGS)}"
        )
    factor = keys.number("rope.scaling.factor", 0.0) or keys.number("rope.scale_linear", 0.0)
    freq_scale = _F32(1) if factor == 0 else _F32(1) / _F32(factor)
    if scaling == "none":
        freq_scale = _F32(1)
    ext_factor = _F32(1 if scaling == "yarn" else 0)
    beta_fast, beta_slow = _F32(32), _F32(1)
    log_mul = _F32(0)
    if row.yarn_keys or row.deepseek_log_mul:
        log_mul = _F32(keys.number("rope.scaling.yarn_log_multiplier", 0.0))
    if row.yarn_keys:
        beta_fast = _F32(keys.number("rope.scaling.yarn_beta_fast", 32.0))
        beta_slow = _F32(keys.number("rope.scaling.yarn_beta_slow", 1.0))
    if row.deepseek_log_mul and log_mul != 0:
        log_mul = _F32(log_mul / _F32(0.1))
    attn = _F32(1)
    if ext_factor != 0:
        mscale = log_mul if row.deepseek_log_mul and log_mul != 1 else _F32(1)
        attn = yarn_attention(_F32(1) / freq_scale, mscale, log_mul)
    attn = _F32(attn * _F32(keys.number("rope.scaling.attn_factor", 1.0)))

    rope_type: RopeType = row.rope_type
    sections: tuple[int, ...] | None = None
    if row.sections != "none":
        given = keys.get("rope.dimension_sections")
        if given is None and row.sections == "required":
            raise GGUFError(f"the file has no {row.name}.rope.dimension_sections")
        if given is not None:
            if not isinstance(given, tuple) or not all(isinstance(s, int) for s in given):
                raise GGUFError(f"{row.name}.rope.dimension_sections is {given!r}")
            sections = tuple(int(s) for s in given[:4]) + (0,) * (4 - len(given[:4]))
            if row.sections == "optional":
                if any(sections):
                    rope_type = row.sections_type
                else:
                    sections = None

    factors = _factor_tensors(header, row, scaling)
    chosen: str | None = None
    if "rope_freqs.weight" in factors:
        chosen = "rope_freqs.weight"
    elif factors:
        long = padded > n_ctx_orig
        chosen = "rope_factors_long.weight" if long else "rope_factors_short.weight"
        chosen = chosen if chosen in factors else None

    swa = _swa_layers(row, keys, n_layer)
    recurrent = _recurrent_layers(row, keys, n_layer)
    finetuned = keys.flag("rope.scaling.finetuned", True) if row.rope_if_finetuned else True
    base_swa = base
    if row.swa is not None and row.swa.base != "base":
        fallback = float(base) if row.swa.base == "swa_key_or_base" else 10000.0
        base_swa = _F32(keys.number("rope.freq_base_swa", fallback) if any(swa) else fallback)

    nope_step = row.nope_step
    if row.nope_step_is_layers_without_swa and not any(swa):
        nope_step = n_layer
    per_layer: list[Call | None] = []
    for il in range(n_layer):
        sliding = swa[il]
        rotates = finetuned and not recurrent[il]
        rotates = rotates and not (nope_step and (il + 1) % nope_step == 0)
        if row.swa is not None and any(swa) and not sliding and not row.swa.rope_full_layers:
            rotates = False
        if not rotates:
            per_layer.append(None)
            continue
        if sliding:
            assert row.swa is not None
            call = Call(
                n_dims=n_rot_swa,
                n_ctx_orig=n_ctx_orig,
                freq_base=float(base_swa),
                freq_scale=float(freq_scale) if row.swa.scale == "full" else 1.0,
                ext_factor=float(ext_factor) if row.swa.yarn else 0.0,
                attn_factor=float(attn) if row.swa.yarn else 1.0,
                beta_fast=float(beta_fast),
                beta_slow=float(beta_slow),
                rope_type=rope_type,
                sections=sections,
                factors=chosen if row.swa.yarn else None,
            )
        else:
            call = Call(
                n_dims=n_rot,
                n_ctx_orig=n_ctx_orig,
                freq_base=float(base),
                freq_scale=float(freq_scale),
                ext_factor=float(ext_factor),
                attn_factor=float(attn),
                beta_fast=float(beta_fast),
                beta_slow=float(beta_slow),
                rope_type=rope_type,
                sections=sections,
                factors=chosen,
            )
        per_layer.append(call)

    for call in {c for c in per_layer if c is not None and c.factors is not None}:
        assert call.factors is not None
        length = len(header.rope_tensors[call.factors])
        if length != call.n_dims // 2:
            raise GGUFError(
                f"tensor {call.factors} holds {length} factors: llama.cpp wants n_rot/2 = "
                f"{call.n_dims // 2} and refuses the file"
            )
    return {
        "row": row,
        "n_layer": n_layer,
        "n_ctx": n_ctx,
        "n_ctx_train": n_ctx_train,
        "head_dim": head_k,
        "per_layer": per_layer,
        "sliding": swa,
        "padded_n_ctx": padded,
        "mscale_all_dim": float(log_mul) if row.deepseek_log_mul and log_mul != 0 else None,
        "keys": keys.read,
        "factors": factors,
    }


def _factor_tensors(header: Header, row: Arch, scaling: str) -> tuple[str, ...]:
    """The factor tensors llama.cpp creates for this file; any other rope tensor in the file
    is one llama.cpp does not create, and it refuses the file ("wrong number of tensors")."""
    if row.factors == "freqs" or (row.factors == "by_scaling" and scaling != "longrope"):
        readable: tuple[str, ...] = ("rope_freqs.weight",)
    elif row.factors in ("long_short", "by_scaling"):
        readable = ("rope_factors_long.weight", "rope_factors_short.weight")
    else:
        readable = ()
    present = tuple(name for name in ROPE_TENSORS if name in header.tensors)
    for name in present:
        if name not in readable:
            raise GGUFError(
                f"tensor {name}: llama.cpp's {row.name} ({row.source}"
                f"{', rope.scaling.type ' + scaling if row.factors == 'by_scaling' else ''}) "
                "creates no such tensor and refuses the file"
            )
    return present

"""Which of a GGUF file's layers llama.cpp rotates, and how: each layer's flags as the
architecture's ``load_arch_hparams`` sets them (sliding, recurrent, a rope pattern, NoPE
steps, KV shared with an earlier layer, an indexer, a compress ratio), from the row's data.
"""

from __future__ import annotations

from dataclasses import dataclass

from posenc.schemes.rope.gguf.arches import Arch
from posenc.schemes.rope.gguf.reader import GGUFError
from posenc.schemes.rope.gguf.values import Keys


@dataclass(frozen=True)
class Layout:
    """The flags of the ``n_layer`` layers the decoder runs."""

    sliding: list[bool]
    # The architecture's swa_type is set (its layers may slide): Llama 4 and SmallThinker
    # change their NoPE step, EXAONE 4.0 rotates every layer without it.
    swa_active: bool
    rotates: list[bool]
    # Layers that reuse an earlier layer's K: only q turns there.
    q_only: list[bool]
    typed: list[bool]
    compressed: list[bool]
    dense_lead: int


def _sliding(row: Arch, keys: Keys, n_layer: int) -> tuple[bool, list[bool]]:
    swa = row.swa
    none = [False] * n_layer
    if swa is None:
        return False, none
    if swa.when == "window" and keys.integer("attention.sliding_window", 0) <= 0:
        return False, none
    if swa.when == "layers" and n_layer != swa.when_layers:
        return False, none
    if swa.when == "unless_zero_window" and keys.integer("attention.sliding_window", 1) == 0:
        return False, none
    if isinstance(keys.get("attention.sliding_window_pattern"), tuple):
        flags = keys.flags("attention.sliding_window_pattern", n_layer, False)
        assert flags is not None
        return True, flags
    if swa.pattern is None:
        raise GGUFError(
            f"the file has no {keys.arch}.attention.sliding_window_pattern array, which "
            f"llama.cpp's {row.name} needs"
        )
    n = keys.integer("attention.sliding_window_pattern", swa.pattern)
    if swa.dense_first:
        return True, [n == 0 or il % n != 0 for il in range(n_layer)]
    return True, [n == 0 or il % n < n - 1 for il in range(n_layer)]


def _recurrent(row: Arch, keys: Keys, n_layer: int, n_layer_all: int) -> list[bool]:
    """The layers of linear attention, convolutions or SSMs (no attention, no rope)."""
    if row.recurrent == "kv_heads":
        heads = keys.per_layer("attention.head_count", n_layer_all, None)
        kv = keys.per_layer("attention.head_count_kv", n_layer_all, None) or heads
        assert kv is not None  # head_count is read before the layers
        return [count == 0 for count in kv[:n_layer]]
    if row.recurrent != "interval":
        return [False] * n_layer
    given = keys.per_layer("attention.recurrent_layers", n_layer_all, None)
    if given is not None:
        return [bool(flag) for flag in given[:n_layer]]
    interval = keys.integer("full_attention_interval", row.recurrent_interval)
    if interval <= 0:
        raise GGUFError(f"{keys.arch}.full_attention_interval is {interval}: at least 1")
    return [(il + 1) % interval != 0 for il in range(n_layer)]


def _nope(row: Arch, n_layer: int, swa_active: bool) -> list[bool]:
    """n_no_rope_layer_step's NoPE layers."""
    step, first = row.nope_step, row.nope_first
    if step and not swa_active and row.nope_without_swa != "keep":
        if row.nope_without_swa == "none":
            return [False] * n_layer
        step, first = n_layer, False  # Llama 4's "always use rope" leaves its last layer NoPE
    if not step:
        return [False] * n_layer
    if first:
        return [il % step == 0 for il in range(n_layer)]
    return [(il + 1) % step == 0 for il in range(n_layer)]


def _patterned(row: Arch, keys: Keys, n_layer: int) -> list[bool]:
    """hparams.has_rope: rope_pattern, every layer by rope.scaling.finetuned (Granite) or per
    layer by attention.rope_pattern."""
    if row.rope_pattern == "finetuned":
        return [keys.flag("rope.scaling.finetuned", True)] * n_layer
    if row.rope_pattern == "key":
        return keys.flags("attention.rope_pattern", n_layer, True) or [True] * n_layer
    return [True] * n_layer


def _typed(row: Arch, keys: Keys, n_layer: int, n_ctx_train: int) -> list[bool]:
    """attention.indexer.types: the layers that own an indexer."""
    given = keys.per_layer("attention.indexer.types", n_layer, None)
    if given is not None:
        return [bool(flag) for flag in given]
    if row.typed_from_context and n_ctx_train < row.typed_from_context:
        return [True] * n_layer
    default = [bool(flag) for flag in row.typed_default[:n_layer]]
    return default + [False] * (n_layer - len(default))


def _compressed(row: Arch, keys: Keys, n_layer: int, n_layer_all: int) -> list[bool]:
    needed = row.compressed is not None
    wanted = needed or any(extra.layers == "compressed" for extra in row.extras)
    wanted = wanted or any(unstated.layers == "compressed" for unstated in row.unstated)
    ratios = keys.get("attention.compress_ratios") if wanted else None
    if ratios is None:
        if needed:
            raise GGUFError(f"the file has no {keys.arch}.attention.compress_ratios")
        return [False] * n_layer
    if not isinstance(ratios, tuple) or len(ratios) < n_layer_all:
        raise GGUFError(
            f"{keys.arch}.attention.compress_ratios is shorter than block_count: llama.cpp "
            "refuses the file"
        )
    return [ratio != 0 for ratio in ratios[:n_layer]]


def layout(row: Arch, keys: Keys, n_layer: int, n_layer_all: int, n_ctx_train: int) -> Layout:
    """The flags of each of the ``n_layer`` layers llama.cpp's decoder runs."""
    swa_active, sliding = _sliding(row, keys, n_layer)
    recurrent = _recurrent(row, keys, n_layer, n_layer_all)
    nope = _nope(row, n_layer, swa_active)
    patterned = _patterned(row, keys, n_layer)
    dense_lead = 0
    if row.rope_on == "sliding_or_dense_lead" or any(
        extra.layers == "after_dense_lead" for extra in row.extras
    ):
        dense_lead = keys.integer("leading_dense_block_count", 0)
    rotates = []
    for il in range(n_layer):
        on = {
            "all": True,
            "sliding": sliding[il],
            "sliding_or_no_swa": sliding[il] or not swa_active,
            "sliding_or_dense_lead": sliding[il] or il < dense_lead,
        }[row.rope_on]
        attends = not recurrent[il]
        rotates.append(row.rope_call and on and patterned[il] and not nope[il] and attends)
    boundary = n_layer_all
    if row.kv_shared == "fixed":
        boundary = row.kv_from_start
    elif row.kv_shared == "key":
        boundary = n_layer_all - keys.integer("attention.shared_kv_layers", 0)
    typed = [False] * n_layer
    if any(extra.layers == "typed" for extra in row.extras):
        typed = _typed(row, keys, n_layer, n_ctx_train)
    return Layout(
        sliding=sliding,
        swa_active=swa_active,
        rotates=rotates,
        q_only=[il >= boundary for il in range(n_layer)],
        typed=typed,
        compressed=_compressed(row, keys, n_layer, n_layer_all),
        dense_lead=dense_lead,
    )

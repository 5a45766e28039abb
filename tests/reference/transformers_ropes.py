"""What transformers itself computes for the rope of every model type that has one: the reference
side of the ``POST /v1/rope/config`` comparison.

Nothing here is listed per family. For a model type, and optionally a ``config.json`` as the Hub
publishes it, the harness

1. builds the config with the model type's own config class and takes its text config
   (``get_text_config()``: ``text_config``, ``thinker_config.text_config``, …);
2. builds that text config's own model class under a ``FakeTensorMode`` (a 671B-parameter default
   config costs no memory), recording the constructor arguments of every rotary module, so that a
   real CPU twin of each can be built with the same arguments;
3. runs the fake model forward on three tokens with each rotary module's forward answered by its
   twin, and with every module-level function (or static method) whose name mentions
   rotary/rope/rotate wrapped: it learns which decoder layer applies which rotary output (a layer
   that applies none is a NoPE layer) and with which arguments;
4. replays each rotary output's recorded apply call on real probes — one basis vector at a time,
   every token at position 1 — and reads off the rotation the call performs: which input
   dimensions it pairs, where each pair lands, which frequency turns it, the sign and the factor.
   The layout is measured, never assumed.

GPT-J and CodeGen keep a sin/cos table in each attention (``embed_positions``, built by
``create_sinusoidal_positions``) and RoFormer an ``nn.Embedding`` of sinusoids; these *tables*
stand in for the rotary module (``ReferenceRope.source == "table"``).

Where the text model cannot be built or run under fake tensors (a default config its own model
rejects, data-dependent code, non-text inputs), the rotary classes of its modeling module are
built from the text config alone and its ``apply_rotary_*`` function replayed with the usual
arguments (``ReferenceModel.traced`` is false; NoPE layers are then unknown).

Multimodal RoPE (``mrope_section``) models are given text positions only (all rows equal).

Entry points: :func:`rotary_model_types`, :func:`discover`, :func:`reference_model` (a
:class:`ReferenceModel` with one :class:`ReferenceRope` per distinct rope) and
:func:`reference_ropes`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib
import inspect
import logging
import math
import re
import sys
import traceback
import types
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
from torch._subclasses.fake_tensor import FakeTensorMode, unset_fake_temporarily
from torch.overrides import TorchFunctionMode

__all__ = [
    "Discovery",
    "PairRotation",
    "ReferenceModel",
    "ReferenceRope",
    "RopeLayout",
    "build_config",
    "discover",
    "quiet",
    "reference_model",
    "reference_ropes",
    "rotary_model_types",
    "text_config_of",
]

F32 = npt.NDArray[np.float32]

# A rotary module's class name. "Vision"-like ones turn image patches (2-D/3-D), never text.
_ROTARY_CLASS = re.compile(r"(Rotary(Positional)?Embedding|RopePositionEmbedding)$")
_VISION = re.compile(r"Vision|ViT|Dinov3|DINOv3|LoFTR|MLCD|Sapiens|EsmFold", re.IGNORECASE)
# Functions the harness wraps to see where rotary outputs are applied.
_APPLY_NAME = re.compile(r"rotary|rope|rotate", re.IGNORECASE)
# A layer-type name (``layer_types``) of a layer with no softmax attention.
_ATTENTION_FREE = re.compile(r"mamba|conv|linear|recurrent|ssm|mlp|gdn|delta|short", re.IGNORECASE)
_TRACE_TOKENS = 3
_PROBE_POSITION = 1


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """transformers' and torch's log lines (unused keys, fake-tensor fallbacks) say nothing about
    the rope; silence them, and warnings, for the duration."""
    previous = logging.root.manager.disable
    logging.disable(logging.CRITICAL)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        logging.disable(previous)


# --------------------------------------------------------------------------------------------
# Discovery


@dataclasses.dataclass(frozen=True)
class Discovery:
    """Every model type of the installed transformers, sorted by what its modeling module holds.

    ``text``: model type → the rotary classes of its modeling module that are not vision ones
    (by name). ``tables``: model types whose rope is a sin/cos table instead (GPT-J, CodeGen,
    RoFormer). ``via_text_config``: model type → the model type of its default text config, for
    types with neither whose text model has one (Llava → llama). ``non_text``: model types of
    ``text`` whose default config is a vision, audio or codec sub-model of a module that also has
    a text rotary class (``qwen2_vl_vision``, ``gemma3n_audio``) → the config class.
    ``vision_only``: model type → its rotary classes, all vision ones, for types not in the
    others. ``import_errors``: model type → why its modeling module did not import.
    ``modules``: model type → its module name.
    """

    text: Mapping[str, tuple[str, ...]]
    tables: Mapping[str, str]
    via_text_config: Mapping[str, str]
    non_text: Mapping[str, str]
    vision_only: Mapping[str, tuple[str, ...]]
    import_errors: Mapping[str, str]
    modules: Mapping[str, str]


# The model type of a sub-model that is no text model (for ``Discovery.non_text``), but for
# encoders of text: BLT's local encoder turns bytes, and its three other stacks are measured.
_NON_TEXT_TYPE = re.compile(
    r"_(vision|audio|vqgan|vqmodel|adapter|perciever|perceiver|depth|bigvgan|token2wav|ctc"
    r"|encoder|tokenizer)(_[a-z_]+)?$|_vision_model$"
)
_TEXT_ENCODERS = frozenset({"blt_local_encoder"})


def _modeling_module(model_type: str) -> types.ModuleType:
    from transformers.models.auto.configuration_auto import model_type_to_module_name

    name = model_type_to_module_name(model_type)
    return importlib.import_module(f"transformers.models.{name}.modeling_{name}")


def _rotary_classes(module: types.ModuleType) -> tuple[str, ...]:
    return tuple(
        sorted(
            name
            for name, obj in vars(module).items()
            if isinstance(obj, type)
            and issubclass(obj, torch.nn.Module)
            and _ROTARY_CLASS.search(name)
        )
    )


def _table_kind(module: types.ModuleType) -> str | None:
    """``create_sinusoidal_positions`` (GPT-J, CodeGen) or a ``Sinusoidal`` embedding applied by
    an ``apply_rotary_*`` method (RoFormer): a rope kept as a sin/cos table."""
    names = vars(module)
    if "create_sinusoidal_positions" in names and "apply_rotary_pos_emb" in names:
        return "create_sinusoidal_positions"
    for name, obj in names.items():
        if isinstance(obj, type) and "Sinusoidal" in name and hasattr(obj, "create_weight"):
            for other in names.values():
                if isinstance(other, type) and any(
                    a.startswith("apply_rotary") for a in vars(other)
                ):
                    return f"{name}.create_weight"
    return None


@functools.cache
def discover() -> Discovery:
    """Import every model type's modeling module and sort the types by their rope."""
    from transformers.models.auto import configuration_auto
    from transformers.models.auto.configuration_auto import model_type_to_module_name

    names: Mapping[str, str] = vars(configuration_auto)["CONFIG_MAPPING_NAMES"]

    text: dict[str, tuple[str, ...]] = {}
    tables: dict[str, str] = {}
    vision: dict[str, tuple[str, ...]] = {}
    errors: dict[str, str] = {}
    modules: dict[str, str] = {}
    rest: list[str] = []
    with quiet():
        for model_type in names:
            modules[model_type] = model_type_to_module_name(model_type)
            try:
                module = _modeling_module(model_type)
            except Exception as exc:  # no modeling file, or a missing optional dependency
                errors[model_type] = f"{type(exc).__name__}: {exc}"
                rest.append(model_type)
                continue
            classes = _rotary_classes(module)
            textual = tuple(c for c in classes if "Text" in c or not _VISION.search(c))
            if textual:
                text[model_type] = textual
            elif (table := _table_kind(module)) is not None:
                tables[model_type] = table
            else:
                if classes:
                    vision[model_type] = classes
                rest.append(model_type)
        via: dict[str, str] = {}
        for model_type in rest:
            # A type without a modeling module of its own (InternLM3) may map to another
            # family's model class (LlamaModel).
            owner = _owner_of_model_class(model_type, {**text, **tables}, modules)
            if owner is not None:
                via[model_type] = owner
                continue
            try:
                inner = getattr(text_config_of(build_config(model_type))[1], "model_type", None)
            except Exception:
                continue
            if inner != model_type and (inner in text or inner in tables):
                via[model_type] = str(inner)
                vision.pop(model_type, None)
        non_text: dict[str, str] = {}
        for model_type in text:
            try:
                name = type(text_config_of(build_config(model_type))[1]).__name__
            except Exception as exc:  # a config needing an absent library (timm)
                name = f"({type(exc).__name__})"
            text_encoder = model_type in _TEXT_ENCODERS
            if "Text" not in name and _NON_TEXT_TYPE.search(model_type) and not text_encoder:
                non_text[model_type] = name
    return Discovery(text, tables, via, non_text, vision, errors, modules)


def _owner_of_model_class(
    model_type: str, rotary: Mapping[str, Any], modules: Mapping[str, str]
) -> str | None:
    """The rotary model type whose module defines ``model_type``'s ``AutoModel`` class, when
    that is another type's (``internlm3`` → ``LlamaModel`` → ``llama``)."""
    from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES

    name = MODEL_MAPPING_NAMES.get(model_type)
    if not isinstance(name, str) or modules.get(model_type) in {modules[t] for t in rotary}:
        return None
    for other in rotary:
        if other != model_type and name in vars(_modeling_module(other)):
            return other
    return None


def rotary_model_types() -> list[str]:
    """Every model type whose text model has a rope (a rotary module or a sin/cos table), of its
    own or through its default text config; sorted. Vision, audio and codec sub-models
    (``Discovery.non_text``) are not among them."""
    found = discover()
    return sorted(({*found.text} - {*found.non_text}) | {*found.tables, *found.via_text_config})


# --------------------------------------------------------------------------------------------
# Configs


def build_config(model_type: str, config: Mapping[str, Any] | None = None) -> Any:
    """The model type's config class built from ``config`` (a Hub ``config.json``) the way
    ``from_pretrained`` builds it (``from_dict``), or its defaults."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    body = dict(config or {})
    body.pop("model_type", None)
    with quiet():
        return CONFIG_MAPPING[model_type].from_dict(body)


_TEXT_NAMES = ("text_config", "thinker_config", "language_config", "llm_config", "decoder")


def text_config_of(config: Any) -> tuple[str, Any]:
    """``(path, text_config)``: the text config inside ``config`` and its dotted attribute path
    ("" when the config is its own text config). ``get_text_config()`` first; a config it
    returns unchanged that still nests a text model (``thinker_config``) is searched by name."""
    path = ""
    node = config
    for _ in range(4):
        try:
            inner = node.get_text_config()
        except ValueError:  # several candidates: the decoder is the text model
            inner = node.get_text_config(decoder=True)
        if inner is not node:
            name = _attribute_path(node, inner) or "get_text_config()"
            path = f"{path}.{name}" if path else name
            node = inner
            continue
        nested = next(
            (k for k in _TEXT_NAMES if k in (getattr(node, "sub_configs", {}) or {})),
            None,
        )
        child = getattr(node, nested, None) if nested else None
        if child is None or child is node:
            break
        path = f"{path}.{nested}" if path else str(nested)
        node = child
    return path, node


def _attribute_path(node: Any, target: Any, depth: int = 3) -> str | None:
    """The dotted path of sub-configs from ``node`` to ``target``."""
    for key in sorted(vars(node)):
        child = getattr(node, key, None)
        if child is target:
            return key
        if depth > 1 and hasattr(child, "get_text_config"):
            found = _attribute_path(child, target, depth - 1)
            if found is not None:
                return f"{key}.{found}"
    return None


# --------------------------------------------------------------------------------------------
# Records


@dataclasses.dataclass(frozen=True)
class PairRotation:
    """One 2-D rotation of the apply call: input dimensions ``inputs`` land in output dimensions
    ``outputs``, turned by ``angle`` at position 1, which is the rotary module's frequency
    ``freq`` (−1: none matches), and scaled by ``scale`` (the attention factor)."""

    inputs: tuple[int, int]
    outputs: tuple[int, int]
    angle: float
    freq: int
    scale: float


@dataclasses.dataclass(frozen=True)
class RopeLayout:
    """How a layer applies its rotary output, measured by replaying the model's own call.

    ``kind``: ``rotate_half`` (pairs ``(o + i, o + i + span/2)``; ``span`` is the rotary width,
    or wider where the upper frequencies are zero, as in ``proportional`` rope),
    ``interleaved`` (pairs ``(o + 2i, o + 2i + 1)``), ``interleaved_to_rotate_half`` (input pair
    ``(2i, 2i+1)`` written to outputs ``(i, i + r/2)``: DeepSeek's ``rope_interleave``),
    ``other`` (``pairs`` and ``detail`` tell), ``none`` (nothing turns) or ``unmeasured``
    (``detail`` says why); ``r`` is the rotary width and ``o`` the ``offset`` of the first
    rotated dimension of the call's input (0, or ``head_dim − r`` for DeepSeek-V4's trailing rope
    part). ``rotated``/``passed``: dimensions of the call's input (``input_width`` wide) that
    turn / come out unturned. ``head_slice``: ``(start, width)`` when the attention passed the
    apply function a slice of a wider head (GPT-J's ``q[..., :rotary_dim]`` is ``(0, 256)``,
    DeepSeek-V3's ``q_pe`` ``(128, 192)``). ``sign``: +1 when ``(x, y)`` becomes
    ``(x cos θ − y sin θ, x sin θ + y cos θ)``, −1 for the opposite turn (NanoChat).
    ``frequency_order``: ``ascending`` when the pair of lowest dimension turns by frequency 0,
    the next by 1, …; ``permuted`` (Ernie 4.5-VL) or ``unmatched`` otherwise.
    """

    kind: str
    function: str
    input_width: int
    rotated: tuple[int, ...]
    passed: tuple[int, ...]
    offset: int
    sign: int
    frequency_order: str
    pairs: tuple[PairRotation, ...]
    detail: str = ""
    head_slice: tuple[int, int] | None = None

    @property
    def rotary_width(self) -> int:
        return len(self.rotated)

    @property
    def span(self) -> int:
        """The width the pairing rule covers: ``2 · distance`` of a rotate_half pair, which is
        wider than ``rotary_width`` where pairs of frequency zero stay unturned (proportional
        rope); the rotary width otherwise."""
        if self.kind == "rotate_half" and self.pairs:
            return 2 * (self.pairs[0].inputs[1] - self.pairs[0].inputs[0])
        return self.rotary_width


@dataclasses.dataclass(frozen=True)
class ReferenceRope:
    """One rotary output of a text model and the layers that apply it.

    ``layer_types``: the config's ``layer_types`` names of ``layers`` (empty when the config has
    none). ``call_layer_type``: the ``layer_type`` the model passes to the rotary forward
    (``None`` for a single-rope module). ``source``: ``module`` (a rotary module; ``rotary_path``
    is its attribute path in the text model) or ``table`` (GPT-J-style sin/cos table).
    ``inv_freq`` as the module initialises it (float32) and ``attention_scaling``, the factor its
    forward multiplies cos and sin by. ``output``: ``cos_sin`` (cos, sin over the rotary width,
    expanded to the layout), ``cos_sin_half`` (one value per frequency; the apply call expands
    them), ``complex`` (``freqs_cis``). ``cache_layout``: how that output lays the frequencies
    (``concatenated``, ``repeat_interleaved``, ``half``, ``complex``) — GLM and DeepSeek apply
    a layout other than their cache's. ``cos_width``: the last dimension of the output.
    ``head_dim``: the config's (``head_dim`` or hidden/heads, per layer for Gemma 4);
    ``layout.input_width`` is what the apply call was given. ``mrope``: ``section`` and where the
    config keeps it (``source``), for multimodal RoPE.
    """

    model_type: str
    layer_types: tuple[str, ...]
    layers: tuple[int, ...]
    source: str
    rotary_class: str
    rotary_path: str
    call_layer_type: str | None
    rope_type: str
    inv_freq: F32
    attention_scaling: float
    output: str
    cache_layout: str
    cos_width: int
    head_dim: int
    layout: RopeLayout
    mrope: Mapping[str, Any] | None
    forward: Callable[[npt.NDArray[np.int64]], tuple[F32, F32]] = dataclasses.field(
        repr=False, compare=False
    )
    grown: Callable[[npt.NDArray[np.int64]], F32] = dataclasses.field(repr=False, compare=False)

    @property
    def rotary_width(self) -> int:
        """The head dimensions the rope turns: as measured, or ``2 · len(inv_freq)``."""
        if self.layout.kind not in ("unmeasured", "other"):
            return self.layout.rotary_width
        return 2 * len(self.inv_freq)

    def cos_sin(self, positions: Sequence[int] | npt.NDArray[np.integer]) -> tuple[F32, F32]:
        """The rotary module's forward at ``positions``: float32 ``(n, cos_width)`` cos and sin
        (for ``complex`` outputs, the real and imaginary parts of ``freqs_cis``), multiplied by
        ``attention_scaling`` as the module does. A fresh module answers every call, so a
        dynamic rope starts from its initial state (a first forward ending at the last position)."""
        return self.forward(np.asarray(positions, dtype=np.int64))

    def inv_freq_at(self, positions: Sequence[int] | npt.NDArray[np.integer]) -> F32:
        """The frequencies a fresh module turns ``positions`` by: its ``inv_freq`` once it has
        run at them. ``inv_freq`` itself, unless the module's frequencies grow with the
        positions (a dynamic rope past ``max_position_embeddings``)."""
        return self.grown(np.asarray(positions, dtype=np.int64))


@dataclasses.dataclass(frozen=True)
class ReferenceModel:
    """What the harness learnt about one model type's text rope.

    ``nope_layers``: layers that apply no rope, attention-free ones (Mamba, convolution, linear
    attention) included — not a layer that calls an apply function on cos/sin from a module the
    harness does not trace (CLVP's encoder: a note says so); ``attention_free_layers`` are
    those of them with no softmax attention (by the ``layer_types`` name, or no attention
    module in the layer). A layer that applies
    several ropes is in several ``ropes[].layers``. ``traced``: whether the model itself ran (else
    the static path: ``nope_layers`` empty because unknown, layers assigned by ``layer_types``).
    ``other_rotary_modules``: rotary modules the model built but applied nowhere in the trace.
    ``failure``: why the harness could not run the model at all (``ropes`` is then empty).
    ``rejected``: the error, where it is the model's own: its rotary module raises it built
    from the config on real tensors, or its constructor on the meta device, or its apply
    function on q of the head's width, and the model raised it too (a default config the model
    itself cannot run, as GLM-4V's sections over more frequencies than they cover, HunYuan-VL's
    missing head_dim, or Qwen3-Omni's odd heads).
    """

    model_type: str
    config_class: str
    text_config_path: str
    text_config_class: str
    text_model_type: str
    text_model_class: str
    num_hidden_layers: int
    head_dim: int
    config_layer_types: tuple[str, ...] | None
    ropes: tuple[ReferenceRope, ...]
    nope_layers: tuple[int, ...]
    attention_free_layers: tuple[int, ...]
    other_rotary_modules: tuple[str, ...]
    notes: tuple[str, ...]
    traced: bool = True
    failure: str | None = None
    rejected: str | None = None


# --------------------------------------------------------------------------------------------
# Rope sources: what answers for a rotary module during the fake forward


@dataclasses.dataclass
class _Source:
    """A rotary module (its CPU twin, built with the recorded arguments) or a sin/cos table."""

    kind: str
    path: str
    cls_name: str
    build: Callable[[], Any]
    twin: Any

    def inv_freq(self, layer_type: str | None) -> tuple[F32, float, str]:
        if self.kind == "table":
            inv, scaling, rope_type = self.twin.inv_freq, 1.0, "table"
        elif layer_type is not None and hasattr(self.twin, f"{layer_type}_inv_freq"):
            inv = getattr(self.twin, f"{layer_type}_inv_freq")
            scaling = getattr(self.twin, f"{layer_type}_attention_scaling", 1.0)
            types_ = getattr(self.twin, "rope_type", {})
            rope_type = types_.get(layer_type, "?") if isinstance(types_, dict) else types_
        else:
            inv = self.twin.inv_freq
            scaling = getattr(self.twin, "attention_scaling", 1.0)
            rope_type = getattr(self.twin, "rope_type", "default")
            if isinstance(rope_type, dict):  # ESM keeps an empty dict: its only rope is default
                rope_type = rope_type.get(layer_type, "?") if rope_type else "default"
        return inv.detach().to(torch.float32).numpy().copy(), float(scaling), str(rope_type)


@dataclasses.dataclass
class _Output:
    """One call of a rope source in the fake forward and its real value at the probe position."""

    source: _Source
    layer_type: str | None
    call_kwargs: dict[str, Any]
    position_shape: tuple[int, ...]
    probe: tuple[torch.Tensor, ...]


class _SinusoidTable:
    """GPT-J/CodeGen's ``create_sinusoidal_positions(num_pos, dim)`` table (rows ``[sin | cos]``),
    or RoFormer's ``SinusoidalPositionalEmbedding.create_weight()``, as a rope source."""

    def __init__(self, make: Callable[[], torch.Tensor], num_pos: int, dim: int) -> None:
        self.num_pos, self.dim = num_pos, dim
        self.make = make
        with _SinArguments() as seen, _numpy_sin_arguments() as seen_numpy, torch.no_grad():
            self.table = make().to(torch.float32)
        # The argument of the table's first ``sin`` is the angles (positions × inv_freq, or
        # RoFormer's positions / base^(2i/d) in NumPy float64): its row 1 is the angle of
        # position 1, exactly as the function computes it, rounded once to float32.
        first = seen[0] if seen else torch.from_numpy(seen_numpy[0]) if seen_numpy else None
        if first is None or first.ndim != 2 or first.shape[0] < 2:
            raise LookupError(f"{make}: no sin of a (positions, frequencies) table was seen")
        self.inv_freq = first[1].to(torch.float32)

    def rows(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        sincos = self.table[positions]
        sin, cos = torch.split(sincos, sincos.shape[-1] // 2, dim=-1)
        return cos, sin


@contextlib.contextmanager
def _numpy_sin_arguments() -> Iterator[list[npt.NDArray[np.float64]]]:
    """Records the arguments of ``numpy.sin`` calls (RoFormer's table calls it by attribute,
    ``np.sin``, so the module's own reference sees the recorder while this lasts)."""
    seen: list[npt.NDArray[np.float64]] = []
    original = np.sin

    def recorder(x: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append(np.array(x, dtype=np.float64, copy=True))
        return original(x, *args, **kwargs)

    np.sin = recorder  # type: ignore[assignment]
    try:
        yield seen
    finally:
        np.sin = original


class _SinArguments(TorchFunctionMode):
    """Records the arguments of ``torch.sin`` calls."""

    def __enter__(self) -> list[torch.Tensor]:
        self.seen: list[torch.Tensor] = []
        super().__enter__()
        return self.seen

    def __torch_function__(
        self,
        func: Any,
        types_: Any,
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
    ) -> Any:
        if func in (torch.sin, torch.Tensor.sin) and args:
            self.seen.append(args[0].detach().clone())
        return func(*args, **(kwargs or {}))


# --------------------------------------------------------------------------------------------
# Tracing


@dataclasses.dataclass
class _Arg:
    kind: str  # "rope" (a rope output or a view of one), "tensor", "value"
    value: Any = None
    output: int = -1
    size: tuple[int, ...] = ()
    stride: tuple[int, ...] = ()
    offset: int = 0
    dtype: torch.dtype = torch.float32
    name: str = ""
    head: tuple[int, int] | None = None  # (start, width) of a slice of a wider head


@dataclasses.dataclass
class _Call:
    function: Callable[..., Any]
    name: str
    layer: int | None
    args: list[_Arg]
    kwargs: dict[str, _Arg]

    @property
    def outputs(self) -> set[int]:
        return {a.output for a in [*self.args, *self.kwargs.values()] if a.kind == "rope"}


@contextlib.contextmanager
def _recording_constructors(classes: Sequence[type]) -> Iterator[list[Any]]:
    """Record ``(instance, args, kwargs)`` for every construction of ``classes``."""
    made: list[Any] = []
    saved = {cls: cls.__dict__["__init__"] for cls in classes if "__init__" in cls.__dict__}

    def recorder(original: Callable[..., None]) -> Callable[..., None]:
        def init(self: Any, *args: Any, **kwargs: Any) -> None:
            made.append((self, args, kwargs))
            original(self, *args, **kwargs)

        return init

    try:
        for cls, original in saved.items():
            cls.__init__ = recorder(original)  # type: ignore[misc]
        yield made
    finally:
        for cls, original in saved.items():
            cls.__init__ = original  # type: ignore[misc]


def _loaded_rotary_classes() -> list[type]:
    classes = []
    for name, module in list(sys.modules.items()):
        if not name.startswith("transformers.models.") or ".modeling_" not in name:
            continue
        for attr, obj in vars(module).items():
            if (
                isinstance(obj, type)
                and issubclass(obj, torch.nn.Module)
                and ("Rotary" in attr or "Rope" in attr)
                and obj.__module__ == name
            ):
                classes.append(obj)
    return classes


def _head_dim(config: Any, layer: int | None = None) -> int:
    """The config's ``head_dim`` (or hidden/heads); a heterogeneous config (Gemma 4) keeps it per
    layer, in ``per_layer_config``."""
    if getattr(config, "is_heterogeneous", False):
        if layer is None:
            return 0
        try:
            config = config.per_layer_config[layer]
        except Exception:
            return 0
    try:
        head_dim = getattr(config, "head_dim", None)
    except Exception:  # a per-layer attribute read globally
        return 0
    if isinstance(head_dim, int) and head_dim > 0:
        return head_dim
    heads = getattr(config, "num_attention_heads", None)
    hidden = getattr(config, "hidden_size", None)
    if isinstance(heads, int) and isinstance(hidden, int) and heads:
        return hidden // heads
    return 0


def _model_class(config: Any) -> Any:
    """The base model class for ``config``: ``AutoModel``'s, else the class of the config's own
    modeling module whose ``config_class`` it is (sub-configs such as ``Emu3TextConfig`` have no
    ``AutoModel`` entry), preferring a ``…TextModel``, then a ``…Model`` without a head."""
    from transformers import AutoModel, PreTrainedModel

    mapping: Any = AutoModel._model_mapping
    try:
        return mapping[type(config)]
    except KeyError:
        pass
    module = importlib.import_module(
        type(config).__module__.replace(".configuration_", ".modeling_")
    )
    candidates = [
        obj
        for name, obj in vars(module).items()
        if isinstance(obj, type)
        and issubclass(obj, PreTrainedModel)
        and obj.__module__ == module.__name__
        and getattr(obj, "config_class", None) is type(config)
        and "For" not in name
    ]
    if not candidates:
        raise LookupError(f"no model class of {module.__name__} takes {type(config).__name__}")
    candidates.sort(
        key=lambda c: (
            not c.__name__.endswith("TextModel"),
            not c.__name__.endswith("Model"),
            len(c.__name__),
        )
    )
    return candidates[0]


def _takes_positions(cls: Any) -> bool:
    try:
        params = list(inspect.signature(cls.forward).parameters)
    except (TypeError, ValueError):
        return False
    return len(params) >= 3 and params[2] == "position_ids"


def _head_slice(value: torch.Tensor) -> tuple[int, int] | None:
    """``(start, width)`` when ``value`` is a slice of the last dimension of wider heads (the
    attention passed ``q[..., :r]`` or DeepSeek's ``q_pe``): the head is the smallest stride of
    the other dimensions, the start is the offset within it."""
    if value._base is None or value.ndim < 2 or value.stride(-1) != 1:
        return None
    strides = [value.stride(i) for i in range(value.ndim - 1) if value.shape[i] > 1]
    if not strides:
        return None
    width = min(strides)
    if width <= value.shape[-1]:
        return None
    return int(value.storage_offset()) % width, width


class _Trace:
    """The text model built and run under fake tensors, with its rope sources answering for
    real and its apply functions recorded."""

    def __init__(self, text_config: Any) -> None:
        self.config = text_config
        self.notes: list[str] = []
        self.outputs: list[_Output] = []
        self.tags: dict[int, int] = {}
        self.keep: list[torch.Tensor] = []  # tagged fakes stay alive, so their ids stay unique
        self.calls: list[_Call] = []
        self.received: dict[int, set[int]] = {}
        self.current: int | None = None
        self.depth = 0
        if hasattr(text_config, "_experts_implementation"):
            # The eager experts index tokens by routing decisions, which fake tensors lack.
            text_config._experts_implementation = "batched_mm"
        self.mode = FakeTensorMode(allow_non_fake_inputs=True)
        model_class = _model_class(text_config)  # imports its module
        with _recording_constructors(_loaded_rotary_classes()) as made, self.mode:
            self.model = model_class._from_config(text_config)
        self.model.eval()
        paths = {id(m): n for n, m in self.model.named_modules()}
        self.sources: dict[int, _Source] = {}
        for instance, args, kwargs in made:
            if id(instance) not in paths or not _takes_positions(type(instance)):
                continue
            cls = type(instance)

            def build(cls: type = cls, args: Any = args, kwargs: Any = kwargs) -> Any:
                with quiet(), torch.no_grad():
                    return cls(*args, **kwargs)

            self.sources[id(instance)] = _Source(
                "module", paths[id(instance)], cls.__name__, build, build()
            )
        self.table = self._find_table()
        self.layers = self._decoder_layers(getattr(text_config, "num_hidden_layers", -1))

    def _find_table(self) -> _Source | None:
        for path, module in self.model.named_modules():
            owner = sys.modules[type(module).__module__]
            make_fn = getattr(owner, "create_sinusoidal_positions", None)
            buffer = getattr(module, "embed_positions", None)
            if not isinstance(buffer, torch.Tensor):
                buffer = None
            make: Callable[[], torch.Tensor]
            if make_fn is not None and buffer is not None and buffer.ndim == 2:
                num_pos, dim = (int(s) for s in buffer.shape)
                make = functools.partial(make_fn, num_pos, dim)
                name = f"{owner.__name__.rsplit('.', 1)[-1]}.create_sinusoidal_positions"
            elif "Sinusoidal" in type(module).__name__ and hasattr(module, "create_weight"):
                num_pos, dim = (int(s) for s in module.weight.shape)
                cls: Any = type(module)
                make = functools.partial(lambda c, n, d: c(n, d).create_weight(), cls, num_pos, dim)
                name = f"{cls.__name__}.create_weight"
            else:
                continue

            def build(make: Any = make, n: int = num_pos, d: int = dim) -> _SinusoidTable:
                with quiet():
                    return _SinusoidTable(make, n, d)

            where = path if buffer is None else f"{path}.embed_positions"
            return _Source("table", where, name, build, build())
        return None

    def _decoder_layers(self, count: int) -> list[torch.nn.Module]:
        lists = [m for m in self.model.modules() if isinstance(m, torch.nn.ModuleList)]
        exact = [m for m in lists if len(m) == count]
        chosen = exact[0] if exact else max(lists, key=len, default=torch.nn.ModuleList())
        if not exact:
            self.notes.append(f"no layer list of num_hidden_layers={count}; used {len(chosen)}")
        return list(chosen)

    def _stub(self, source: _Source) -> Callable[..., Any]:
        """The rotary forward the fake model sees: the twin's real output at the probe position
        is kept; fakes of its shapes go on, tagged."""

        def forward(x: Any, position_ids: Any = None, *args: Any, **kwargs: Any) -> Any:
            if position_ids is None:
                raise RuntimeError(f"{source.path} called without position_ids")
            call_kwargs = dict(kwargs)
            if args:
                names = list(inspect.signature(type(source.twin).forward).parameters)[3:]
                call_kwargs.update(zip(names, args, strict=False))
            shape = tuple(int(s) for s in position_ids.shape)
            with unset_fake_temporarily(), torch.no_grad(), quiet():
                out = source.build()(
                    torch.zeros(1, dtype=torch.float32),
                    torch.full(shape, _PROBE_POSITION, dtype=torch.int64),
                    **call_kwargs,
                )
                outs = out if isinstance(out, tuple) else (out,)
                real = tuple(o.clone() for o in outs)
            index = len(self.outputs)
            self.outputs.append(
                _Output(source, call_kwargs.get("layer_type"), call_kwargs, shape, real)
            )
            fakes = tuple(torch.empty(o.shape, dtype=o.dtype) for o in real)
            for fake in fakes:
                self.tags[id(fake)] = index
                self.keep.append(fake)
            return fakes if isinstance(out, tuple) else fakes[0]

        return forward

    def _tag(self, tensor: Any) -> int | None:
        while isinstance(tensor, torch.Tensor):
            if id(tensor) in self.tags:
                return self.tags[id(tensor)]
            tensor = tensor._base
        return None

    def _tags_in(self, value: Any) -> set[int]:
        if isinstance(value, torch.Tensor):
            tag = self._tag(value)
            return set() if tag is None else {tag}
        if isinstance(value, (tuple, list)):
            return {t for v in value for t in self._tags_in(v)}
        if isinstance(value, dict):
            return {t for v in value.values() for t in self._tags_in(v)}
        return set()

    def _describe(self, value: Any, name: str) -> _Arg:
        if not isinstance(value, torch.Tensor):
            return _Arg("value", value, name=name)
        tag = self._tag(value)
        if tag is not None:
            return _Arg(
                "rope",
                output=tag,
                size=tuple(value.shape),
                stride=tuple(value.stride()),
                offset=int(value.storage_offset()),
                dtype=value.dtype,
                name=name,
            )
        return _Arg(
            "tensor", size=tuple(value.shape), dtype=value.dtype, name=name, head=_head_slice(value)
        )

    def _wrapper(self, name: str, function: Callable[..., Any]) -> Callable[..., Any]:
        try:
            params = list(inspect.signature(function).parameters)
        except (TypeError, ValueError):
            params = []

        def wrapped(*args: Any, **kwargs: Any) -> Any:
            if self.depth == 0:
                named = [params[i] if i < len(params) else "" for i in range(len(args))]
                described = [self._describe(a, n) for a, n in zip(args, named, strict=True)]
                described_kw = {k: self._describe(v, k) for k, v in kwargs.items()}
                self.calls.append(_Call(function, name, self.current, described, described_kw))
            self.depth += 1
            try:
                return function(*args, **kwargs)
            finally:
                self.depth -= 1

        return wrapped

    def _apply_functions(self) -> list[tuple[Any, str, Any]]:
        """``(owner, name, original)`` for every function and static method whose name mentions
        rotary/rope/rotate, in the modules of the text model's classes."""
        found: list[tuple[Any, str, Any]] = []
        for module_name in sorted({type(m).__module__ for m in self.model.modules()}):
            module = sys.modules.get(module_name)
            if module is None or not module_name.startswith("transformers."):
                continue
            for attr, obj in vars(module).items():
                if inspect.isfunction(obj) and _APPLY_NAME.search(attr):
                    found.append((module, attr, obj))
                elif isinstance(obj, type) and obj.__module__ == module_name:
                    for member, raw in vars(obj).items():
                        if isinstance(raw, staticmethod) and _APPLY_NAME.search(member):
                            found.append((obj, member, raw))
        return found

    def run(self) -> None:
        for module in self.model.modules():
            if id(module) in self.sources:
                module.forward = self._stub(self.sources[id(module)])
        for index, layer in enumerate(self.layers):
            layer.register_forward_pre_hook(self._enter(index), with_kwargs=True)
            layer.register_forward_hook(self._leave)
        patched = self._apply_functions()
        try:
            for owner, name, original in patched:
                function = original.__func__ if isinstance(original, staticmethod) else original
                wrapped = self._wrapper(name, function)
                setattr(owner, name, staticmethod(wrapped) if isinstance(owner, type) else wrapped)
            self._forward()
        finally:
            for owner, name, original in patched:
                setattr(owner, name, original)
        if self.table is not None:
            self._adopt_table_calls()

    def _enter(self, index: int) -> Callable[..., None]:
        def hook(module: torch.nn.Module, args: Any, kwargs: Any) -> None:
            self.current = index
            self.received[index] = self._tags_in(list(args) + list(kwargs.values()))

        return hook

    def _leave(self, module: torch.nn.Module, args: Any, output: Any) -> None:
        self.current = None

    def _adopt_table_calls(self) -> None:
        """Table families pass slices of their own table: mark the ``sin``/``cos`` (or
        ``sinusoidal_pos``) arguments of their apply calls as the table's output."""
        assert self.table is not None
        table = self.table.twin
        assert isinstance(table, _SinusoidTable)
        cos, sin = table.rows(torch.tensor([_PROBE_POSITION]))
        self.outputs.append(_Output(self.table, None, {}, (1, _TRACE_TOKENS), (cos, sin)))
        index = len(self.outputs) - 1
        for call in self.calls:
            for arg in [*call.args, *call.kwargs.values()]:
                if arg.kind == "tensor" and re.search(r"sin|cos", arg.name):
                    arg.kind, arg.output = "rope", index
                    arg.stride, arg.offset = (), 0

    def _forward(self) -> None:
        hidden = getattr(self.config, "hidden_size", None)
        n = _TRACE_TOKENS
        with self.mode:
            positions = torch.arange(n)[None]
            attempts: list[dict[str, Any]] = []
            ids = torch.zeros(1, n, dtype=torch.int64)
            if isinstance(hidden, int):
                attempts.append({"inputs_embeds": torch.empty(1, n, hidden)})
            attempts.append({"input_ids": ids})
            if getattr(self.config, "is_encoder_decoder", False):
                attempts.append({"input_ids": ids, "decoder_input_ids": ids})
            attempts += self._audio_inputs()
        extra: dict[str, Any] = {"position_ids": positions, "use_cache": False}
        accepted = self._forward_parameters()
        if accepted and not any(p.kind is p.VAR_KEYWORD for p in accepted.values()):
            # An audio encoder takes neither: it runs on its own frames' positions.
            extra = {k: v for k, v in extra.items() if k in accepted}
        errors = []
        for inputs in attempts:
            self.calls.clear()
            self.received.clear()
            self.outputs.clear()
            try:
                with self.mode, torch.no_grad():
                    self.model(**inputs, **extra)
                return
            except Exception as exc:
                errors.append(f"{next(iter(inputs))}: {type(exc).__name__}: {exc}"[:400])
        raise RuntimeError(" | ".join(errors))

    def _forward_parameters(self) -> Mapping[str, inspect.Parameter]:
        try:
            return inspect.signature(self.model.forward).parameters
        except (TypeError, ValueError):
            return {}

    def _audio_inputs(self) -> list[dict[str, Any]]:
        """What an audio encoder's forward takes instead of tokens, by its parameter's name: a
        second of 16 kHz waveform (``input_values``), or frames of features as wide as one of
        the config's feature widths says (``input_features``) — or one of its sub-configs', for
        a model that passes its audio encoder one (Nemotron3-Diarization's ``audio_config``)."""
        accepted = self._forward_parameters()
        attempts: list[dict[str, Any]] = []
        if "input_values" in accepted:
            attempts.append({"input_values": torch.empty(1, 16000)})
        if "input_features" in accepted:
            for config in (self.config, *(c for _, c in _sub_configs(self.config))):
                for key in _FEATURE_WIDTHS:
                    width = getattr(config, key, None)
                    if isinstance(width, int) and width > 0:
                        attempts.append({"input_features": torch.empty(1, 64, width)})
        return attempts


def _sub_configs(config: Any) -> list[tuple[str, Any]]:
    """``(key, sub-config)`` for each sub-config ``config`` holds (``sub_configs``), in order."""
    found = []
    for key in getattr(config, "sub_configs", None) or {}:
        child = getattr(config, key, None)
        if child is not None and child is not config and hasattr(child, "to_dict"):
            found.append((key, child))
    return found


# The config keys that give the width of an audio encoder's input frames.
_FEATURE_WIDTHS = ("feature_projection_input_dim", "num_mel_bins", "feature_size")


# --------------------------------------------------------------------------------------------
# Replaying an apply call on probes


def _rope_value(arg: _Arg, output: _Output, order: int) -> torch.Tensor:
    """The real tensor a rope argument held: the output's cos, sin (by the parameter's name, or
    else by order) or freqs_cis, through the same view the model took of it."""
    probe = output.probe
    low = arg.name.lower()
    if output.source.kind == "table":
        cos, sin = probe
        if "cos" in low and "sin" not in low:
            base = cos
        elif "sin" in low and "sinusoidal" not in low:
            base = sin
        else:  # RoFormer's sinusoidal_pos: the table row, sin then cos
            base = torch.cat([sin, cos], dim=-1)
        return base.reshape([1] * (len(arg.size) - 1) + [base.shape[-1]]).expand(arg.size)
    if len(probe) == 1:
        base = probe[0]
    elif "cos" in low:
        base = probe[0]
    elif "sin" in low:
        base = probe[1]
    else:
        base = probe[min(order, len(probe) - 1)]
    return base.as_strided(arg.size, arg.stride, arg.offset)


def _replay(call: _Call, outputs: list[_Output]) -> tuple[np.ndarray, int]:
    """The matrix (output width × input width) of the call's map from its first plain float
    tensor (q) to its first result, at position 1 with every token and head equal."""
    flat = [*call.args, *call.kwargs.values()]
    query = next((a for a in flat if a.kind == "tensor" and a.dtype.is_floating_point), None)
    if query is None:
        raise ValueError("the call has no query-like tensor argument")
    width = query.size[-1]
    columns = []
    for j in range(width):
        basis = torch.zeros(width, dtype=torch.float32)
        basis[j] = 1.0
        slots: list[Any] = []
        order = 0
        for arg in flat:
            if arg.kind == "value":
                slots.append(arg.value)
            elif arg.kind == "rope":
                slots.append(_rope_value(arg, outputs[arg.output], order))
                order += 1
            elif arg is query:
                slots.append(basis.expand(arg.size).to(arg.dtype).clone())
            elif arg.dtype.is_floating_point:
                slots.append(torch.zeros(arg.size, dtype=arg.dtype))
            else:
                slots.append(torch.full(arg.size, _PROBE_POSITION, dtype=arg.dtype))
        args = slots[: len(call.args)]
        kwargs = dict(zip(call.kwargs, slots[len(call.args) :], strict=True))
        with torch.no_grad():
            result = _first_tensor(call.function(*args, **kwargs))
        columns.append(result.reshape(-1, result.shape[-1])[0].to(torch.float64).numpy())
    return np.stack(columns, axis=1), width


def _first_tensor(result: Any) -> torch.Tensor:
    if isinstance(result, torch.Tensor):
        return result
    if isinstance(result, (tuple, list)):
        for item in result:
            if isinstance(item, torch.Tensor):
                return item
    raise TypeError(f"the apply call returned {type(result).__name__}")


def _read_layout(matrix: np.ndarray, width: int, inv_freq: np.ndarray, function: str) -> RopeLayout:
    """Pairs, angles and frequencies of the rotation ``matrix`` performs.

    The probes' other entries are exact zeros, so the outputs a basis vector reaches are exact:
    one for a passed dimension, the two of its pair for a rotated one, even where the angle at
    position 1 is 1e-8.
    """
    support = [tuple(int(o) for o in np.flatnonzero(matrix[:, j])) for j in range(width)]
    passed: list[int] = []
    pairs: list[PairRotation] = []
    seen: set[int] = set()
    freqs = inv_freq.astype(np.float64) * _PROBE_POSITION

    def other(detail: str) -> RopeLayout:
        return RopeLayout("other", function, width, (), (), 0, 0, "", (), detail)

    for j in range(width):
        if j in seen:
            continue
        outs = support[j]
        if len(outs) <= 1:
            passed.append(j)  # copied, scaled or zeroed, not turned
            seen.add(j)
            continue
        if len(outs) != 2:
            return other(f"input dim {j} reaches outputs {list(outs)}")
        partners = [k for k in range(j + 1, width) if support[k] == outs]
        if len(partners) != 1:
            return other(f"input dim {j}: {len(partners)} partners reach {list(outs)}")
        k = partners[0]
        seen.update((j, k))
        a, b = outs
        block = matrix[np.ix_([a, b], [j, k])]
        scale = math.hypot(block[0, 0], block[1, 0])
        angle = math.atan2(block[1, 0], block[0, 0])
        if not (
            abs(block[1, 1] - block[0, 0]) <= 1e-6 * scale
            and abs(block[0, 1] + block[1, 0]) <= 1e-6 * scale
        ):
            return other(f"pair {(j, k)} -> {(a, b)} is not a rotation: {block.tolist()}")
        best = -1
        if len(freqs):
            diff = np.abs(np.angle(np.exp(1j * (freqs - abs(angle)))))
            candidate = int(np.argmin(diff))
            if diff[candidate] <= 1e-5 * freqs[candidate] + 1e-9:
                best = candidate
        pairs.append(PairRotation((j, k), (a, b), angle, best, scale))
    signs = {1 if p.angle > 0 else -1 for p in pairs if p.angle != 0}
    sign = signs.pop() if len(signs) == 1 else 0
    kind, offset, order = _classify(tuple(pairs))
    rotated = tuple(sorted(d for p in pairs for d in p.inputs))
    return RopeLayout(
        kind, function, width, rotated, tuple(passed), offset, sign, order, tuple(pairs)
    )


def _classify(pairs: tuple[PairRotation, ...]) -> tuple[str, int, str]:
    if not pairs:
        return "none", 0, ""
    rotated = sorted(d for p in pairs for d in p.inputs)
    offset, r = rotated[0], len(rotated)
    by_first = sorted(pairs, key=lambda p: min(p.inputs))
    freq_seq = [p.freq for p in by_first]
    order = (
        "ascending"
        if freq_seq == list(range(len(freq_seq)))
        else "unmatched"
        if -1 in freq_seq
        else "permuted"
    )
    half = r // 2
    ins = {p.inputs for p in pairs}
    outs = {p.outputs for p in pairs}
    in_place = all(p.inputs == p.outputs for p in pairs)
    distances = {p.inputs[1] - p.inputs[0] for p in pairs}
    firsts = sorted(p.inputs[0] for p in pairs)
    if in_place and len(distances) == 1 and firsts == list(range(offset, offset + half)):
        # rotate_half over a span of 2·distance; a span wider than the rotated dimensions leaves
        # pairs whose frequency is zero (proportional rope) unturned
        return "rotate_half", offset, order
    if rotated != list(range(offset, offset + r)):
        return "other", offset, order
    inter = {(offset + 2 * i, offset + 2 * i + 1) for i in range(half)}
    split = {(offset + i, offset + i + half) for i in range(half)}
    if ins == inter and in_place:
        return "interleaved", offset, order
    if ins == inter and outs == split:
        return "interleaved_to_rotate_half", offset, order
    return "other", offset, order


# --------------------------------------------------------------------------------------------
# The reference


def _mrope_of(config: Any, twin: Any, layer_type: str | None) -> dict[str, Any] | None:
    section = getattr(twin, "mrope_section", None)
    if isinstance(section, dict):
        section = section.get(layer_type)
    params = getattr(config, "rope_parameters", None) or {}
    where = "rope_parameters"
    if layer_type is not None and isinstance(params.get(layer_type), dict):
        params = params[layer_type]
        where = f"rope_parameters[{layer_type!r}]"
    in_config = isinstance(params, dict) and params.get("mrope_section") is not None
    if section is None and in_config:
        section = params["mrope_section"]
    if section is None:
        return None
    found: dict[str, Any] = {
        "section": [int(s) for s in section],
        "source": f"{where}.mrope_section" if in_config else f"{type(twin).__name__} default",
    }
    for key in ("mrope_interleaved", "interleaved"):
        if isinstance(params, dict) and key in params:
            found[key] = params[key]
    return found


def _forward_fn(output: _Output) -> Callable[[npt.NDArray[np.int64]], tuple[F32, F32]]:
    def forward(positions: npt.NDArray[np.int64]) -> tuple[F32, F32]:
        return _run(output, output.source.build(), positions)

    return forward


def _grown_fn(output: _Output) -> Callable[[npt.NDArray[np.int64]], F32]:
    """The module's ``inv_freq`` after a first forward at the positions: a dynamic rope's
    frequencies grow there (transformers' ``dynamic_rope_update``), its initial ones do not
    turn those positions."""

    def grown(positions: npt.NDArray[np.int64]) -> F32:
        source = output.source
        module = source.build()
        if source.kind != "table":
            _run(output, module, positions)
        return dataclasses.replace(source, twin=module).inv_freq(output.layer_type)[0]

    return grown


def _run(output: _Output, module: Any, positions: npt.NDArray[np.int64]) -> tuple[F32, F32]:
    """``module`` (a fresh build of the output's source) run at ``positions``."""
    source = output.source
    ids = torch.from_numpy(np.ascontiguousarray(positions))
    if source.kind == "table":
        cos, sin = module.rows(ids)
        return cos.numpy(), sin.numpy()
    kwargs = {k: v for k, v in output.call_kwargs.items() if k != "position_ids"}
    rows = output.position_shape[0] if len(output.position_shape) == 3 else 0
    batch = ids[None] if rows == 0 else ids[None, None].expand(rows, 1, -1)
    with torch.no_grad(), quiet():
        out = module(torch.zeros(1, dtype=torch.float32), batch, **kwargs)
    if isinstance(out, torch.Tensor):
        cos, sin = out.real, out.imag
    else:
        cos, sin = out[0], out[1]
    n = ids.shape[-1]
    return (
        cos.reshape(-1, n, cos.shape[-1])[0].to(torch.float32).numpy(),
        sin.reshape(-1, n, sin.shape[-1])[0].to(torch.float32).numpy(),
    )


def _has_attention(layer: torch.nn.Module) -> bool:
    return any(
        "Attention" in type(m).__name__ and not _ATTENTION_FREE.search(type(m).__name__)
        for m in layer.modules()
    )


def reference_model(model_type: str, config: Mapping[str, Any] | None = None) -> ReferenceModel:
    """What the model type's own code computes for its text rope (see the module docstring).

    ``config``: a ``config.json`` as the Hub publishes it, else the config class's defaults.
    When the text model cannot be built or run under fake tensors (a default config its own
    model rejects, data-dependent code), the rotary modules of its modeling module are built
    from the text config alone and their apply function replayed with the usual arguments
    (``traced`` is then false: no NoPE layers are known, layers are assigned by ``layer_types``).
    Never raises for a model it cannot run at all: ``failure`` says why.
    """
    with quiet():
        full = build_config(model_type, config)
        path, text = text_config_of(full)
        layer_types = getattr(text, "layer_types", None)
        base: dict[str, Any] = {
            "model_type": model_type,
            "config_class": type(full).__name__,
            "text_config_path": path,
            "text_config_class": type(text).__name__,
            "text_model_type": str(getattr(text, "model_type", "")),
            "num_hidden_layers": int(getattr(text, "num_hidden_layers", 0) or 0),
            "head_dim": _head_dim(text),
            "config_layer_types": tuple(str(t) for t in layer_types) if layer_types else None,
        }
        try:
            trace = _Trace(text)
            trace.run()
        except Exception as exc:
            reason = f"{type(exc).__name__}: {exc}"[:600]
            try:
                static = _static(text, base, reason)
            except Exception as again:
                # The same error from the model and from its rotary module alone, on real
                # tensors, or from its constructor on the meta device: the model's own code
                # refuses this config.
                own = _error(again.__cause__ or again)
                if own not in reason:
                    own = _constructor_error(text) or own
                return ReferenceModel(
                    **base,
                    text_model_class="",
                    ropes=(),
                    nope_layers=(),
                    attention_free_layers=(),
                    other_rotary_modules=(),
                    notes=(f"trace: {reason}",),
                    traced=False,
                    failure=f"{type(again).__name__}: {again}"[:600],
                    rejected=own[:600] if own in reason else None,
                )
            # Built alone, its rope is measured; but where the model fails on a key that rope
            # is read from, the config is one its model cannot run for its rope's sake.
            rope_key_error = None if static.rejected else _rope_key_error(text)
            if rope_key_error is not None:
                static = dataclasses.replace(static, rejected=rope_key_error)
            return static
        return _assemble(trace, base)


def _error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _constructor_error(text: Any) -> str | None:
    """The error the text model's own constructor raises on the meta device (no memory, and no
    fake tensors that could be the cause), if it raises one."""
    try:
        with quiet(), torch.device("meta"):
            _model_class(text)._from_config(text)
    except Exception as exc:
        return _error(exc)
    return None


# Config keys a rope is read from: a model that fails on one of them (its default null) fails on
# its rope's own terms, and the service must refuse the config too.
_ROPE_KEYS = re.compile(
    r"\b(head_dim|layer_types|rope_parameters|rope_scaling|rope_theta|partial_rotary_factor"
    r"|rotary_dim|mrope_section)\b"
)


def _rope_key_error(text: Any) -> str | None:
    """The error the text model's own constructor raises on the meta device where the line of
    its modeling code that raises reads a key the rope is read from (Ministral's
    ``self.head_dim**-0.5`` with a null head_dim, LFM2-MoE's ``config.layer_types[layer_idx]``):
    a model that cannot run for a reason of its rope, not of its experts or vocabulary."""
    try:
        with quiet(), torch.device("meta"):
            _model_class(text)._from_config(text)
    except Exception as exc:
        frames = traceback.extract_tb(exc.__traceback__)
        own = [f for f in frames if "/transformers/models/" in f.filename.replace("\\", "/")]
        if own and _ROPE_KEYS.search(own[-1].line or ""):
            return f"{_error(exc)} ({Path(own[-1].filename).name}: {own[-1].line})"
    return None


def _record(
    base: dict[str, Any],
    config: Any,
    output: _Output,
    call: _Call,
    outputs: list[_Output],
    layers: Sequence[int],
) -> ReferenceRope:
    """The :class:`ReferenceRope` of ``output`` applied by ``call`` in ``layers``."""
    layer_types = base["config_layer_types"]
    inv_freq, scaling, rope_type = output.source.inv_freq(output.layer_type)
    try:
        matrix, width = _replay(call, outputs)
        layout = _read_layout(matrix, width, inv_freq, call.name)
        query = next(
            a
            for a in [*call.args, *call.kwargs.values()]
            if a.kind == "tensor" and a.dtype.is_floating_point
        )
        layout = dataclasses.replace(layout, head_slice=query.head)
    except Exception as exc:
        layout = RopeLayout(
            "unmeasured", call.name, 0, (), (), 0, 0, "", (), f"{type(exc).__name__}: {exc}"
        )
    cos_width = int(output.probe[0].shape[-1])
    output_kind = (
        "complex"
        if output.probe[0].is_complex()
        else "cos_sin_half"
        if cos_width == len(inv_freq) and layout.rotary_width == 2 * cos_width
        else "cos_sin"
    )
    names = (
        tuple(sorted({layer_types[i] for i in layers if i < len(layer_types)}))
        if layer_types
        else ()
    )
    head_dim = base["head_dim"] or (_head_dim(config, min(layers)) if layers else 0)
    cache = _cache_layout(output.probe[0], output_kind)
    return ReferenceRope(
        model_type=base["model_type"],
        layer_types=names,
        layers=tuple(sorted(layers)),
        source=output.source.kind,
        rotary_class=output.source.cls_name,
        rotary_path=output.source.path,
        call_layer_type=output.layer_type,
        rope_type=rope_type,
        inv_freq=inv_freq,
        attention_scaling=scaling,
        output=output_kind,
        cache_layout=cache,
        cos_width=cos_width,
        head_dim=head_dim,
        layout=layout,
        mrope=None
        if output.source.kind == "table"
        else _mrope_of(config, output.source.twin, output.layer_type),
        forward=_forward_fn(output),
        grown=_grown_fn(output),
    )


def _merge(ropes: list[ReferenceRope]) -> list[ReferenceRope]:
    """One record per distinct rope: modules that each layer builds for itself (RecurrentGemma,
    DeepSeek-V4's indexers) and compute the same thing are merged, their layers joined
    (``rotary_path`` keeps the first path, with ``*`` for the layer index)."""
    merged: dict[tuple[Any, ...], ReferenceRope] = {}
    for rope in ropes:
        key = (
            rope.rotary_class,
            rope.call_layer_type,
            rope.rope_type,
            rope.inv_freq.tobytes(),
            rope.attention_scaling,
            rope.output,
            rope.cache_layout,
            rope.layout.kind,
            rope.layout.rotated,
            rope.layout.offset,
            rope.layout.head_slice,
            re.sub(r"\.\d+\.", ".*.", rope.rotary_path),
        )
        if key in merged:
            first = merged[key]
            layers = tuple(sorted({*first.layers, *rope.layers}))
            types_ = tuple(sorted({*first.layer_types, *rope.layer_types}))
            path = re.sub(r"\.\d+\.", ".*.", first.rotary_path)
            merged[key] = dataclasses.replace(
                first, layers=layers, layer_types=types_, rotary_path=path
            )
        else:
            merged[key] = rope
    return list(merged.values())


def _cache_layout(cos: torch.Tensor, output: str) -> str:
    """How the rotary forward lays its frequencies along the last dimension, read off its cos at
    position 1: ``concatenated`` (``cat(freqs, freqs)``, the rotate_half cache),
    ``repeat_interleaved`` (each frequency twice in a row), ``half`` (each once) or
    ``complex``; ``other`` otherwise."""
    if output == "complex":
        return "complex"
    if output == "cos_sin_half":
        return "half"
    row = cos.reshape(-1, cos.shape[-1])[0]
    width = row.shape[-1]
    if width % 2:
        return "other"
    if torch.equal(row[: width // 2], row[width // 2 :]):
        return "concatenated"
    if torch.equal(row[0::2], row[1::2]):
        return "repeat_interleaved"
    return "other"


def _assemble(trace: _Trace, base: dict[str, Any]) -> ReferenceModel:
    notes = list(trace.notes)
    layer_types = base["config_layer_types"]
    uses: dict[tuple[str, str | None], list[int]] = {}
    first_call: dict[tuple[str, str | None], _Call] = {}
    first_output: dict[tuple[str, str | None], _Output] = {}
    functions: dict[tuple[str, str | None], set[str]] = {}
    outside: set[str] = set()
    for call in trace.calls:
        for index in sorted(call.outputs):
            output = trace.outputs[index]
            key = (output.source.path, output.layer_type)
            layers = uses.setdefault(key, [])
            if call.layer is None:
                outside.add(f"{output.source.path}[{output.layer_type}] by {call.name}")
            elif call.layer not in layers:
                layers.append(call.layer)
            first_call.setdefault(key, call)
            first_output.setdefault(key, output)
            functions.setdefault(key, set()).add(call.name)
    for (path, layer_type), names in functions.items():
        if len(names) > 1:
            notes.append(f"{path}[{layer_type}] is applied by {sorted(names)}")
    if outside:
        notes.append(f"applied outside the decoder layers: {sorted(outside)}")
    rope_layers = {layer for layers in uses.values() for layer in layers}
    # An apply function called on no traced rotary output: a rope from a module the harness
    # does not stub (CLVP's encoder's, whose forward takes no position ids), unmeasured here.
    blind = sorted(
        {
            (c.layer, c.name)
            for c in trace.calls
            if not c.outputs
            and c.layer is not None
            and any(
                a.kind == "tensor" and re.search(r"cos|sin|freq", a.name)
                for a in [*c.args, *c.kwargs.values()]
            )
        }
    )
    if blind:
        notes.append(
            f"layers call {blind[:8]} on no traced rotary output: a rope not measured, and "
            "those layers are not counted as NoPE"
        )
    received_only = sorted(i for i, t in trace.received.items() if t and i not in rope_layers)
    if received_only:
        notes.append(f"layers {received_only} receive a rotary output and apply none")
    ropes = _merge(
        [
            _record(base, trace.config, first_output[key], first_call[key], trace.outputs, layers)
            for key, layers in sorted(
                uses.items(), key=lambda kv: (min(kv[1], default=10**9), kv[0][0], str(kv[0][1]))
            )
        ]
    )
    unseen = {layer for layer, _ in blind}
    nope = tuple(i for i in range(len(trace.layers)) if i not in rope_layers | unseen)
    free = tuple(
        i
        for i in nope
        if (layer_types and i < len(layer_types) and _ATTENTION_FREE.search(layer_types[i]))
        or not _has_attention(trace.layers[i])
    )
    used = {r.rotary_path for r in ropes}
    others = tuple(
        sorted(
            f"{s.path} ({s.cls_name})"
            for s in trace.sources.values()
            if s.path not in used and re.sub(r"\.\d+\.", ".*.", s.path) not in used
        )
    )
    return ReferenceModel(
        **base,
        text_model_class=type(trace.model).__name__,
        ropes=tuple(ropes),
        nope_layers=nope,
        attention_free_layers=free,
        other_rotary_modules=others,
        notes=tuple(notes),
        traced=True,
    )


_QUERY_NAMES = ("q", "xq", "query", "query_states", "tensor", "x", "hidden_states", "t")
_KEY_NAMES = ("k", "xk", "key", "key_states")


def _static(text: Any, base: dict[str, Any], reason: str) -> ReferenceModel:
    """The rope of ``text`` without running its model: every rotary class of its modeling module
    built from ``text`` alone, its apply function replayed with the usual arguments."""
    config_module = type(text).__module__
    module = importlib.import_module(config_module.replace(".configuration_", ".modeling_"))
    wanted = type(text).__name__
    classes = [
        obj
        for name, obj in vars(module).items()
        if isinstance(obj, type)
        and issubclass(obj, torch.nn.Module)
        and _ROTARY_CLASS.search(name)
        and ("Text" in name or not _VISION.search(name))
        and _takes_positions(obj)
    ]
    # A class annotated with the text config's own class is the text model's.
    annotated = [
        c
        for c in classes
        if wanted in str(inspect.signature(c.__init__).parameters.get("config", ""))
    ]
    sources = []
    errors: list[Exception] = []
    for cls in annotated or classes:

        def build(cls: type = cls) -> Any:
            with quiet(), torch.no_grad():
                return cls(text)

        try:
            sources.append(_Source("module", "(static)", cls.__name__, build, build()))
        except Exception as exc:
            exc.add_note(cls.__name__)
            errors.append(exc)
    built_from = ""
    if not sources:
        # A model that builds its rotary module from a sub-config it passes down (BLT's
        # encoder_config …, Nemotron3-Diarization's audio_config): built the same way, from
        # each sub-config that builds it; the first is measured, the others listed.
        for key, sub in _sub_configs(text):
            for cls in classes:

                def build_sub(cls: type = cls, sub: Any = sub) -> Any:
                    with quiet(), torch.no_grad():
                        return cls(sub)

                try:
                    twin = build_sub()
                except Exception:
                    continue
                sources.append(_Source("module", f"(static {key})", cls.__name__, build_sub, twin))
                if not built_from:
                    built_from, text = key, sub
                    base = {
                        **base,
                        "num_hidden_layers": int(getattr(sub, "num_hidden_layers", 0) or 0),
                        "head_dim": _head_dim(sub),
                        "config_layer_types": tuple(
                            map(str, getattr(sub, "layer_types", None) or ())
                        )
                        or None,
                    }
                break
    if not sources:
        first = f" ({errors[0].__notes__[-1]}: {_error(errors[0])})" if errors else ""
        raise LookupError(
            f"no rotary class of {module.__name__} builds from {wanted}{first}"
        ) from (errors[0] if errors else None)
    source = sources[0]
    twin = source.twin
    prefixes = sorted(
        n[: -len("_inv_freq")]
        for n, _ in twin.named_buffers()
        if n.endswith("_inv_freq")
        and n != "original_inv_freq"
        and not n.endswith(("_original_inv_freq", "_long_inv_freq"))
    )
    layer_types = base["config_layer_types"]
    n_layers = base["num_hidden_layers"]
    apply = _static_apply(module)
    origin = f"the sub-config {built_from}" if built_from else "the text config alone"
    notes = [
        f"not traced ({reason}); built {source.cls_name} from {origin}: "
        "layers by layer_types, NoPE layers unknown"
    ]
    if len(sources) > 1 and built_from:
        notes.append(
            f"{len(sources)} sub-configs build {source.cls_name}: the model turns several ropes, "
            f"in blocks of its own; measured the first ({built_from})"
        )
    ropes = []
    outputs: list[_Output] = []
    rejected = None
    for layer_type in prefixes or [None]:
        kwargs = {"layer_type": layer_type} if layer_type is not None else {}
        shape = (1, 1)
        with torch.no_grad(), quiet():
            out = twin(
                torch.zeros(1), torch.full(shape, _PROBE_POSITION, dtype=torch.int64), **kwargs
            )
        outs = out if isinstance(out, tuple) else (out,)
        outputs.append(_Output(source, layer_type, kwargs, shape, tuple(o.clone() for o in outs)))
        index = len(outputs) - 1
        if layer_type is not None and layer_types:
            layers = [i for i, t in enumerate(layer_types) if t == layer_type]
        else:
            layers = list(range(n_layers))
        head_dim = base["head_dim"] or _head_dim(text, layers[0] if layers else None)
        call = _static_call(apply, outputs[index], index, twin, head_dim)
        width = next(a.size[-1] for a in call.args if a.kind == "tensor")
        if width != head_dim and _same_mismatch(reason, head_dim, width):
            rejected = (
                f"{apply[0]} rejects a q of the head dimension {head_dim} with this "
                f"{layer_type or 'rope'}'s cos/sin, {width} wide, as the model did: {reason}"
            )[:600]
        elif width != head_dim:
            notes.append(
                f"{apply[0]} rejects a q of the head dimension {head_dim} with this "
                f"{layer_type or 'rope'}'s cos/sin: replayed on the rotary width {width} "
                "(the model itself may fail with this config)"
            )
        ropes.append(_record(base, text, outputs[index], call, outputs, layers))
    return ReferenceModel(
        **base,
        text_model_class="",
        ropes=tuple(ropes),
        nope_layers=(),
        attention_free_layers=(),
        other_rotary_modules=tuple(f"{s.path} ({s.cls_name})" for s in sources[1:]),
        notes=tuple(notes),
        traced=False,
        rejected=rejected,
    )


def _same_mismatch(reason: str, head_dim: int, width: int) -> bool:
    """Whether the model's own run failed broadcasting a cos/sin ``width`` wide against q of
    ``head_dim`` (Qwen3-Omni's default 73-wide heads against its 74-wide cache): the model's
    code rejects the config, not the harness's fake tensors."""
    # Fake tensors' words for it: "Attempting to broadcast a dimension of length 74 at -1! …
    # expected shape should be broadcastable to [1, 28, 3, 73]", within one attempt's text.
    said = rf"broadcast a dimension of length {width} at -1![^|]*broadcastable to \[[^\]|]*"
    return re.search(rf"{said}\b{head_dim}\]", reason) is not None


def _static_apply(module: types.ModuleType) -> tuple[str, Callable[..., Any]]:
    names = vars(module)
    for name in ("apply_rotary_pos_emb", "apply_rotary_emb", "apply_multimodal_rotary_pos_emb"):
        if inspect.isfunction(names.get(name)):
            return name, names[name]
    for name, obj in names.items():
        if inspect.isfunction(obj) and name.startswith("apply_rotary") and "vision" not in name:
            return name, obj
    raise LookupError(f"{module.__name__} has no apply_rotary function")


def _static_call(
    apply: tuple[str, Callable[..., Any]], output: _Output, index: int, twin: Any, head_dim: int
) -> _Call:
    """The apply call a typical attention makes: q and k of shape (1, 1, 1, width), then the
    module's outputs by parameter name; ``width`` is the head dimension, or the rotary width
    where the function rotates exactly what it is given."""
    name, function = apply
    probe = output.probe[0]
    rotary = int(probe.shape[-1]) * (2 if probe.is_complex() else 1)
    params = inspect.signature(function).parameters
    last_error: Exception | None = None
    for width in dict.fromkeys([head_dim, rotary]):
        args: list[_Arg] = []
        kwargs: dict[str, _Arg] = {}
        for pname, param in params.items():
            low = pname.lower()
            if pname in _QUERY_NAMES or pname in _KEY_NAMES:
                arg = _Arg("tensor", size=(1, 1, 1, width), name=pname)
            elif "cos" in low or "sin" in low or "freq" in low:
                arg = _Arg(
                    "rope",
                    output=index,
                    size=tuple(probe.shape),
                    stride=tuple(probe.stride()),
                    name=pname,
                )
            elif "mrope_section" in low and getattr(twin, "mrope_section", None) is not None:
                arg = _Arg("value", twin.mrope_section, name=pname)
            elif param.default is not inspect.Parameter.empty:
                continue
            else:
                raise LookupError(f"{name}: cannot supply parameter {pname!r}")
            if param.kind is inspect.Parameter.KEYWORD_ONLY:
                kwargs[pname] = arg
            else:
                args.append(arg)
        call = _Call(function, name, None, args, kwargs)
        try:
            _replay(call, [output] * (index + 1))
            return call
        except Exception as exc:
            last_error = exc
    assert last_error is not None
    raise last_error


def reference_ropes(
    model_type: str, config: Mapping[str, Any] | None = None
) -> list[ReferenceRope]:
    """``reference_model(model_type, config).ropes``; raises when the harness cannot run it."""
    model = reference_model(model_type, config)
    if model.failure is not None:
        raise RuntimeError(f"{model_type}: {model.failure}")
    return list(model.ropes)

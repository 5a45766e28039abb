"""``POST /v1/rope/config`` never names a rope other than the model's (issue 22).

For every model type of the installed transformers whose text model has a rope (discovered by
``tests/reference/transformers_ropes.py``, not listed by hand), its default config and, for the
families that keep their rope in keys of their own, the shape the Hub publishes: the service's
answer is either a 422 naming a field, or parameters whose ``recipe=framework`` table is what
the model's own rotary module computes for every layer that has attention — its width, its
pairing, its frequencies, its attention factor and its cos/sin, within the framework recipe's
bounds (docs/numbers.md, "The bounds the suite holds").
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import multiprocessing
import re
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
import torch
from transformers import AutoConfig

from posenc.errors import ParameterError
from posenc.schemes.rope.models import config as rope_config
from posenc.schemes.rope.models.config import LayerRope, ModelRope
from posenc.schemes.rope.params import RopeParams
from posenc.schemes.rope.recipes import framework
from tests.hub_configs import HUB_CONFIGS
from tests.reference import class_defaults
from tests.reference.test_framework_recipe import pow_differs, ulps
from tests.reference.transformers_ropes import (
    ReferenceModel,
    ReferenceRope,
    reference_model,
    rotary_model_types,
)

_LAYOUTS = {
    "rotate_half": "split",
    "interleaved": "interleaved",
    "interleaved_to_rotate_half": "interleaved_to_rotate_half",
}
_POSITIONS = np.array([0, 1, 2, 100, 1000, 4095, 32767, 10**6])


@pytest.fixture(autouse=True)
def _quiet_transformers() -> Iterator[None]:
    logging.disable(logging.WARNING)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield
    logging.disable(logging.NOTSET)


def _misfit(ours: ModelRope, model: ReferenceModel) -> str | None:
    """Why ``ours`` is not the rope of every layer of ``model``; None when it is."""
    theirs = _merged(model.ropes)
    answered = {frozenset(rope.layers or ()): rope for rope in ours.ropes}
    if set(answered) != set(theirs) or sum(map(len, theirs)) != len(set().union(*theirs)):
        return f"the model's ropes apply to {_layer_sets(theirs)}, answered {_layer_sets(answered)}"
    if set(ours.nope_layers) != set(model.nope_layers):
        theirs_nope, ours_nope = sorted(model.nope_layers)[:8], list(ours.nope_layers)[:8]
        return f"the model's layers {theirs_nope} have no rope, answered {ours_nope}"
    for layers, rope in theirs.items():
        if why := _rope_misfit(answered[layers], rope):
            return f"layers {sorted(layers)[:4]}…: {why}"
    return None


def _merged(ropes: tuple[ReferenceRope, ...]) -> dict[frozenset[int], ReferenceRope]:
    """The model's ropes by the layers that apply them; two rotary modules that compute the
    same table (one per layer type, with equal parameters) are one rope."""
    merged: dict[tuple[Any, ...], tuple[set[int], ReferenceRope]] = {}
    for rope in ropes:
        key = (
            rope.inv_freq.tobytes(),
            rope.attention_scaling,
            rope.output,
            rope.cos_width,
            rope.layout.kind,
        )
        layers, kept = merged.setdefault(key, (set(), rope))
        layers.update(rope.layers)
        if kept.layout.input_width != kept.head_dim and rope.layout.input_width == rope.head_dim:
            # Judged where it turns the attention's own heads (DeepSeek-V4's indexer turns
            # the tail of heads of a width of its own by the same rope).
            merged[key] = (layers, rope)
    return {frozenset(layers): rope for layers, rope in merged.values()}


def _layer_sets(ropes: Mapping[frozenset[int], Any]) -> list[list[int]]:
    return sorted(sorted(layers)[:6] for layers in ropes)


def _rope_misfit(answered: LayerRope, rope: ReferenceRope) -> str | None:
    rope = _in_pair_order(rope)
    ours, layout = answered.params, rope.layout
    applied = answered.apply or ours.layout
    sign = 1
    if applied == "reversed":  # the cache's own pairs, turned by −θ
        applied, sign = ours.layout, -1
    pairing = (_LAYOUTS.get(layout.kind), layout.offset, layout.sign, layout.frequency_order)
    if pairing != (applied, answered.rotary_offset, sign, "ascending"):
        return (
            f"the model pairs {layout.kind} (offset {layout.offset}), answered {applied} "
            f"(offset {answered.rotary_offset})"
        )
    # A proportional rope's cache spans the head, of which the first rotary_pairs pairs turn.
    turned = ours.d_model if ours.rotary_pairs is None else 2 * ours.rotary_pairs
    if rope.rotary_width != turned:
        return f"the model turns {rope.rotary_width} dimensions, answered {turned}"
    if layout.span != ours.d_model:
        return f"the model pairs over {layout.span} dimensions, answered d_model={ours.d_model}"
    return _values_misfit(ours, rope)


def _in_pair_order(rope: ReferenceRope) -> ReferenceRope:
    """A rope whose module keeps its frequencies permuted (ERNIE-4.5-VL's, pre-rotated for its
    M-RoPE sections) judged by what each pair turns by: its buffer read in pair order. Pair i
    then turns by frequency i, and it is the answer's ω_i that those values must match."""
    layout = rope.layout
    order = [pair.freq for pair in layout.pairs]
    if layout.frequency_order != "permuted" or sorted(order) != list(range(len(rope.inv_freq))):
        return rope
    return dataclasses.replace(
        rope,
        inv_freq=rope.inv_freq[order],
        layout=dataclasses.replace(layout, frequency_order="ascending"),
        grown=lambda positions: rope.inv_freq_at(positions)[order],
    )


def _reference_rows(
    rope: ReferenceRope,
) -> tuple[npt.NDArray[np.int64], tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]]:
    """The model's cos/sin at as many of the probed positions as it computes: a rope held as a
    table (GPT-J's, RoFormer's) has rows for its model's positions only."""
    for count in range(len(_POSITIONS), 0, -1):
        try:
            return _POSITIONS[:count], rope.cos_sin(_POSITIONS[:count])
        except IndexError:
            continue
    raise AssertionError("the reference computes not even position 0")


def _values_misfit(ours: RopeParams, rope: ReferenceRope) -> str | None:
    positions, (cos, sin) = _reference_rows(rope)
    inv_freq, attention = framework.frequencies(ours, int(positions[-1]) + 1)
    # The frequencies the module turned those positions by: a dynamic rope's grow there.
    off = ulps(inv_freq, rope.inv_freq_at(positions))
    # torch's float32 pow is not correctly rounded: where it differs from ours, the reciprocal
    # can land 2 ulp away; every other frequency is the model's, bit for bit.
    allowed = np.where(pow_differs(ours, int(positions[-1]) + 1), 2, 0)
    if (off > allowed).any():
        return f"inv_freq {off.max()} ulp from the model's"
    if attention != rope.attention_scaling:
        return f"attention factor {attention}, the model's {rope.attention_scaling}"
    table = framework.encode(ours, positions, "float32", "cos_sin")
    same = off == 0
    if cos.shape[-1] == ours.d_model:
        mask = np.concatenate([same, same]) if ours.layout == "split" else np.repeat(same, 2)
        served = table
    elif cos.shape[-1] == ours.d_model // 2:  # one value per frequency; the apply call expands
        mask = same
        half = ours.d_model // 2
        served = table[:, :, :half] if ours.layout == "split" else table[:, :, 0::2]
    else:
        return f"the model's cos is {cos.shape[-1]} wide, answered d_model={ours.d_model}"
    worst = max(
        ulps(served[0], cos)[:, mask].max(initial=0), ulps(served[1], sin)[:, mask].max(initial=0)
    )
    bound = 1 if attention == 1 else 2  # an attention factor multiplies: a second rounding
    return f"cos/sin {worst} ulp from the model's" if worst > bound else None


def _verdict(case: tuple[str, Mapping[str, Any] | None]) -> tuple[str, str]:
    """right, refused (a 422 naming a field), wrong, or unmeasured (the harness could not build
    or run the model). A config the model's own code refuses must be refused. Anything else the
    reader raises fails the test."""
    model_type, config = case
    try:
        model = reference_model(model_type, config)
        body = dict(config) if config is not None else AutoConfig.for_model(model_type).to_dict()
    except Exception as error:  # transformers could not build this model's config
        return "unmeasured", f"{type(error).__name__}: {error}"
    if model.failure and not model.rejected:
        return "unmeasured", model.failure
    try:
        ours = rope_config.read(body)
    except ParameterError as error:
        also = f" (the model's own code refuses it too: {model.rejected})" if model.rejected else ""
        return "refused", f"{error.param}: {error.message}{also}"
    if model.rejected:  # the model computes no rope for this config: any answer is not its
        return "wrong", f"the model refuses this config ({model.rejected}); answered a rope"
    why = _misfit(ours, model)
    return ("wrong", why) if why else ("right", "")


def _quiet_worker() -> None:

    torch.set_num_threads(1)  # two workers on two cores, not four threads fighting
    logging.disable(logging.WARNING)
    warnings.simplefilter("ignore")


@pytest.fixture(scope="module")
def verdicts() -> dict[str, tuple[str, str]]:
    return measure()


def measure() -> dict[str, tuple[str, str]]:
    """Every model type's verdict; the models are built in two worker processes, one per core
    (a few hundred model instantiations take minutes one at a time)."""
    cases: dict[str, tuple[str, Mapping[str, Any] | None]] = {
        name: (name, None) for name in rotary_model_types()
    }
    cases.update({f"{name} (Hub)": (c["model_type"], c) for name, c in HUB_CONFIGS.items()})
    context = multiprocessing.get_context("spawn")
    with context.Pool(2, initializer=_quiet_worker) as pool:
        return dict(zip(cases, pool.map(_verdict, list(cases.values()), chunksize=4), strict=True))


def test_no_model_type_is_answered_with_a_rope_it_does_not_use(
    verdicts: dict[str, tuple[str, str]],
) -> None:
    wrong = {name: why for name, (verdict, why) in verdicts.items() if verdict == "wrong"}
    assert not wrong, "\n".join(f"{name}: {why}" for name, why in sorted(wrong.items()))


def test_the_models_page_reports_the_measured_tally(verdicts: dict[str, tuple[str, str]]) -> None:
    tally = collections.Counter(verdict for verdict, _ in verdicts.values())
    page = (Path(__file__).resolve().parents[2] / "docs" / "models.md").read_text()
    # | verdict | what it means | cases |
    row = re.compile(r"^\| (right|refused|wrong|unmeasured) \|[^|\n]*\| (\d+) \|$", re.M)
    stated = {verdict: int(count) for verdict, count in row.findall(page)}
    verdicts_named = ("right", "refused", "wrong", "unmeasured")
    assert stated == {verdict: tally[verdict] for verdict in verdicts_named}
    assert all(verdicts[f"{name} (Hub)"][0] == "right" for name in HUB_CONFIGS)


def test_a_dynamic_rope_is_measured_where_its_frequencies_grow() -> None:
    # Compared with its module's initial frequencies, it was measured wrong (issue 34).
    config = HUB_CONFIGS["Llama-2 dynamic NTK"]
    assert _verdict(("llama", config)) == ("right", "")


_OWN_REFUSAL = "(the model's own code refuses it too:"


def type_tally(verdicts: Mapping[str, tuple[str, str]]) -> tuple[int, int, int]:
    """(types, right on their default configs, right on a Hub-shaped config only): a type whose
    default config its own model cannot run (the harness saw the model raise) counts by the
    config the Hub publishes for it, measured right."""
    types = {name: said for name, said in verdicts.items() if "(" not in name}
    on_hub = {
        HUB_CONFIGS[name[: -len(" (Hub)")]]["model_type"]
        for name, (said, _) in verdicts.items()
        if name.endswith(" (Hub)") and said == "right"
    }
    right = sum(said == "right" for said, _ in types.values())
    hub_only = sum(
        said == "refused" and _OWN_REFUSAL in why and name in on_hub
        for name, (said, why) in types.items()
    )
    return len(types), right, hub_only


def test_the_models_page_reports_the_types_answered_right(
    verdicts: dict[str, tuple[str, str]],
) -> None:
    types, right, hub_only = type_tally(verdicts)
    page = (Path(__file__).resolve().parents[2] / "docs" / "models.md").read_text()
    stated = re.search(
        r"Of the (\d+) types, (\d+) are right on their default configs and (\d+) more on the "
        r"Hub-shaped configs above \((\d+) %\)",
        " ".join(page.split()),
    )
    assert stated is not None
    assert [int(n) for n in stated.groups()] == [
        types,
        right,
        hub_only,
        100 * (right + hub_only) // types,
    ]


def test_class_defaults_are_current(verdicts: dict[str, tuple[str, str]]) -> None:
    """The generated table of answered model types and their config classes' defaults is what
    the installed transformers and this measurement give (regenerate it with
    ``python -m tests.reference.class_defaults``)."""
    assert class_defaults.MODULE.read_text() == class_defaults.render(
        class_defaults.answered(verdicts)
    )

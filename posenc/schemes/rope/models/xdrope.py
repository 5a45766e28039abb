"""HunYuan-VL's text rope (XD-RoPE) as a text token turns it: the sections read, checked and
set aside.

Its rotary module (transformers' ``HunYuanVLRotaryEmbedding``) computes the frequencies once
per axis of ``rope_parameters.mrope_section`` (``xdrope_section`` in its checkpoints, 3 or 4
axes: position, width, height, image index) and gives each axis one chunk of the cos/sin
``cat(freqs, freqs)``, the chunks ``2 · section`` wide. A text token's ids are equal on every
axis, so its cos/sin is the plain rotate_half rope of the whole head: what
``POST /v1/rope/config`` answers (the ids of image tokens, ``POST /v1/rope/positions``, are
not answered). The module cannot run without the sections (``len(None)``), and its config class
refuses sections that are not integers summing to ``head_dim / 2``; its attention cannot be
built without ``head_dim`` (its class default, null, fails at ``head_dim ** -0.5``). Its
checkpoints' rope type ``xdrope`` is ``dynamic`` once the config class has read it (with an
``alpha``: HunYuan's fixed stretch of the base, :func:`ntk_alpha`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from posenc.errors import InconsistentError, ParameterError
from posenc.schemes.rope.models.families import Family
from posenc.schemes.rope.models.values import (
    ROPE_DICTS,
    class_defaults,
    first,
    integer,
    number,
    rope_dict,
    sections,
)
from posenc.schemes.rope.params import RopeParams

_SECTION_KEYS = ("mrope_section", "xdrope_section")
# Its config class's sections: (position,) width, height, image index.
_AXES = (3, 4)


def text_rope_of(text: Mapping[str, Any]) -> dict[str, Any]:
    """``text`` (a HunYuan-VL text model's config) with its sections checked and taken out of
    its rope dict, and the rope type ``xdrope`` read as ``dynamic``, as its config class
    converts it."""
    head = integer(text, "head_dim", "")
    assert head is not None  # its family requires it (Family.required)
    where, rope = rope_dict(text)
    # Checked, then set aside: a text token turns every frequency, whichever axis it is from.
    _section(rope, where, head)
    plain = {key: value for key, value in rope.items() if key not in _SECTION_KEYS}
    for key in ("rope_type", "type"):
        if plain.get(key) == "xdrope":
            plain[key] = "dynamic"
    rest = {key: value for key, value in text.items() if key not in ROPE_DICTS}
    return {**rest, where: plain}


def _section(rope: Mapping[str, Any], where: str, head: int) -> None:
    given = {key: rope[key] for key in _SECTION_KEYS if rope.get(key) is not None}
    if not given:
        raise InconsistentError(
            f"{where}.mrope_section",
            "is required: HunYuan-VL's rotary module turns its rope over len(mrope_section) axes",
        )
    values = {key: sections(value, f"{where}.{key}", _AXES) for key, value in given.items()}
    if len(set(values.values())) > 1:
        raise InconsistentError(
            f"{where}.xdrope_section", "differs from mrope_section (its legacy name)"
        )
    key, section = next(iter(values.items()))
    if 2 * sum(section) != head:
        raise InconsistentError(
            f"{where}.{key}",
            f"{list(section)} sums to {sum(section)}, not head_dim / 2 = {head // 2}",
        )


def ntk_alpha(
    text: Mapping[str, Any], where: str, rope: Mapping[str, Any], family: Family
) -> tuple[RopeParams, float]:
    """HunYuan's ntk_alpha: the default rope of the whole head, its base stretched to
    ``rope_theta · alpha^(head_dim/(head_dim − 2))`` in float64 as transformers computes it
    (its rotary module then rounds the base to float32, as it does any base), the dynamic
    scaling's own keys unread. ``head_dim`` as given: the module reads ``config.head_dim``."""
    alpha = number(rope, "alpha", where)
    assert alpha  # the caller's condition: a nonzero alpha
    if alpha < 0:
        raise ParameterError(f"{where}.alpha", f"must be positive, got {alpha}")
    if number(rope, "factor", where) is None:
        # Required of rope_type dynamic by transformers' validation, though ntk_alpha reads none.
        raise InconsistentError(
            f"{where}.factor", "is required with rope_type dynamic, alpha or not (unread with it)"
        )
    head = integer(text, "head_dim", "")
    if head is None or head <= 2:
        raise InconsistentError(
            "head_dim", "is required with alpha (more than 2): ntk_alpha reads d/(d − 2) of it"
        )
    theta = first(
        number(rope, "rope_theta", where),
        number(text, "rope_theta", ""),
        class_defaults(text).get("rope_theta"),
        family.default_base,
    )
    try:
        base = theta * alpha ** (head / (head - 2))
    except OverflowError:
        base = math.inf
    try:
        return RopeParams(d_model=head, base=base, layout=family.layout), 1.0
    except ParameterError as error:
        if error.param == "base":
            raise InconsistentError(
                f"{where}.alpha",
                f"stretches rope_theta {theta} to {base:.6g}, outside the base's range: "
                f"{error.message}",
            ) from None
        raise

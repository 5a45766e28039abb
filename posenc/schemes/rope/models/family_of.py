"""Which family a text model's config belongs to, and the switches of its own that it reads:
whether its rope is on at all, and the pairs its q/k turn in. A config of a family the service
does not answer, or of a model type not measured against transformers, is refused here,
naming the key."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from posenc.errors import ParameterError
from posenc.schemes.rope.models.class_defaults import CLASS_DEFAULTS
from posenc.schemes.rope.models.families import APPLY_KEYS, FAMILIES, UNANSWERED_KEYS, Family


def family_of(text: Mapping[str, Any]) -> Family:
    """The config's family (Llama's conventions when it names none), or a 422 naming the key
    that makes its rope something the service does not answer."""
    for key, why in UNANSWERED_KEYS.items():
        if text.get(key) is not None:
            raise ParameterError(key, why)
    model_type = text.get("model_type")
    if model_type is None:
        return Family()  # a config that names no family is read by Llama's conventions
    family = FAMILIES.get(model_type, Family()) if isinstance(model_type, str) else Family()
    if family.unanswered:
        raise ParameterError("model_type", f"{model_type}: {family.unanswered}")
    if model_type not in CLASS_DEFAULTS:
        raise ParameterError(
            "model_type",
            f"{model_type!r} is not among the model types whose rope was measured against "
            "transformers; when in doubt the service answers no rope rather than a wrong one",
        )
    return family


def rope_off(text: Mapping[str, Any], family: Family) -> bool:
    """Whether the family's switch leaves every layer without a rope; switched on, its rope is
    read, or refused where the service does not read it yet."""
    if family.applies_no_rope:
        return True
    switch = family.rope_switch
    if switch is None:
        return False
    given = text.get(switch.key)
    if not (given if switch.value is None else given == switch.value):
        return True
    if switch.read:
        return False
    if switch.value is None:
        raise ParameterError(switch.key, "its rope's width is not read yet")
    raise ParameterError(switch.key, f"{switch.value!r}: its rope is not read yet")


def apply_of(text: Mapping[str, Any], family: Family) -> str | None:
    """The pairs q/k turn in where they differ from the cache's layout."""
    for key, apply in APPLY_KEYS.items():
        flag = text.get(key) if family.apply_key == key else None
        if flag is not None:
            if not isinstance(flag, bool):
                raise ParameterError(key, f"must be true or false, got {flag!r}")
            return apply if flag else None
    return family.apply

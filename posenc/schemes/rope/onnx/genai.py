"""genai_config.json: what the runtime is told beside the graph — the context it serves, its
layers and head, and the row a concatenated cache's long part starts at. Read once, before the
graph: a key a check reads that is there but of another type or out of bounds, or an object on
its path that is not one, is refused naming it, never read as absent (an offset read as absent
would take a concatenated cache for one cache)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from posenc.errors import ParameterError
from posenc.schemes.rope.onnx import rules
from posenc.schemes.rope.onnx.graph import MAX_LAYERS

# Bounds past which a value is no model's (beside the layers the reader walks at most): a head
# as wide as the widest rope served, a context and an offset that are positions (up to 2^31).
MAX_HEAD_SIZE = 65536
MAX_POSITIONS = 2**31


@dataclass(frozen=True)
class Stated:
    """The keys a check reads, each None where the file does not state it."""

    context_length: int | None = None
    num_hidden_layers: int | None = None
    head_size: int | None = None
    # The provider option that states a concatenated cache's offset, and the offset.
    concat_offset: tuple[str, int] | None = None


def read(config: Mapping[str, Any] | None) -> Stated:
    """The keys of ``config`` (genai_config.json's object, or None when none was sent).

    >>> read({"model": {"context_length": 4096, "decoder": {"head_size": 64}}})
    Stated(context_length=4096, num_hidden_layers=None, head_size=64, concat_offset=None)
    >>> read({"model": {"context_length": "4096"}})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    posenc.errors.ParameterError: genai_config.model.context_length: must be an integer ...
    """
    if config is None:
        return Stated()
    return Stated(
        context_length=_integer(config, rules.CONTEXT_LENGTH, MAX_POSITIONS),
        num_hidden_layers=_integer(config, rules.NUM_HIDDEN_LAYERS, MAX_LAYERS),
        head_size=_integer(config, rules.HEAD_SIZE, MAX_HEAD_SIZE),
        concat_offset=_concat_offset(config),
    )


def _at(config: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    """The value at ``path`` (None where a key is missing), each object on the way one."""
    value: Any = config
    for depth, key in enumerate(path):
        if not isinstance(value, Mapping):
            where = ".".join(("genai_config", *path[:depth]))
            raise ParameterError(where, f"must be a JSON object, got {type(value).__name__}")
        value = value.get(key)
        if value is None:
            return None
    return value


def _integer(config: Mapping[str, Any], path: tuple[str, ...], most: int) -> int | None:
    value = _at(config, path)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= most:
        raise ParameterError(
            ".".join(("genai_config", *path)),
            f"must be an integer from 1 to {most}, got {repr(value)[:40]}",
        )
    return value


def _concat_offset(config: Mapping[str, Any]) -> tuple[str, int] | None:
    """The first provider's offset. ONNX Runtime's provider options are strings, so a string of
    decimal digits; "0" is its default, no concatenated cache."""
    providers = _at(config, rules.PROVIDER_OPTIONS)
    name = ".".join(("genai_config", *rules.PROVIDER_OPTIONS))
    if providers is None:
        return None
    if not isinstance(providers, list):
        raise ParameterError(name, f"must be a list, got {type(providers).__name__}")
    for index, provider in enumerate(providers):
        if not isinstance(provider, Mapping):
            raise ParameterError(f"{name}[{index}]", "must be a JSON object")
        for label, settings in provider.items():
            if not isinstance(settings, Mapping):
                raise ParameterError(f"{name}[{index}].{label}", "must be a JSON object")
            for key in rules.CONCAT_OFFSET_KEYS:
                value = settings.get(key)
                if value is None:
                    continue
                digits = isinstance(value, str) and value.isascii() and value.isdigit()
                if not digits or len(value) > 10 or not 0 <= int(value) < MAX_POSITIONS:
                    raise ParameterError(
                        f"{name}[{index}].{label}.{key}",
                        f"must be a row from 0 to {MAX_POSITIONS - 1} as a string of digits, "
                        f"got {repr(value)[:40]}",
                    )
                return None if int(value) == 0 else (key, int(value))
    return None

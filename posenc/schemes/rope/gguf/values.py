"""A GGUF header's values under one architecture, read as llama.cpp's loader reads them
(``llama_model_loader::get_key``, ``get_key_or_arr``, ``get_arr``), remembering which were read:
the answer names them."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from posenc.schemes.rope.gguf.reader import GGUFError, Header, Value

_F32 = np.float32


class Keys:
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

    def number(self, suffix: str, default: float | None) -> float:
        value = self.get(suffix)
        if value is None:
            if default is None:
                raise GGUFError(f"the file has no {self.arch}.{suffix}, which llama.cpp needs")
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

    def per_layer(self, suffix: str, n: int, default: int | None) -> list[int] | None:
        """``get_key_or_arr``: a number for each of ``n`` layers, or an array of exactly ``n``
        (llama.cpp refuses another length); None (or ``default`` for every layer) when
        absent."""
        value = self.get(suffix)
        if value is None:
            return None if default is None else [default] * n
        if isinstance(value, tuple):
            if len(value) != n:
                raise GGUFError(
                    f"{self.arch}.{suffix} has {len(value)} values: llama.cpp wants one for "
                    f"each of {n} layers and refuses the file"
                )
            if not all(isinstance(v, int | bool) for v in value):
                raise GGUFError(f"{self.arch}.{suffix} is {value!r}: integers are needed")
            return [int(v) for v in value]
        if isinstance(value, bool) or not isinstance(value, int):
            raise GGUFError(f"{self.arch}.{suffix} is {value!r}: an integer is needed")
        return [value] * n

    def flags(self, suffix: str, n_layer: int, fill: bool) -> list[bool] | None:
        """``get_arr`` into a per-layer array: the array's flags, the layers past its end left
        at ``fill`` (what the loader filled the array with); None when absent."""
        value = self.get(suffix)
        if value is None:
            return None
        if not isinstance(value, tuple):
            raise GGUFError(f"{self.arch}.{suffix} is {value!r}: an array is needed")
        given = [bool(v) for v in value[:n_layer]]
        return given + [fill] * (n_layer - len(given))

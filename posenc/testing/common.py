"""What both kinds of assertion share: how a value is written in a message, how a config is
taken (loaded or a path), and the caller's own message before the diagnosis."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping
from typing import Any


def value_text(value: Any) -> str:
    """A value as a message shows it: whole floats whole, others to four digits, lists to eight
    items, booleans as JSON writes them.

    >>> value_text([1.0, 0.5, 1e-9, True])
    '[1,0.5,1.000e-09,true]'
    """
    if isinstance(value, float):
        if math.isfinite(value) and value.is_integer() and abs(value) < 1e16:
            return str(int(value))
        return f"{value:.4g}" if abs(value) >= 1e-3 or value == 0 else f"{value:.3e}"
    if isinstance(value, list | tuple):
        shown = ",".join(value_text(v) for v in value[:8])
        return f"[{shown}{',…' if len(value) > 8 else ''}]"
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def load_config(config: Mapping[str, Any] | str | os.PathLike[str]) -> Any:
    """A ``config.json`` as given: loaded already, or its path."""
    if isinstance(config, Mapping):
        return config
    with open(config, encoding="utf-8") as file:
        return json.load(file)


def prefixed(err_msg: str, message: str) -> str:
    """The caller's ``err_msg`` (as ``numpy.testing`` takes it) on a line before the diagnosis."""
    return f"{err_msg}\n{message}" if err_msg else message


def finding_lines(findings: Iterable[Mapping[str, Any]], text: str) -> list[str]:
    """Each finding as a line of its name and its ``text`` member (``summary`` in a
    conformance answer, ``detail`` in a kernel's), then one of its evidence if it has any."""
    lines = []
    for finding in findings:
        lines.append(f"  {finding['name']}: {finding[text]}")
        evidence = finding.get("evidence") or {}
        if evidence:
            lines.append("      " + ", ".join(f"{k}={value_text(v)}" for k, v in evidence.items()))
    return lines

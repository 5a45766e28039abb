"""Rules by which a family's config class derives its layers' types from keys of its own, where
the config has no ``layer_types`` to read: as data, read by :mod:`.layers`."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class IndexedLayers:
    """Layer types a family's config class derives from a list of layer indices (Bamba's
    ``attn_layer_indices``): the layers listed are ``listed``, the others ``other``."""

    key: str
    listed: str
    other: str


@dataclass(frozen=True)
class CycledLayers:
    """Layer types a family's config class derives by repeating a list of block kinds over the
    layers (RecurrentGemma's ``block_types``, ``repeats`` times at most): a block named
    ``block`` gives ``named``, any other ``other``."""

    key: str
    default: tuple[str, ...]
    block: str
    named: str
    other: str
    repeats: int


@dataclass(frozen=True)
class LetteredLayers:
    """Layer types a family's config class spells as a string of letters, one per layer
    (NemotronH's ``hybrid_override_pattern``), read where the config names no layer types;
    ``default`` without either."""

    key: str
    letters: tuple[tuple[str, str], ...]  # (letter, layer type)
    default: tuple[str, ...]

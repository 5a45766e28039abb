"""What llama.cpp itself passed ggml for files its own converter wrote: the records the suite
holds posenc's llama.cpp arithmetic to (``recipes.ggml.derive``, ``recipes.llama_cpp``, the
GGUF rules), written by ``python -m tests.gguf.records`` (nothing in the suite builds llama.cpp).

Each JSON file names the llama.cpp it was measured with and the command that wrote it:

- ``scalings.json``: ``cases``, each a tiny random transformers model (``config``: its
  ``config.json``), converted by llama.cpp's converter, loaded by llama.cpp with ``n_ctx``
  (null: the file's own context): the file's ``metadata`` (every key but ``tokenizer.*``), its
  ``rope_tensors`` as written, and ``nodes``, every rope node of one decoded token
  (:class:`tests.gguf.llama_cpp_ropes.RopeNode`).
- ``yarn.json``: ``attn_factor`` of YaRN's rope nodes for every factor 1.25 … 63.75 in steps
  of 0.25, for each way llama.cpp derives it (``sweeps``: a family and its ``mscale_all_dim``).
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


@cache
def load(name: str) -> dict[str, Any]:
    """The record ``name`` (``scalings`` or ``yarn``), as written."""
    record: dict[str, Any] = json.loads((HERE / f"{name}.json").read_text())
    return record

"""The tiny models of :mod:`tests.gguf.tiny_models` built and converted by llama.cpp's own
converter, all in one subprocess (``tests/gguf/conftest.py`` does it once a session), and the
check the converter tests hold each file to."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from posenc.cli.budget import SERVICE_DEFAULTS
from posenc.schemes.rope.gguf import conformance, reader
from tests.gguf.convert import convert
from tests.gguf.tiny_models import ANSWERED, DIVERGENT, MODELS, SMALL, Tiny

ALL: dict[str, Tiny] = {**MODELS, **DIVERGENT, **ANSWERED}
# name: (the converted file, the config.json it was converted from); "<name>.mmproj": the
# vision projector of a model that has one.
Converted = dict[str, tuple[Path, dict[str, Any]]]


def _build(tiny: Tiny, model_dir: Path) -> dict[str, Any]:
    """Save ``tiny``'s random model in ``model_dir`` as the converter reads it; its config."""
    import transformers
    from transformers import AutoConfig, AutoModel, AutoModelForCausalLM

    nested = "text_config" in tiny.keys  # the sizes are the text model's own
    config = AutoConfig.for_model(
        tiny.model_type, **(tiny.keys if nested else {**SMALL, **tiny.keys})
    )
    model: Any
    if tiny.build == "causal":
        model = AutoModelForCausalLM.from_config(config)  # type: ignore[no-untyped-call]
    elif tiny.build == "base":
        model = AutoModel.from_config(config)  # type: ignore[no-untyped-call]
    else:  # no causal-LM class: the whole model, as the Hub has it
        model = getattr(transformers, tiny.build)(config)
    model.save_pretrained(model_dir)
    saved: dict[str, Any] = json.loads((model_dir / "config.json").read_text())
    (model_dir / "config.json").write_text(json.dumps({**saved, **tiny.config}))
    # Gemma's converter counts the vocabulary of tokenizer.json; BERT's reads its type.
    vocab = {f"t{i}": i for i in range(SMALL["vocab_size"])}
    model_json: dict[str, Any] = {"vocab": vocab}
    if tiny.tokenizer is not None:
        model_json["type"] = tiny.tokenizer
    tokenizer = {"model": model_json, "added_tokens": []}
    (model_dir / "tokenizer.json").write_text(json.dumps(tokenizer))
    if tiny.mmproj:  # the projector's converter writes the image processor's mean and std
        processor = {"image_mean": [0.5] * 3, "image_std": [0.5] * 3}
        (model_dir / "preprocessor_config.json").write_text(json.dumps(processor))
    return saved


def build_all(root: Path, names: list[str] | None = None) -> Converted:
    """Every tiny model (or those ``names``) saved under ``root`` and converted: each one's
    file and config."""
    import torch

    chosen = names or list(ALL)
    pairs, configs = [], {}
    torch.manual_seed(0)
    files = []
    for name in chosen:
        configs[name] = configs[f"{name}.mmproj"] = _build(ALL[name], root / name)
        pairs.append((root / name, root / f"{name}.gguf"))
        files.append(name)
        if ALL[name].mmproj:
            pairs.append((root / name, root / f"{name}.mmproj.gguf"))
            files.append(f"{name}.mmproj")
    convert(pairs)
    return {name: (out, configs[name]) for name, (_, out) in zip(files, pairs, strict=True)}


def check(file: Path | bytes, config: dict[str, Any], n_ctx: int | None = None) -> dict[str, Any]:
    data = file.read_bytes() if isinstance(file, Path) else file
    return conformance.check(reader.read(data), config, n_ctx, SERVICE_DEFAULTS)


def kinds(result: dict[str, Any]) -> list[str]:
    return [finding["kind"] for finding in result["findings"]]

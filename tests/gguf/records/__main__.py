"""Writes the records (``python -m tests.gguf.records [OUT_DIR]``, default beside this file):
tiny random transformers models of every scaling llama.cpp implements, converted by llama.cpp's
own converter (:func:`tests.gguf.convert.convert`) and loaded by llama.cpp built from the same
sdist (:func:`tests.gguf.llama_cpp_ropes.record`). Builds llama.cpp the first time (minutes)."""

from __future__ import annotations

import json
import platform
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from tests.gguf import llama_cpp_ropes
from tests.gguf.convert import convert
from tests.gguf.records import HERE
from tests.gguf.sdist import VERSION

COMMAND = "python -m tests.gguf.records"
_SMALL = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "num_hidden_layers": 1,
    "vocab_size": 128,
    "pad_token_id": 0,
    "bos_token_id": 1,
    "eos_token_id": 2,
}
# DeepSeek-V2's attention, tiny: its rope turns qk_rope_head_dim of each head.
_DEEPSEEK = {
    "kv_lora_rank": 16,
    "q_lora_rank": 16,  # llama.cpp reads it for every DeepSeek-2 but the Lite ones (26, 27 layers)
    "qk_rope_head_dim": 32,
    "qk_nope_head_dim": 16,
    "v_head_dim": 16,
    "n_routed_experts": 4,
    "num_experts_per_tok": 2,
    "moe_intermediate_size": 32,
    "first_k_dense_replace": 1,
    "max_position_embeddings": 163840,
}
# YaRN's attention factors that tell llama.cpp's two roundings of 1 + 0.1·ln f (libllama on
# x86-64) from one (a build with FMA) — of 1.25 … 63.75 in steps of 0.25, only these three —
# and some that tell either from a constant 1.0, besides Qwen2.5's 4 and DeepSeek's 40.
YARN_FACTORS = (4.0, 5.5, 7.75, 21.5, 24.5, 29.75, 40.0, 63.0)
SWEEP = [float(f) for f in np.arange(1.25, 63.76, 0.25)]


def _yarn(factor: float, original: int, **more: float) -> dict[str, Any]:
    return {
        "rope_type": "yarn",
        "factor": factor,
        "original_max_position_embeddings": original,
        **more,
    }


def _llama3(factor: float, low: float, high: float, original: int) -> dict[str, Any]:
    return {
        "rope_type": "llama3",
        "factor": factor,
        "low_freq_factor": low,
        "high_freq_factor": high,
        "original_max_position_embeddings": original,
    }


def _longrope(seed: int, pairs: int, original: int) -> dict[str, Any]:
    """Factors shaped as Phi-3's (short near 1, long growing to tens), 4 decimals as published."""
    rng = np.random.default_rng(seed)
    short = np.round(1 + 0.1 * np.sort(rng.random(pairs)), 4)
    long = np.round(1 + 40 * np.sort(rng.random(pairs)) ** 2, 4)
    return {"type": "longrope", "short_factor": short.tolist(), "long_factor": long.tolist()}


def cases() -> dict[str, tuple[str, dict[str, Any], tuple[int | None, ...]]]:
    """name: (model_type, config keys beyond the small sizes, the contexts it is loaded with)."""
    llama = {"max_position_embeddings": 131072, "rope_theta": 500000.0}
    found: dict[str, tuple[str, dict[str, Any], tuple[int | None, ...]]] = {
        "plain": ("llama", {"max_position_embeddings": 4096}, (None,)),
        "linear-4": (
            "llama",
            {"rope_theta": 1e6, "rope_scaling": {"rope_type": "linear", "factor": 4.0}},
            (4096,),
        ),
        "llama3.1": (
            "llama",
            {**llama, "head_dim": 128, "rope_scaling": _llama3(8.0, 1.0, 4.0, 8192)},
            (4096,),
        ),
        "llama3.2": (
            "llama",
            {**llama, "head_dim": 64, "rope_scaling": _llama3(32.0, 1.0, 4.0, 8192)},
            (4096,),
        ),
        "llama3-odd": (
            "llama",
            {
                **llama,
                "head_dim": 96,
                "rope_theta": 25000.0,
                "rope_scaling": _llama3(5.5, 1.5, 3.0, 2048),
            },
            (4096,),
        ),
        # Llama 4's band-less rope (low = high): the converter divides by zero, unchosen.
        "llama3-no-band": (
            "llama",
            {**llama, "head_dim": 128, "rope_scaling": _llama3(16.0, 1.0, 1.0, 8192)},
            (4096,),
        ),
    }
    for factor in YARN_FACTORS:
        found[f"qwen2-yarn-{factor:g}"] = (
            "qwen2",
            {"max_position_embeddings": 131072, "rope_theta": 1e6,
             "rope_scaling": _yarn(factor, 32768)},
            (4096,),
        )  # fmt: skip
    found["qwen2-yarn-betas"] = (
        "qwen2",
        {"rope_theta": 1e6, "rope_scaling": _yarn(8.0, 4096, beta_fast=16.0, beta_slow=2.0)},
        (4096,),
    )
    for factor in (5.25, 21.5, 29.75, 40.0):
        for name, mscale in (("v2", 0.707), ("v3", 1.0)):
            found[f"deepseek2-{name}-yarn-{factor:g}"] = (
                "deepseek_v2",
                {**_DEEPSEEK, "num_key_value_heads": 4, "rope_scaling": _yarn(
                    factor, 4096, beta_fast=32.0, beta_slow=1.0, mscale=mscale,
                    mscale_all_dim=mscale)},
                (4096,),
            )  # fmt: skip
    found["deepseek2-yarn-40-no-mscale"] = (
        "deepseek_v2",
        {**_DEEPSEEK, "num_key_value_heads": 4, "rope_scaling": _yarn(40.0, 4096)},
        (4096,),
    )
    for name, head, original, longest, seed in (
        ("phi3-longrope-96", 96, 4096, 131072, 3),
        ("phi3-longrope-32", 32, 2000, 64000, 4),
    ):
        found[name] = (
            "phi3",
            {"hidden_size": 2 * head, "num_attention_heads": 2, "num_key_value_heads": 2,
             "max_position_embeddings": longest, "original_max_position_embeddings": original,
             "rope_theta": 10000.0, "rope_scaling": _longrope(seed, head // 2, original)},
            (original - 100, original, original + 1, None),
        )  # fmt: skip
    return found


def _save(model_type: str, keys: dict[str, Any], model_dir: Path) -> dict[str, Any]:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    torch.manual_seed(0)
    config = AutoConfig.for_model(model_type, **{**_SMALL, **keys})
    model = AutoModelForCausalLM.from_config(config)  # type: ignore[no-untyped-call]
    model.save_pretrained(model_dir)
    saved: dict[str, Any] = json.loads((model_dir / "config.json").read_text())
    return saved


def _contents(path: Path) -> tuple[dict[str, Any], dict[str, list[float]]]:
    """The file's keys (but its tokenizer's) and its rope tensors, as the converter wrote them."""
    from gguf import GGUFReader

    reader = GGUFReader(path)
    metadata = {
        key: field.contents()
        for key, field in reader.fields.items()
        if not key.startswith(("GGUF.", "tokenizer."))
    }
    tensors = {
        t.name: [float(v) for v in np.asarray(t.data, dtype=np.float32)]
        for t in reader.tensors
        if t.name.startswith("rope_")
    }
    return metadata, tensors


def _header() -> dict[str, Any]:
    import torch
    import transformers

    return {
        "machine": platform.machine(),
        "llama_cpp": llama_cpp_ropes.LLAMA_CPP,
        "llama_cpp_python": VERSION,
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "command": COMMAND,
    }


def _scalings(root: Path) -> dict[str, Any]:
    models = cases()
    pairs, configs = [], {}
    for name, (model_type, keys, _) in models.items():
        configs[name] = _save(model_type, keys, root / name)
        pairs.append((root / name, root / f"{name}.gguf"))
    convert(pairs)
    written = []
    for name, (_, _, contexts) in models.items():
        metadata, tensors = _contents(root / f"{name}.gguf")
        for n_ctx in contexts:
            (nodes,) = llama_cpp_ropes.record([root / f"{name}.gguf"], n_ctx)
            written.append(
                {"name": name, "n_ctx": n_ctx, "config": configs[name], "metadata": metadata,
                 "rope_tensors": tensors, "nodes": nodes}
            )  # fmt: skip
    return {**_header(), "cases": written}


def _sweeps(root: Path) -> dict[str, Any]:
    families: dict[str, tuple[str, dict[str, Any], dict[str, float]]] = {
        "qwen2": ("qwen2", {"rope_theta": 1e6}, {}),
        "deepseek2-v2": (
            "deepseek_v2",
            {**_DEEPSEEK, "num_key_value_heads": 4},
            {"mscale": 0.707, "mscale_all_dim": 0.707},
        ),
        "deepseek2-v3": (
            "deepseek_v2",
            {**_DEEPSEEK, "num_key_value_heads": 4},
            {"mscale": 1.0, "mscale_all_dim": 1.0},
        ),
    }
    pairs = []
    for family, (model_type, keys, mscales) in families.items():
        for factor in SWEEP:
            model_dir = root / f"{family}-{factor}"
            _save(model_type, {**keys, "rope_scaling": _yarn(factor, 4096, **mscales)}, model_dir)
            pairs.append((model_dir, root / f"{family}-{factor}.gguf"))
    convert(pairs)
    nodes = llama_cpp_ropes.record([out for _, out in pairs], 4096)
    sweeps = []
    for index, (family, (model_type, _, mscales)) in enumerate(families.items()):
        found = nodes[index * len(SWEEP) : (index + 1) * len(SWEEP)]
        attn = [{node["attn_factor"] for node in file} for file in found]
        if any(len(values) != 1 for values in attn):
            raise RuntimeError(f"{family}: rope nodes of one file with different attn_factor")
        sweeps.append(
            {"family": family, "model_type": model_type, **mscales,
             "original_max_position_embeddings": 4096, "factors": SWEEP,
             "attn_factor": [values.pop() for values in attn]}
        )  # fmt: skip
    return {**_header(), "sweeps": sweeps}


def main(out: Path) -> None:
    llama_cpp_ropes.built()
    with tempfile.TemporaryDirectory() as scratch:
        for name, make in (("scalings", _scalings), ("yarn", _sweeps)):
            record = make(Path(scratch) / name)
            (out / f"{name}.json").write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE)

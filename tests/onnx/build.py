"""ONNX Runtime GenAI's model builder (onnxruntime-genai 0.18, ``models/builder.py``) on tiny
random transformers models, for the tests that hold the service's reading of a model to the
files the real builder writes.

Every model is saved by transformers (``from_config``, seeded) with a WordLevel tokenizer beside
it (the builder wants one), then built for each target as ``python -m
onnxruntime_genai.models.builder -i MODEL -o OUT -p PRECISION -e PROVIDER -c CACHE`` does:
``parse_extra_options`` then ``create_model``, all models in one subprocess so torch,
transformers and the builder are imported once (``python -m tests.onnx.build SPEC OUT``). The
outputs are kept under ``$POSENC_CACHE/onnx-builds/<key>``, the key a hash of the specs and of
the versions that made them, so a second session reads them back. A build that raises is kept
as the exception's type and message: some configs the builder cannot build, and the tests
say which.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

_TINY = {
    "vocab_size": 64,
    "hidden_size": 64,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "pad_token_id": 0,
    "bos_token_id": 1,
    "eos_token_id": 2,
}
# LongRoPE's factors of a head of 32 (16 pairs): short near 1, long growing to 8.
SHORT = [round(1 + 0.05 * i, 4) for i in range(16)]
LONG = [round(1 + 7 * i / 15, 4) for i in range(16)]


@dataclass(frozen=True)
class Build:
    """A tiny model: its type, the config keys beyond the tiny defaults, keys rewritten in its
    saved config.json (the Hub's legacy forms), and the (precision, provider, extra options)
    it is built for."""

    model_type: str
    config: dict[str, Any] = field(default_factory=dict)
    raw: dict[str, Any] = field(default_factory=dict)
    drop: tuple[str, ...] = ()
    targets: tuple[tuple[str, str, tuple[str, ...]], ...] = (("fp32", "cpu", ()),)


def _yarn(factor: float, original: int, base: float, **more: Any) -> dict[str, Any]:
    return {
        "rope_type": "yarn",
        "factor": factor,
        "original_max_position_embeddings": original,
        "rope_theta": base,
        **more,
    }


_FP16 = (("fp32", "cpu", ()), ("fp16", "cuda", ()), ("fp16", "dml", ()))
_LONGROPE = {"type": "longrope", "short_factor": SHORT, "long_factor": LONG}
BUILDS: dict[str, Build] = {
    "llama": Build("llama", {"max_position_embeddings": 4096}, targets=_FP16),
    "llama-linear": Build(
        "llama",
        {
            "max_position_embeddings": 4096,
            "rope_parameters": {"rope_type": "linear", "factor": 4.0, "rope_theta": 10000.0},
        },
    ),
    "llama3.1": Build(
        "llama",
        {
            "head_dim": 32,
            "num_attention_heads": 2,
            "num_key_value_heads": 1,
            "max_position_embeddings": 16384,
            "rope_parameters": {
                "rope_type": "llama3",
                "factor": 8.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 8192,
                "rope_theta": 500000.0,
            },
        },
    ),
    "llama-yarn": Build(
        "llama",
        {
            "head_dim": 32,
            "num_attention_heads": 2,
            "num_key_value_heads": 1,
            "max_position_embeddings": 16384,
            "rope_parameters": _yarn(4.0, 4096, 1e6, beta_fast=32.0, beta_slow=1.0),
        },
    ),
    "qwen2": Build("qwen2", {"max_position_embeddings": 4096, "rope_theta": 1e6}),
    "qwen2.5-yarn": Build(
        "qwen2",
        {
            "head_dim": 32,
            "num_attention_heads": 2,
            "num_key_value_heads": 1,
            "max_position_embeddings": 16384,
            "rope_parameters": _yarn(4.0, 4096, 1e6, beta_fast=32.0, beta_slow=1.0),
        },
        targets=_FP16[:2],
    ),
    "qwen3": Build(
        "qwen3",
        {
            "head_dim": 32,
            "num_attention_heads": 2,
            "num_key_value_heads": 1,
            "max_position_embeddings": 4096,
            "rope_theta": 1e6,
        },
    ),
    # Qwen3's YaRN as its config.json gives it: no beta_fast/beta_slow (transformers' 32, 1).
    "qwen3-yarn": Build(
        "qwen3",
        {
            "head_dim": 32,
            "num_attention_heads": 2,
            "num_key_value_heads": 1,
            "max_position_embeddings": 16384,
            "rope_parameters": _yarn(4.0, 4096, 1e6),
        },
    ),
    "phi3-longrope": Build(
        "phi3",
        {
            "head_dim": 32,
            "num_attention_heads": 2,
            "num_key_value_heads": 2,
            "max_position_embeddings": 8192,
            "original_max_position_embeddings": 2048,
            "rope_parameters": {
                "rope_type": "longrope",
                "short_factor": SHORT,
                "long_factor": LONG,
                "rope_theta": 10000.0,
                "original_max_position_embeddings": 2048,
            },
        },
        raw={"rope_theta": 10000.0, "rope_scaling": _LONGROPE},
        drop=("rope_parameters",),
        targets=(*_FP16, ("fp16", "webgpu", ("enable_webgpu_graph=true",))),
    ),
    # The same model with its config as transformers 5 saves it (rope_parameters).
    "phi3-longrope-v5": Build(
        "phi3",
        {
            "head_dim": 32,
            "num_attention_heads": 2,
            "num_key_value_heads": 2,
            "max_position_embeddings": 8192,
            "original_max_position_embeddings": 2048,
            "rope_parameters": {
                "rope_type": "longrope",
                "short_factor": SHORT,
                "long_factor": LONG,
                "rope_theta": 10000.0,
                "original_max_position_embeddings": 2048,
            },
        },
    ),
    "phi-2": Build("phi", {"max_position_embeddings": 2048, "partial_rotary_factor": 0.5}),
    "nemotron": Build("nemotron", {"max_position_embeddings": 4096, "partial_rotary_factor": 0.5}),
    "gpt-oss": Build(
        "gpt_oss",
        {
            "head_dim": 32,
            "num_attention_heads": 2,
            "num_key_value_heads": 1,
            "num_local_experts": 4,
            "num_experts_per_tok": 2,
            "sliding_window": 64,
            "max_position_embeddings": 16384,
            "rope_parameters": _yarn(
                4.0, 4096, 150000.0, beta_fast=32.0, beta_slow=1.0, truncate=False
            ),
        },
    ),
    "granite": Build("granite", {"max_position_embeddings": 4096}),
    "ernie4.5": Build("ernie4_5", {"head_dim": 16, "max_position_embeddings": 4096}),
    "olmo": Build("olmo", {"max_position_embeddings": 4096}),
    "mistral": Build("mistral", {"head_dim": 16, "max_position_embeddings": 4096}),
    "gemma2": Build("gemma2", {"head_dim": 16, "max_position_embeddings": 4096}),
    "smollm3": Build("smollm3", {"max_position_embeddings": 4096}),
    # SmolLM3 with a NoPE layer (every fourth).
    "smollm3-nope": Build("smollm3", {"num_hidden_layers": 4, "max_position_embeddings": 4096}),
    "gemma3": Build(
        "gemma3_text",
        {
            "head_dim": 16,
            "num_hidden_layers": 6,
            "max_position_embeddings": 4096,
            "sliding_window": 64,
        },
    ),
}


# Two real models' shapes (their layers, heads, contexts and ropes) with tiny widths: what a
# check reads of a real graph, for the speed test. Llama 3.1 8B: 32 layers, head 128, 131072
# positions in external data; Phi-3 mini 128k: 32 layers, head 96, its two LongRoPE pairs
# inline in the graph's If branches (≈ 52 MB of graph).
_PHI3_FACTORS = {
    "type": "longrope",
    "short_factor": [round(1 + 0.02 * i, 4) for i in range(48)],
    "long_factor": [round(1 + 60 * (i / 47) ** 2, 4) for i in range(48)],
}
REAL_SHAPES: dict[str, Build] = {
    "llama3.1-8b": Build(
        "llama",
        {
            "hidden_size": 128,
            "head_dim": 128,
            "num_attention_heads": 1,
            "num_key_value_heads": 1,
            "intermediate_size": 32,
            "num_hidden_layers": 32,
            "max_position_embeddings": 131072,
            "rope_parameters": {
                "rope_type": "llama3",
                "factor": 8.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 8192,
                "rope_theta": 500000.0,
            },
        },
    ),
    "phi3-mini-128k": Build(
        "phi3",
        {
            "hidden_size": 96,
            "head_dim": 96,
            "num_attention_heads": 1,
            "num_key_value_heads": 1,
            "intermediate_size": 32,
            "num_hidden_layers": 32,
            "max_position_embeddings": 131072,
            "original_max_position_embeddings": 4096,
            "rope_parameters": {
                "rope_type": "longrope",
                "rope_theta": 10000.0,
                "short_factor": _PHI3_FACTORS["short_factor"],
                "long_factor": _PHI3_FACTORS["long_factor"],
                "original_max_position_embeddings": 4096,
            },
        },
        raw={"rope_theta": 10000.0, "rope_scaling": _PHI3_FACTORS},
        drop=("rope_parameters",),
    ),
}


def cache_root() -> Path:
    return Path(os.environ.get("POSENC_CACHE", Path.home() / ".cache" / "posenc"))


def _versions() -> dict[str, str]:
    names = ("onnxruntime-genai", "onnx-ir", "transformers", "torch", "tokenizers")
    return {name: metadata.version(name) for name in names}


def key(builds: dict[str, Build]) -> str:
    spec = {name: asdict(build) for name, build in sorted(builds.items())}
    text = json.dumps({"builds": spec, "versions": _versions()}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def built(builds: dict[str, Build] = BUILDS) -> Path:
    """The folder holding ``<name>/hf`` (the transformers model) and ``<name>/<precision>-
    <provider>`` (the builder's output, or ``error.json``) of every build, made once."""
    root = cache_root() / "onnx-builds" / key(builds)
    if (root / "done").exists():
        return root
    partial = root.with_name(root.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    spec = {name: asdict(build) for name, build in builds.items()}
    (partial / "spec.json").write_text(json.dumps(spec))
    here = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-m", "tests.onnx.build", str(partial / "spec.json"), str(partial)],
        env={**os.environ, "PYTHONPATH": str(here)},
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"the builds failed:\n{done.stderr[-4000:]}")
    (partial / "done").write_text("")
    shutil.rmtree(root, ignore_errors=True)
    partial.rename(root)
    return root


def target_name(target: tuple[str, str, tuple[str, ...]] | list[Any]) -> str:
    precision, provider, extra = target
    return f"{precision}-{provider}" + ("-graph" if extra else "")


def _save(folder: Path, build: dict[str, Any]) -> None:
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import AutoConfig, AutoModelForCausalLM, PreTrainedTokenizerFast

    config = AutoConfig.for_model(build["model_type"], **{**_TINY, **build["config"]})
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(config).save_pretrained(folder)
    path = folder / "config.json"
    saved = json.loads(path.read_text())
    for name in build["drop"]:
        saved.pop(name, None)
    path.write_text(json.dumps({**saved, **build["raw"]}, indent=2))
    vocabulary = {f"t{i}": i for i in range(63)} | {"[UNK]": 63}
    tokenizer = Tokenizer(models.WordLevel(vocabulary, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        unk_token="[UNK]",
        pad_token="t0",
        bos_token="t1",
        eos_token="t2",
    ).save_pretrained(folder)


def _main(spec_path: str, out: str) -> None:
    import contextlib
    import io

    from onnxruntime_genai.models import builder

    root = Path(out)
    for name, build in json.loads(Path(spec_path).read_text()).items():
        folder = root / name / "hf"
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            _save(folder, build)
        for target in build["targets"]:
            precision, provider, extra = target
            output = root / name / target_name(target)
            arguments = (None, str(folder), str(output), precision, provider, str(root / "cache"))
            try:
                with (
                    contextlib.redirect_stdout(io.StringIO()),
                    contextlib.redirect_stderr(io.StringIO()),
                ):
                    options = builder.parse_extra_options(*arguments, list(extra) or None)
                    builder.create_model(*arguments, **options)
            except Exception as error:  # the builder refusing a config is an outcome we keep
                output.mkdir(parents=True, exist_ok=True)
                failure = {"type": type(error).__name__, "message": str(error)[:500]}
                (output / "error.json").write_text(json.dumps(failure))
    shutil.rmtree(root / "cache", ignore_errors=True)


if __name__ == "__main__":
    _main(*sys.argv[1:])

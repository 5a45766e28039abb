"""``posenc model config.json``: what ``POST /v1/rope/config`` answers, as text or JSON.

The text answers "what rope does this model use?": each distinct rope once, its layers as
runs, its parameters on one line, and the two commands that build and check its cache. The URLs
come with ``--urls``; ``--json`` is the whole answer, aliases and all.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click

from posenc.cli import URL_HELP, read_json
from posenc.cli.schemes import flags, runs, shown, takes_config

# The URLs worth a reader's eye; the alias forms are in --json.
_URLS = ("table", "table_framework", "verify")


def describe(path: str, url: str | None) -> tuple[str, dict[str, Any]]:
    """The scheme that reads configs, and its answer for the config at ``path``: from the
    service at ``url``, else computed here under a default service's limits."""
    from posenc.cli.budget import SERVICE_DEFAULTS
    from posenc.registry import SCHEMES

    config = read_json(path)
    (scheme,) = [s for s in SCHEMES if takes_config(s)]
    if url is not None:
        from posenc.cli import remote

        answer: dict[str, Any] = remote.post_json(url, f"/v1/{scheme.name}/config", config)
        return scheme.name, answer
    (extra,) = [e for e in scheme.extras if e.name == "config"]
    return scheme.name, extra.handle(config, SERVICE_DEFAULTS)


def one_rope(answer: Mapping[str, Any]) -> dict[str, Any]:
    """The parameters of a model's one rope, for the commands that take ``--config``; a model
    with several (or none) is a usage error naming them."""
    ropes = answer.get("ropes", ())
    if len(ropes) != 1:
        kinds = "; ".join(", ".join(rope["layer_types"]) or "all" for rope in ropes) or "none"
        raise click.UsageError(
            f"the model has {len(ropes)} ropes (layer types: {kinds}): pass one rope's "
            "parameters instead of --config (posenc model lists them)"
        )
    return dict(ropes[0]["params"])


@click.command(
    short_help="the rope of a model's config.json, or of a GGUF or ONNX file",
    epilog="\b\nExample:\n  posenc model config.json          # Llama 3.1 8B: one rope in 5 lines"
    "\n  posenc model config.json --urls   # and the HTTP URLs of its table and verify"
    "\n  posenc model model.gguf --config config.json   # llama.cpp's rope, checked"
    "\n  posenc model onnx-out/ --config config.json    # ONNX Runtime GenAI's, checked",
)
@click.argument("config", type=click.Path(exists=True))
@click.option("--urls", "with_urls", is_flag=True, help="also print each rope's URLs")
@click.option("--json", "as_json", is_flag=True, help="print the whole answer as JSON")
@click.option("--url", metavar="URL", help=URL_HELP)
@click.option(
    "--config",
    "model_config",
    type=click.Path(exists=True, dir_okay=False),
    help="with a GGUF or ONNX file: the model's config.json, to check the file against (exit 0 "
    "conforms, 1 not)",
)
@click.option("--n-ctx", type=click.IntRange(1), help="with a GGUF file: llama.cpp's context")
def model(
    config: str,
    with_urls: bool,
    as_json: bool,
    url: str | None,
    model_config: str | None,
    n_ctx: int | None,
) -> None:
    """The rope of every layer of a model, read from its CONFIG (its config.json, as the Hub
    publishes it): each distinct rope once, with its layers, its parameters and the commands
    that build and check its cache. Given a GGUF file instead (model.gguf), what llama.cpp
    applies at each of its layers, read from the file's header and rope tensors only. Given an
    ONNX Runtime GenAI model (model.onnx, or the builder's output folder), the rope each of its
    caches holds, read from its graph and a few rows of each cache."""
    from posenc.cli import gguf, onnx

    if onnx.is_onnx(config):
        if n_ctx is not None:
            raise click.UsageError("--n-ctx takes a GGUF file")
        onnx.run(config, model_config, as_json, url)
        return
    if Path(config).is_dir():
        raise click.UsageError(f"{config} is a folder without a genai_config.json")
    if gguf.is_gguf(config):
        gguf.run(config, model_config, n_ctx, as_json, url)
        return
    if model_config is not None or n_ctx is not None:
        raise click.UsageError("--config and --n-ctx take a GGUF file (--config an ONNX one too)")
    scheme, answer = describe(config, url)
    click.echo(
        json.dumps(answer, indent=2) if as_json else render(scheme, answer, config, with_urls)
    )


def render(scheme: str, answer: Mapping[str, Any], config: str, with_urls: bool = False) -> str:
    """The answer of ``POST /v1/{scheme}/config`` as a reader wants it.

    >>> answer = {"model_type": "m", "num_hidden_layers": 3, "head_dim": 8,
    ...           "max_position_embeddings": 64, "nope_layers": [2], "mrope": None,
    ...           "ropes": [{"layer_types": [], "layers": [0, 1], "rotary_dim": 8,
    ...                      "params": {"d_model": 8, "base": 10000.0}, "apply": None,
    ...                      "query_scaling": None}]}
    >>> print(render("rope", answer, "config.json"))
    m: 3 layers, head_dim 8, max_position_embeddings 64
    rope  layers 0, 1
      d_model=8 base=10000
      build  posenc table rope --d-model 8 --base 10000 --seq-len 64 -o rope.npy
      check  posenc check rope.npy --config config.json
    no rope  layers 2
    """
    ropes = answer.get("ropes") or ()  # the service merges layer types that share a rope
    # Here no service's limits apply: the table the model was trained to, whole.
    rows = answer.get("max_position_embeddings") or 4096
    known = [
        f"{answer['num_hidden_layers']} layers" if answer.get("num_hidden_layers") else None,
        f"head_dim {answer['head_dim']}" if answer.get("head_dim") else None,
        f"max_position_embeddings {rows}" if answer.get("max_position_embeddings") else None,
    ]
    lines = [f"{answer.get('model_type')}: {', '.join(part for part in known if part)}"]
    for number, rope in enumerate(ropes, 1):
        name = scheme if len(ropes) == 1 else f"{scheme}{number}"
        kinds = ", ".join(rope["layer_types"])
        layers = "every layer" if rope["layers"] is None else f"layers {runs(rope['layers'])}"
        lines.append(f"{name}  {kinds + '  ' if kinds else ''}{layers}")
        params = rope["params"]
        lines.append("  " + " ".join(f"{k}={shown(v)}" for k, v in params.items()))
        if rope.get("rotary_dim") not in (None, params.get("d_model")):
            lines.append(f"  rotary_dim={rope['rotary_dim']}")
        for extra in ("apply", "query_scaling"):
            if rope.get(extra) is not None:
                lines.append(f"  {extra}: {_inline(rope[extra])}")
        built = f"{name}.npy"
        lines.append(f"  build  posenc table {scheme} {flags(params)} --seq-len {rows} -o {built}")
        # --config names a model's one rope; one of several is checked by its parameters.
        if len(ropes) == 1:
            lines.append(f"  check  posenc check {built} --config {config}")
        else:
            lines.append(f"  check  posenc check {scheme} {built} {flags(params)}")
        if with_urls:
            lines.extend(f"  {key}  {rope['urls'][key]}" for key in _URLS if key in rope["urls"])
    if answer.get("nope_layers"):
        lines.append(f"no rope  layers {runs(answer['nope_layers'])}")
    if answer.get("mrope"):
        lines.append(f"mrope  {_inline(answer['mrope'])}")
    return "\n".join(lines)


def _inline(value: Any) -> str:
    if isinstance(value, Mapping):
        return " ".join(f"{k}={shown(v)}" for k, v in value.items() if v is not None)
    return shown(value)

"""``posenc model config.json``: what ``POST /v1/rope/config`` answers, as text or JSON."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import click

from posenc.cli import URL_HELP, read_json
from posenc.cli.schemes import flags, takes_config


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


@click.command(short_help="the rope of a model's config.json, or of a GGUF file")
@click.argument("config", type=click.Path(exists=True, dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="print the answer as JSON")
@click.option("--url", metavar="URL", help=URL_HELP)
@click.option(
    "--config",
    "model_config",
    type=click.Path(exists=True, dir_okay=False),
    help="with a GGUF file: the model's config.json, to check the file against (exit 0 "
    "conforms, 1 not)",
)
@click.option("--n-ctx", type=click.IntRange(1), help="with a GGUF file: llama.cpp's context")
def model(
    config: str, as_json: bool, url: str | None, model_config: str | None, n_ctx: int | None
) -> None:
    """Every parameter of the rope a model's CONFIG (its config.json, as the Hub publishes it)
    states, the URLs of its table and verify, and the commands that build and check it. Given
    a GGUF file instead (model.gguf), what llama.cpp applies at each of its layers."""
    from posenc.cli import gguf

    if gguf.is_gguf(config):
        gguf.run(config, model_config, n_ctx, as_json, url)
        return
    if model_config is not None or n_ctx is not None:
        raise click.UsageError("--config and --n-ctx take a GGUF file")
    scheme, answer = describe(config, url)
    if as_json:
        click.echo(json.dumps(answer, indent=2))
        return
    click.echo(render(answer))
    ropes = [rope["params"] for rope in answer.get("ropes", ()) if isinstance(rope, Mapping)]
    if ropes:
        # Here no service's limits apply: the table the model was trained to, whole.
        rows = answer.get("max_position_embeddings") or 4096
        click.echo("\ncommands")
        for number, params in enumerate(ropes):
            name = scheme if len(ropes) == 1 else f"{scheme}{number}"
            click.echo(f"  posenc table {scheme} {flags(params)} --seq-len {rows} -o {name}.npy")
        if len(ropes) == 1:  # --config names one rope; a model with several names its layers
            click.echo(f"  posenc check {scheme}.npy --config {config}")


def render(value: Any, indent: int = 0) -> str:
    """A JSON answer as aligned ``key  value`` lines, nested ones indented under their key.

    >>> print(render({"scheme": "rope", "params": {"d_model": 8, "base": 10000.0}, "n": None}))
    scheme  rope
    params
      d_model  8
      base     10000
    n       -
    """
    pad = " " * indent
    if not isinstance(value, Mapping):
        return pad + _scalar(value)
    width = max((len(str(key)) for key in value), default=0) + 2
    lines: list[str] = []
    for key, item in value.items():
        if isinstance(item, Mapping) and item:
            lines.extend((f"{pad}{key}", render(item, indent + 2)))
        elif isinstance(item, list) and item and isinstance(item[0], Mapping):
            for number, entry in enumerate(item):
                lines.extend((f"{pad}{key}[{number}]", render(entry, indent + 2)))
        else:
            lines.append(f"{pad}{str(key).ljust(width)}{_scalar(item)}")
    return "\n".join(lines)


def _scalar(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e16:
        return str(int(value))
    if isinstance(value, list | tuple):
        return ", ".join(_scalar(item) for item in value) or "[]"
    if isinstance(value, Mapping):
        return "{}"
    return str(value)

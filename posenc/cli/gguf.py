"""``posenc model model.gguf [--config config.json]``: what ``POST /v1/rope/gguf`` answers for a
local GGUF file, reading only its header and rope tensors (the file is memory-mapped: the
weights are never read). Exit 0, or with ``--config`` 0 when the file conforms to the model, 1
when it does not; 2 on bad input."""

from __future__ import annotations

import json
import mmap
from typing import Any

import click

from posenc.cli import read_json
from posenc.schemes.rope.gguf import reader

MAGIC = reader.MAGIC


def is_gguf(path: str) -> bool:
    """A ``.gguf`` name, or GGUF's magic at the start of the file."""
    if path.lower().endswith(".gguf"):
        return True
    try:
        with open(path, "rb") as file:
            return file.read(4) == MAGIC
    except OSError:
        return False


def _prefix_end(view: memoryview) -> int:
    """How many first bytes of the file hold its header and rope tensors."""
    header = reader.read(view)
    ends = [header.data_start]
    for info in header.tensors.values():
        size = 4 if info.ggml_type == 0 else 2
        ends.append(header.data_start + info.offset + size * info.dims[0])
    return max(ends)


def describe(path: str, config: str | None, n_ctx: int | None, url: str | None) -> dict[str, Any]:
    """The answer for the file at ``path`` (and the model's config at ``config``): computed
    here under a default service's limits, or asked of the service at ``url`` with the file's
    first bytes alone."""
    from posenc.cli.budget import SERVICE_DEFAULTS
    from posenc.declare import Upload
    from posenc.schemes.rope.gguf import operation

    parts = {} if config is None else {"config": read_json(config)}
    query = {} if n_ctx is None else {"n_ctx": n_ctx}
    try:
        with open(path, "rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            view = memoryview(mm)
            try:
                if url is None:
                    return operation.handle(Upload(view, query, parts), SERVICE_DEFAULTS)
                prefix = bytes(view[: _prefix_end(view)])
            finally:
                view.release()
    except (OSError, ValueError) as error:
        if isinstance(error, reader.GGUFError):
            raise
        raise click.ClickException(f"{path}: not a readable file: {error}") from None
    return _ask(url, prefix, parts, query)


def _ask(url: str, prefix: bytes, parts: dict[str, Any], query: dict[str, int]) -> dict[str, Any]:
    from posenc.cli import remote

    if not parts:
        headers = {"Content-Type": "application/octet-stream"}
        answer: dict[str, Any] = remote.post_bytes(url, "/v1/rope/gguf", query, prefix, headers)
        return answer
    config = json.dumps(parts["config"]).encode()
    body, headers = remote.form([("gguf", None, prefix, {}), ("config", None, config, {})])
    answer = remote.post_bytes(url, "/v1/rope/gguf", query, body, headers)
    return answer


def run(path: str, config: str | None, n_ctx: int | None, as_json: bool, url: str | None) -> None:
    """Print the answer (as JSON with ``as_json``) and exit as ``posenc check`` does."""
    answer = describe(path, config, n_ctx, url)
    if as_json:
        click.echo(json.dumps(answer, indent=2))
    else:
        click.echo(_text(answer))
    if config is not None:
        click.get_current_context().exit(0 if answer["conforms"] else 1)


def _text(answer: dict[str, Any]) -> str:
    """The answer as ``posenc model`` shows a config's: each rope once, its layers as runs, its
    parameters on one line (the factor tensor named, not listed; M-RoPE's sections), what it
    turns where that is not q and k; the ropes llama.cpp turns that no call states, the layers
    without a rope or never run, llama.cpp's notes; with a config, the verdict and each rope's
    recipe noise."""
    from posenc.cli.schemes import runs

    # A vision projector's positions are patches: it has no context to name.
    context = (
        f", context {answer['context_length']}, n_ctx {answer['n_ctx']}"
        if answer["context_length"]
        else ""
    )
    lines = [
        f"{answer['architecture']}: {answer['num_hidden_layers']} layers{context} (llama.cpp "
        f"{answer['llama_cpp_version']['commit'][:9]}, {answer['llama_cpp_rules']})"
    ]
    for rope in answer["ropes"]:
        lines.extend(_rope(rope))
    for rope in answer["unstated"]:
        lines.append(f"unstated  layers {runs(rope['layers'])}{_turns(rope['applies_to'])}")
        lines.append(f"  {rope['reason']}")
    if answer["nope_layers"]:
        lines.append(f"no rope  layers {runs(answer['nope_layers'])}")
    if answer["mtp_layers"]:
        lines.append(f"mtp  layers {runs(answer['mtp_layers'])}")
    lines.extend(f"note  {note}" for note in answer["notes"])
    if "conforms" in answer:
        lines.append("conforms" if answer["conforms"] else "does not conform:")
        for finding in answer["findings"]:
            lines.append(f"  {finding['kind']} (layers {runs(finding['layers'])}): "
                         f"{finding['detail']}")  # fmt: skip
    return "\n".join(lines)


def _rope(rope: dict[str, Any]) -> list[str]:
    from posenc.cli.schemes import runs, shown

    lines = [f"{rope['rope_type']}  layers {runs(rope['layers'])}{_turns(rope['applies_to'])}"]
    params = {k: v for k, v in rope["params"].items() if k != "freq_factors"}
    # The call's own arguments where the table's parameters do not carry them: the factor
    # tensor by its name, M-RoPE's sections (interleaved is the rope type, imrope).
    ggml = {k: rope["ggml"][k] for k in ("freq_factors", "sections") if rope["ggml"][k]}
    line = " ".join(f"{k}={shown(v)}" for k, v in {**params, **ggml}.items())
    lines.append(f"  {line}")
    noise = rope.get("max_abs_difference")
    if noise:
        lines.append(
            f"  llama.cpp's float32 table near n_ctx: {noise['exact']:.2g} from exact, "
            f"{noise['transformers']:.2g} from transformers'"
        )
    return lines


def _turns(applies_to: list[str]) -> str:
    """What a rope turns, said only where it is not the attention's q and k."""
    return "" if applies_to == ["q", "k"] else f"  turns {', '.join(applies_to)}"

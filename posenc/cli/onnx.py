"""``posenc model model.onnx [--config config.json]`` (or the builder's output folder): what
``POST /v1/rope/onnx`` answers for a local ONNX Runtime GenAI model, reading its graph
(memory-mapped) and, of its external data, only the ranges the check asks for. Exit 0, or with
``--config`` 0 when every cache is the model's rope, 1 when not; 2 on bad input."""

from __future__ import annotations

import json
import mmap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from posenc.cli import Refused, read_json, remote
from posenc.errors import ExternalDataNeededError

# A round trip asks for every range it needs at once; a second refusal means the file changed.
_ROUNDS = 2
EXTERNAL_DATA_NEEDED = "urn:posenc:problem:external-data-needed"


def is_onnx(path: str) -> bool:
    """A ``.onnx`` file, or a folder holding the builder's ``genai_config.json``."""
    given = Path(path)
    return given.suffix.lower() == ".onnx" or (given / "genai_config.json").is_file()


def _files(path: str) -> tuple[Path, Path | None]:
    """The graph and the genai_config.json beside it (a folder: the one its config names)."""
    given = Path(path)
    folder = given if given.is_dir() else given.parent
    genai = folder / "genai_config.json"
    if not given.is_dir():
        return given, genai if genai.is_file() else None
    name = "model.onnx"
    if genai.is_file():
        decoder = read_json(str(genai)).get("model", {}).get("decoder", {})
        name = decoder.get("filename", name) if isinstance(decoder, dict) else name
    return folder / name, genai if genai.is_file() else None


def _ranges(folder: Path, needed: list[dict[str, Any]]) -> list[tuple[str, bytes]]:
    """The byte ranges asked for, read from the external data files beside the graph (and
    never from outside its folder: a location is the file's claim)."""
    sent = []
    for need in needed:
        path = (folder / str(need["location"])).resolve()
        if folder.resolve() not in path.parents:
            raise Refused(f"external data {need['location']!r} is outside {folder}")
        try:
            with open(path, "rb") as file:
                file.seek(int(need["offset"]))
                data = file.read(int(need["length"]))
        except OSError as error:
            raise click.ClickException(f"{path}: not a readable file: {error}") from None
        if len(data) != need["length"]:
            raise Refused(f"{path} ends before byte {need['offset'] + need['length']}")
        sent.append((f"{need['location']}@{need['offset']}", data))
    return sent


def describe(path: str, config: str | None, url: str | None) -> dict[str, Any]:
    """The answer for the model at ``path``: computed here under a default service's limits,
    or asked of the service at ``url``; either way the external ranges are sent as asked."""
    graph, genai = _files(path)
    parts: dict[str, Any] = {}
    if genai is not None:
        parts["genai_config"] = read_json(str(genai))
    if config is not None:
        parts["config"] = read_json(config)
    try:
        with open(graph, "rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            view = memoryview(mm)
            try:
                ask = _here(view, parts) if url is None else _there(url, graph.name, view, parts)
                return _round_trip(ask, graph.parent)
            finally:
                view.release()
    except OSError as error:
        raise click.ClickException(f"{graph}: not a readable file: {error}") from None


Ask = Callable[[list[tuple[str, bytes]]], dict[str, Any] | list[Any]]


def _round_trip(ask: Ask, folder: Path) -> dict[str, Any]:
    """``ask`` with no external data, then with the ranges its refusal names."""
    sent: list[tuple[str, bytes]] = []
    for _ in range(_ROUNDS):
        answer = ask(sent)
        if isinstance(answer, dict):
            return answer
        sent = _ranges(folder, answer)
    raise Refused("the check asked for external data twice: did the file change?")


def _here(view: memoryview, parts: dict[str, Any]) -> Ask:
    from posenc.cli.budget import SERVICE_DEFAULTS
    from posenc.declare import Part, Upload
    from posenc.schemes.rope.onnx import operation

    def ask(sent: list[tuple[str, bytes]]) -> dict[str, Any] | list[Any]:
        files = {
            "model": (Part(view),),
            "external": tuple(Part(data, filename=filename) for filename, data in sent),
        }
        try:
            return operation.handle(Upload(memoryview(b""), {}, parts, files), SERVICE_DEFAULTS)
        except ExternalDataNeededError as needed:
            return [dict(need) for need in needed.needed]

    return ask


def _there(url: str, name: str, view: memoryview, parts: dict[str, Any]) -> Ask:
    def ask(sent: list[tuple[str, bytes]]) -> dict[str, Any] | list[Any]:
        chunks: list[remote.FormPart] = [("model", name, bytes(view), {})]
        chunks += [(key, None, json.dumps(value).encode(), {}) for key, value in parts.items()]
        chunks += [("external", filename, data, {}) for filename, data in sent]
        body, headers = remote.form(chunks)
        return _post(url.rstrip("/") + "/v1/rope/onnx", body, headers)

    return ask


def _post(target: str, body: bytes, headers: dict[str, str]) -> dict[str, Any] | list[Any]:
    """The answer, or the ranges a refusal of type external-data-needed names; any other
    refusal is the service's words, exit code 2 (as posenc.cli.remote does)."""
    import urllib.error
    import urllib.request

    from posenc.cli.remote import Unanswered

    request = urllib.request.Request(target, data=body, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=120) as answer:
            found: dict[str, Any] = json.load(answer)
            return found
    except urllib.error.HTTPError as error:
        try:
            problem = json.loads(error.read())
        except ValueError:
            raise Unanswered(f"the service answered {error.code} {error.reason}") from None
        if problem.get("type") == EXTERNAL_DATA_NEEDED and isinstance(problem.get("needed"), list):
            needed: list[Any] = problem["needed"]
            return needed
        messages = [
            f"{'.'.join(map(str, item.get('loc', ())[1:]))}: {item.get('msg')}"
            for item in problem.get("errors") or ()
        ]
        raise Unanswered(
            "; ".join(messages) or f"{problem.get('detail')} (HTTP {error.code})"
        ) from None
    except (urllib.error.URLError, OSError) as error:
        reason = getattr(error, "reason", error)
        raise Unanswered(f"cannot reach the service at {target}: {reason}") from None


def run(path: str, config: str | None, as_json: bool, url: str | None) -> None:
    """Print the answer (as JSON with ``as_json``) and exit as ``posenc check`` does."""
    answer = describe(path, config, url)
    click.echo(json.dumps(answer, indent=2) if as_json else _text(answer))
    if config is not None:
        click.get_current_context().exit(0 if answer["conforms"] else 1)


def _text(answer: dict[str, Any]) -> str:
    """Each cache once: its layers as runs, what picks it, the rope its rows fit on one line,
    its recipe; then the NoPE layers and, with a config, the verdict."""
    from posenc.cli.schemes import runs, shown

    producer = answer["producer"]
    lines = [
        f"{producer['name']} {producer['version']}: {answer['num_hidden_layers']} layers, "
        f"context {answer['context_length']}"
    ]
    for rope in answer["ropes"]:
        pairs = "interleaved" if rope["interleaved"] else "split"
        picked = " and ".join(
            f"{'' if choice['holds'] else 'not '}{choice['test']}" for choice in rope["selected_by"]
        )
        lines.append(
            f"{rope['op']}  layers {runs(rope['layers'])}  {rope['caches']['cos']['tensor']} "
            f"({rope['cache_length']} × {rope['rotary_dim'] // 2} {rope['dtype']}, {pairs})"
            + (f"  when {picked}" if picked else "")
        )
        params = rope["params"]
        if params is None:
            lines.append("  the rows are not one rope's cos and sin")
            continue
        shortened = {
            k: (f"[{len(v)} values]" if isinstance(v, list) else v) for k, v in params.items()
        }
        lines.append("  " + " ".join(f"{k}={shown(v)}" for k, v in shortened.items()))
        noise = rope["max_abs_difference"]
        lines.append(
            f"  attention_factor={shown(rope['attention_factor'])} recipe={rope['recipe']}"
            f"  {noise['exact']:.2g} from exact at positions {noise['positions'][0]}–"
            f"{noise['positions'][1]}"
        )
    if answer["nope_layers"]:
        lines.append(f"no rope  layers {runs(answer['nope_layers'])}")
    if "conforms" in answer:
        lines.append("conforms" if answer["conforms"] else "does not conform:")
        for finding in answer["findings"]:
            lines.append(
                f"  {finding['kind']} (layers {runs(finding['layers'])}): {finding['detail']}"
            )
    return "\n".join(lines)

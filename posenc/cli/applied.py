"""``posenc applied BEFORE AFTER``: which rope a kernel applied, as ``POST /v1/rope/applied``
answers for the two arrays (``.npy``, or raw little-endian with ``--shape`` and ``--dtype``).
Exit 0 when the kernel applied the model's rope, 1 when it did not or the data cannot tell (the
diagnosis printed), 2 on bad input — a CI step is one line."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import click

from posenc.cli import Refused, read_json, url_param
from posenc.cli.schemes import CommaList, config_param, scheme_options

_DTYPES = ("float16", "bfloat16", "float32", "float64")
_PLACING: tuple[tuple[str, str], ...] = (
    ("layer", "with --config: the layer whose rope is expected [default: 0]"),
    ("token-axis", "the axis of the tokens, which --positions numbers [default: 0]"),
    ("head-dim", "the width of one head, where the last axis holds several"),
    ("offset", "without --positions: the first token's position [default: 0]"),
    ("rotary-offset", "the first dimension of the head that turns [default: 0]"),
)


def _options() -> list[click.Parameter]:
    from posenc.registry import get

    rope = get("rope")
    skipped = ("recipe", "framework_precision", "n_ctx")
    own = [option for option in scheme_options(rope) if option.name not in skipped]
    placing = [
        click.Option([f"--{flag}", flag.replace("-", "_")], type=click.IntRange(min=0), help=text)
        for flag, text in _PLACING
    ]
    return [
        click.Argument(["before"], type=click.Path(exists=True, dir_okay=False)),
        click.Argument(["after"], type=click.Path(exists=True, dir_okay=False)),
        click.Option(
            ["--positions"],
            type=click.Path(exists=True, dir_okay=False),
            help="int32/int64 .npy ids: (n,) one a token, or M-RoPE's (3, n)",
        ),
        config_param(),
        *placing,
        *own,
        click.Option(["--shape"], type=CommaList(int), help="raw BEFORE and AFTER's shape"),
        click.Option(["--dtype"], type=click.Choice(_DTYPES), help="raw BEFORE and AFTER's dtype"),
        click.Option(["--json", "as_json"], is_flag=True, help="print the answer as JSON"),
        url_param(),
    ]


def _run(
    before: str,
    after: str,
    positions: str | None,
    config: str | None,
    shape: tuple[int, ...] | None,
    dtype: str | None,
    as_json: bool,
    url: str | None,
    **values: Any,
) -> None:
    query = {k: v for k, v in values.items() if v is not None}
    loaded = None if config is None else read_json(config)
    if loaded is None and "layer" in query:
        raise click.UsageError("--layer names a layer of the model given by --config")
    headers = _headers(before, after, shape, dtype)
    paths = {"before": before, "after": after, "positions": positions}
    given = {name: path for name, path in paths.items() if path is not None}
    if url is None:
        from posenc.cli import budget

        # The files are read whole, as the service holds a body: their size first.
        sizes = sum(os.path.getsize(path) for path in given.values())
        budget.admit(sizes, "reading the arrays", "before")
    parts = {name: (Path(path).read_bytes(), headers.get(name, {})) for name, path in given.items()}
    answer = _ask(url, parts, loaded, query) if url else _compute(parts, loaded, query)
    if as_json:
        click.echo(json.dumps(answer))
    else:
        from posenc.testing import applied_text

        click.echo(f"{after}: {applied_text(answer)}")
    click.get_current_context().exit(0 if answer["holds"] is True else 1)


def _headers(
    before: str, after: str, shape: tuple[int, ...] | None, dtype: str | None
) -> dict[str, dict[str, str]]:
    """Part headers for raw arrays (``--shape`` and ``--dtype``); none for ``.npy``."""
    from numpy.lib.format import MAGIC_PREFIX  # numpy only once the command runs

    raw = []
    for path in (before, after):
        with open(path, "rb") as file:
            if file.read(len(MAGIC_PREFIX)) != MAGIC_PREFIX:
                raw.append(path)
    if raw and (shape is None or dtype is None):
        raise click.UsageError(f"{raw[0]} is not .npy: give --shape and --dtype")
    if not raw and (shape is not None or dtype is not None):
        raise click.UsageError("--shape and --dtype describe raw files; both are .npy")
    described = {"x-array-shape": ",".join(map(str, shape or ())), "x-array-dtype": dtype or ""}
    return {name: described for name, path in (("before", before), ("after", after)) if path in raw}


def _compute(
    parts: dict[str, tuple[bytes, dict[str, str]]], config: Any, query: dict[str, Any]
) -> dict[str, Any]:
    from posenc.cli import budget
    from posenc.declare import Part, Upload
    from posenc.schemes.rope.applied import operation

    files = {name: (Part(data, headers),) for name, (data, headers) in parts.items()}
    given = Upload(memoryview(b""), query, {} if config is None else {"config": config}, files)
    cost = operation.size(given, budget.SERVICE_DEFAULTS).cost
    budget.admit(cost.bytes, "reading the two arrays", "before")
    answer: dict[str, Any] = operation.handle(given, budget.SERVICE_DEFAULTS)
    return answer


def _ask(
    url: str,
    parts: dict[str, tuple[bytes, dict[str, str]]],
    config: Any,
    query: dict[str, Any],
) -> dict[str, Any]:
    from posenc.cli import remote

    chunks: list[remote.FormPart] = [
        (name, name, data, headers) for name, (data, headers) in parts.items()
    ]
    if config is not None:
        chunks.append(("config", None, json.dumps(config).encode(), {}))
    body, content = remote.form(chunks)
    answer: dict[str, Any] = remote.post_bytes(url, "/v1/rope/applied", query, body, content)
    return answer


class _Applied(click.Command):
    """Its options are read off the rope's parameters when it runs or shows its help."""

    def __init__(self) -> None:
        super().__init__(
            "applied",
            callback=_run,
            help="Which rope a kernel applied, read from BEFORE and AFTER (the q or k it was "
            "given and what it returned: .npy, or raw with --shape and --dtype), against the "
            "model's rope (--config, --layer) or the rope of the options. Exit 0 when it "
            "applied the model's rope, 1 when it did not or the data cannot tell, 2 on bad "
            "input.",
            short_help="which rope a kernel applied: exit 0 the model's, 1 not, 2 bad input",
            epilog="\b\nExample:\n"
            "  posenc applied q.npy q_rope.npy --positions ids.npy --config config.json "
            "--layer 3\n"
            "  posenc applied q.npy q_rope.npy --d-model 128 --base 500000 --token-axis 2",
        )

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        if not self.params:
            self.params = _options()
        return super().get_params(ctx)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except OSError as error:
            raise Refused(f"cannot read a file: {error}") from None


applied = _Applied()

"""``posenc table SCHEME …``: any scheme's table, the bytes ``GET /v1/{scheme}/table`` serves."""

from __future__ import annotations

import functools
import math
import sys
import time
from typing import Any

import click

from posenc.cli import url_param
from posenc.cli.schemes import SchemeGroup, component_options, flags, given, scheme_options
from posenc.cli.write import FORMATS, destination, format_of, progress, write


def _command(scheme: Any) -> click.Command:
    options = scheme_options(scheme)
    if scheme.rows == "positions":
        options += [
            click.Option(["--seq-len"], type=click.IntRange(min=1), help="positions [required]"),
            click.Option(["--offset"], type=click.IntRange(min=0), default=0, show_default=True),
        ]
    if scheme.dtypes is not None:
        options.append(
            click.Option(
                ["--dtype"],
                type=click.Choice(scheme.dtypes),
                help=f"computed exactly, rounded once [default: {scheme.dtypes[0]}]",
            )
        )
    options += component_options(scheme, "which of the scheme's arrays")
    options += [
        click.Option(
            ["-o", "--output"],
            required=True,
            metavar="PATH",
            help="the file to write, - for stdout",
        ),
        click.Option(
            ["--format", "fmt"],
            type=click.Choice(FORMATS),
            help="npy, bin (raw little-endian) or csv [default: from PATH's suffix, else npy]",
        ),
    ]
    return click.Command(
        scheme.name,
        params=[*options, url_param()],
        callback=functools.partial(_run, scheme),
        help=f"{scheme.summary}.",
        short_help=scheme.summary,
        epilog=f"\b\nExample:\n  {example(scheme)}",
    )


def example(scheme: Any) -> str:
    """A command that builds the scheme's first declared example, as its help shows it."""
    rows = " --seq-len 16" if scheme.rows == "positions" else ""
    return f"posenc table {scheme.name} {flags(scheme.examples[0])}{rows} -o {scheme.name}.npy"


def _run(scheme: Any, url: str | None, output: str, fmt: str | None, **values: Any) -> None:
    params = given(scheme, values)
    if values.get("config") is not None:
        from posenc.cli.model import describe, one_rope

        params = {**one_rope(describe(values["config"], url)[1]), **params}
    if scheme.rows == "positions" and values.get("seq_len") is None:
        raise click.UsageError("--seq-len is required")
    rows = {k: values.get(k) for k in ("seq_len", "offset", "component", "dtype")}
    chosen = fmt or format_of(output)
    if url is not None:
        asked = {k: v for k, v in rows.items() if v is not None}
        _fetch(url, scheme, {**params, **asked}, chosen, output)
        return
    array = _compute(scheme, params, **rows)
    with destination(output) as file:
        write(array, chosen, file, f"writing {output}")


def _compute(
    scheme: Any,
    values: dict[str, Any],
    seq_len: int | None,
    offset: int | None,
    component: str | None,
    dtype: str | None,
) -> Any:
    from posenc.cli import budget
    from posenc.rows import Rows
    from posenc.testing.tables import params_of

    params = params_of(scheme, values)
    rows = Rows(math.prod(params.grid)) if seq_len is None else Rows(seq_len, offset or 0)
    dtype = dtype or (scheme.dtypes or ("int32",))[0]
    component = component or (scheme.components or ("",))[0]
    shape = scheme.shape(params, rows.count, component)
    cost = scheme.cost(params, rows.count, dtype, component)
    what = f"a {'×'.join(map(str, shape))} {dtype} table"
    budget.admit(cost.bytes, what, "seq_len" if seq_len is not None else "grid")
    large = math.prod(shape) >= 1 << 24  # about a second's work and more
    if large:
        click.echo(f"computing {what} …", file=sys.stderr, nl=False)
    started = time.monotonic()
    if scheme.table is not None:
        array = scheme.table(params, rows.count, rows.offset, dtype, component)
    else:
        array = scheme.encode(params, rows.array(), dtype, component)
    if large:
        click.echo(f" {time.monotonic() - started:.1f} s", file=sys.stderr)
    return array


def _fetch(url: str, scheme: Any, query: dict[str, Any], fmt: str, output: str) -> None:
    from posenc.cli import remote

    path = f"/v1/{scheme.name}/table"
    with remote.get(url, path, {**query, "format": fmt}) as (answer, length):
        with destination(output) as file, progress(length, f"receiving {output}", 1 << 24) as bar:
            while piece := answer.read(1 << 20):
                file.write(piece)
                bar.update(len(piece))


table = SchemeGroup(
    _command,
    lambda scheme: True,
    name="table",
    subcommand_metavar="SCHEME [PARAMETERS] -o PATH | --config FILE [PARAMETERS] -o PATH",
    help="Any scheme's table, with the HTTP API's parameters: posenc table SCHEME --help lists "
    "them. .npy, raw little-endian (.bin) or CSV, exactly the bytes the service serves.",
    short_help="any scheme's table, as .npy, raw or CSV",
    epilog="\b\nExample:\n"
    "  posenc table rope --d-model 128 --base 500000 --seq-len 8192 -o cos_sin.npy\n"
    "  posenc table --config config.json --seq-len 8192 -o cos_sin.npy   # a model's rope",
)

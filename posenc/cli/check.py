"""``posenc check SCHEME CACHE …``: a cache against its parameters, as ``POST
/v1/{scheme}/verify`` diagnoses it. Exit 0 when it conforms, 1 when it does not (the diagnosis
printed), 2 on bad input — a CI step is one line."""

from __future__ import annotations

import functools
import json
import os
from typing import Any

import click

from posenc.cli import Refused, table, url_param
from posenc.cli.schemes import (
    CommaList,
    SchemeGroup,
    component_options,
    flags,
    given,
    scheme_options,
)

_DTYPES = ("float16", "float32", "float64", "int32")


def _command(scheme: Any) -> click.Command:
    options: list[click.Parameter] = [
        click.Argument(["cache"], type=click.Path(exists=True, dir_okay=False)),
        *scheme_options(scheme),
        *component_options(scheme, "which array CACHE holds"),
    ]
    options += [
        click.Option(
            ["--offset"],
            type=click.IntRange(min=0),
            default=0,
            show_default=True,
            help="the position of the first row",
        ),
        click.Option(
            ["--tolerance-ulp"],
            type=click.FloatRange(min=0, min_open=True, max=1e6),
            default=1.0,
            show_default=True,
            help="a position is bad when a value is off by more ulps than this",
        ),
        click.Option(
            ["--shape"], type=CommaList(int), help="a raw (not .npy) CACHE's shape: 2,4096,128"
        ),
        click.Option(["--dtype"], type=click.Choice(_DTYPES), help="a raw CACHE's dtype"),
        click.Option(["--json", "as_json"], is_flag=True, help="print the report as JSON"),
        url_param(),
    ]
    return click.Command(
        scheme.name,
        params=options,
        callback=functools.partial(_run, scheme),
        help=f"CACHE (.npy, or raw little-endian with --shape and --dtype) against {scheme.name}"
        f" ({scheme.summary}). Exit 0 when it conforms, 1 when it does not, 2 on bad input.",
        short_help=scheme.summary,
        epilog=f"\b\nExample:\n  {table.example(scheme)}\n  {example(scheme)}",
    )


def example(scheme: Any) -> str:
    """A check of the cache ``posenc table``'s example for the scheme writes."""
    return f"posenc check {scheme.name} {scheme.name}.npy {flags(scheme.examples[0])}"


def _run(
    scheme: Any,
    cache: str,
    offset: int,
    tolerance_ulp: float,
    shape: tuple[int, ...] | None,
    dtype: str | None,
    as_json: bool,
    url: str | None,
    **values: Any,
) -> None:
    params = given(scheme, values)
    if values.get("config") is not None:
        from posenc.cli.model import describe, one_rope

        params = {**one_rope(describe(values["config"], url)[1]), **params}
    from numpy.lib.format import MAGIC_PREFIX  # numpy only once the command runs

    with open(cache, "rb") as file:
        npy = file.read(len(MAGIC_PREFIX)) == MAGIC_PREFIX
    if npy and (shape is not None or dtype is not None):
        raise click.UsageError(f"--shape and --dtype describe raw files; {cache} is .npy")
    if not npy and (shape is None or dtype is None):
        raise click.UsageError(f"{cache} is not .npy: give its --shape and --dtype")
    component = values.get("component")
    settings = {"offset": offset, "tolerance_ulp": tolerance_ulp}
    if url is not None:
        document = _ask(url, scheme, {**params, **settings}, component, cache, shape, dtype)
    else:
        document = _compute(scheme, params, settings, component, cache, shape, dtype)
    if as_json:
        click.echo(json.dumps(document, default=_plain))
    else:
        from posenc.testing import report_text

        click.echo(f"{cache}: {report_text(document)}")
    click.get_current_context().exit(0 if document["conforms"] else 1)


def _ask(
    url: str,
    scheme: Any,
    query: dict[str, Any],
    component: str | None,
    cache: str,
    shape: tuple[int, ...] | None,
    dtype: str | None,
) -> Any:
    from posenc.cli import remote

    headers = {"Content-Type": "application/x-npy"}
    if shape is not None and dtype is not None:
        headers = {
            "Content-Type": "application/octet-stream",
            "X-Array-Shape": ",".join(map(str, shape)),
            "X-Array-Dtype": dtype,
        }
    with open(cache, "rb") as file:
        data = file.read()
    if component is not None:
        query["component"] = component
    return remote.post_bytes(url, f"/v1/{scheme.name}/verify", query, data, headers)


def _compute(
    scheme: Any,
    values: dict[str, Any],
    settings: dict[str, Any],
    component: str | None,
    cache: str,
    shape: tuple[int, ...] | None,
    dtype: str | None,
) -> dict[str, Any]:
    import numpy as np

    from posenc.cli import budget
    from posenc.testing.tables import conformance, params_of

    params = params_of(scheme, values)
    chosen = component or (scheme.components or ("",))[0]
    size = os.path.getsize(cache)
    if shape is None or dtype is None:
        try:
            array = np.load(cache, allow_pickle=False, mmap_mode="r")
        except ValueError as e:
            raise Refused(f"{cache}: not a valid .npy file: {e}") from None
    else:
        wanted = int(np.prod(shape, dtype=object)) * np.dtype(dtype).itemsize
        if wanted != size:
            raise Refused(
                f"{cache}: shape {list(shape)} of {dtype} needs {wanted} bytes, not {size}"
            )
        array = np.memmap(cache, dtype=np.dtype(dtype).newbyteorder("<"), mode="r", shape=shape)
    if scheme.conformance_cost is not None:
        count = scheme.rows_in(params, array.shape, chosen)
        cost = scheme.conformance_cost(params, count, chosen)
        budget.admit(size + cost.bytes, f"checking {cache}", "cache")
    return conformance(array, scheme.name, component=component, **settings, **values)


def _plain(value: Any) -> Any:
    """numpy scalars in a finding's evidence, as JSON numbers."""
    return value.item() if hasattr(value, "item") else str(value)


check = SchemeGroup(
    _command,
    lambda scheme: scheme.conformance is not None,
    name="check",
    subcommand_metavar="SCHEME CACHE [PARAMETERS] | CACHE --config FILE [PARAMETERS]",
    help="CACHE against the table of a scheme's parameters: posenc check SCHEME CACHE "
    "[parameters], or posenc check CACHE --config config.json for a model's rope. Exit 0 when "
    "it conforms, 1 when it does not (with the diagnosis), 2 on bad input.",
    short_help="a cache against its parameters: exit 0 conforms, 1 not, 2 bad input",
    epilog="\b\nExample:\n"
    "  posenc check rope cos_sin.npy --d-model 128 --base 500000\n"
    "  posenc check cos_sin.npy --config config.json   # a model's rope",
)

"""Every scheme as a subcommand, its options read off its declaration (never written twice).

A scheme's parameters dataclass (``posenc.declare``) gives each option: its name as the HTTP
API spells it with dashes (``d_model`` → ``--d-model``), its type (a ``Literal`` becomes a
choice, a tuple a comma-separated list), and its help from the field's doc, range and default.
Options default to None and only given ones are passed on, so the dataclass keeps its own
defaults and its own range checks. The registry is imported only when a scheme is asked for:
``posenc --help`` needs none of it.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import click

Make = Callable[[Any], click.Command]


class CommaList(click.ParamType):  # type: ignore[type-arg]
    """``1,2.5,3`` as a tuple, each item of ``item``'s type (the API's list spelling)."""

    name = "list"

    def __init__(self, item: type) -> None:
        self.item = item

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, tuple):
            return value
        try:
            return tuple(self.item(part) for part in str(value).split(","))
        except ValueError:
            self.fail(f"must be comma-separated {self.item.__name__}s, got {value!r}", param, ctx)

    def get_metavar(self, param: click.Parameter, ctx: click.Context | None = None) -> str:
        return f"{self.item.__name__.upper()},…"


def scheme_options(scheme: Any) -> list[click.Parameter]:
    """One option per parameter of ``scheme``, in its declaration's order."""
    from posenc.declare import choices, hints, spec

    types = hints(scheme.params)
    options: list[click.Parameter] = []
    for f in scheme.fields():
        hint = types[f.name]
        allowed = choices(hint)
        inner = [arg for arg in typing.get_args(hint) if arg is not type(None)] or [hint]
        base = inner[0] if len(inner) == 1 else hint
        kind: Any
        if allowed is not None:
            kind = click.Choice(allowed)
        elif typing.get_origin(base) is tuple:
            kind = CommaList(typing.get_args(base)[0])
        else:
            kind = {int: click.INT, float: click.FLOAT, bool: click.BOOL}.get(base, click.STRING)
        required = f.default is dataclasses.MISSING
        extra = ["required"] if required else []
        if not required and f.default is not None:
            extra.append(f"default: {shown(f.default)}")
        help_text = spec(f).doc + (f" [{'; '.join(extra)}]" if extra else "")
        flag = "--" + f.name.replace("_", "-")
        options.append(click.Option([flag, f.name], type=kind, default=None, help=help_text))
    return options


def given(scheme: Any, values: Mapping[str, Any]) -> dict[str, Any]:
    """The scheme's parameters among a command's values: those given, by their API names."""
    names = {f.name for f in scheme.fields()}
    return {k: v for k, v in values.items() if k in names and v is not None}


def flags(params: Mapping[str, Any]) -> str:
    """Parameters as this command line takes them: ``--d-model 128 --base 500000``.

    >>> flags({"d_model": 8, "short_factor": [1.0, 2.5], "truncate": False})
    '--d-model 8 --short-factor 1,2.5 --truncate false'
    """
    return " ".join(f"--{k.replace('_', '-')} {shown(v)}" for k, v in params.items())


def shown(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list | tuple):
        return ",".join(shown(item) for item in value)
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e16:
        return str(int(value))
    return str(value)


def component_options(scheme: Any, what: str) -> list[click.Parameter]:
    """``--component`` where the scheme has several arrays (``what`` says what it picks), and
    ``--config`` where it reads a model's config.json."""
    options: list[click.Parameter] = []
    if scheme.components:
        options.append(
            click.Option(
                ["--component"],
                type=click.Choice(scheme.components),
                help=f"{what} [default: {scheme.components[0]}]",
            )
        )
    if takes_config(scheme):
        options.append(config_param())
    return options


def config_param() -> click.Option:
    return click.Option(
        ["--config"],
        type=click.Path(exists=True, dir_okay=False),
        help="a model's config.json: its parameters, which options given here override",
    )


def takes_config(scheme: Any) -> bool:
    """The scheme reads a model's config.json (it offers ``POST /v1/{scheme}/config``)."""
    return any(extra.name == "config" for extra in scheme.extras)


class SchemeGroup(click.Group):
    """A subcommand per scheme that ``offers`` the operation, each made by ``make`` when asked
    for. ``posenc check cache.npy --config config.json`` names no scheme: the one scheme that
    reads configs is meant, and the arguments go to it whole."""

    def __init__(self, make: Make, offers: Callable[[Any], bool], **attrs: Any) -> None:
        attrs.setdefault("context_settings", {})["ignore_unknown_options"] = True
        super().__init__(**attrs)
        self.make, self.offers = make, offers

    def _schemes(self) -> dict[str, Any]:
        from posenc.registry import SCHEMES

        return {scheme.name: scheme for scheme in SCHEMES if self.offers(scheme)}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self._schemes())

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        scheme = self._schemes().get(cmd_name)
        return None if scheme is None else self.make(scheme)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        schemes = self._schemes()
        if not args or args[0] in schemes:
            return super().resolve_command(ctx, args)
        readers = [s for s in schemes.values() if takes_config(s)]
        if any(arg.split("=")[0] == "--config" for arg in args) and len(readers) == 1:
            return readers[0].name, self.make(readers[0]), args
        raise click.UsageError(
            f"{args[0]!r} is not a scheme: name one of {', '.join(schemes)} first, "
            "or give a model's --config",
            ctx,
        )


def runs(layers: Iterable[int]) -> str:
    """Layer numbers as runs, as the page shows them.

    >>> runs([0, 1, 2, 3, 4, 6, 7, 8, 24, 25])
    '0-4, 6-8, 24, 25'
    """
    spans: list[list[int]] = []
    for layer in sorted(layers):
        if spans and layer == spans[-1][-1] + 1:
            spans[-1].append(layer)
        else:
            spans.append([layer])
    return ", ".join(
        f"{span[0]}-{span[-1]}" if len(span) > 2 else ", ".join(map(str, span)) for span in spans
    )

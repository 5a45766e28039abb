"""``posenc``: the service's answers on a command line, for a port's CI.

    posenc model config.json                       the rope a model's config states
    posenc table rope --d-model 128 --seq-len 8192 -o cos_sin.npy
    posenc check rope cos_sin.npy --d-model 128    exit 0 conforms, 1 does not, 2 bad input
    posenc check cos_sin.npy --config config.json
    posenc applied q.npy q_rope.npy --positions ids.npy --config config.json --layer 3

Each runs in this process, or with ``--url`` asks a running service the same question and prints
the same output. Subcommands are imported when they run, and the registry (numba and every
scheme's kernels) only when a scheme is needed, so ``posenc --help`` starts in a blink.
"""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Sequence
from typing import Any, ClassVar

import click

from posenc.errors import PosencError


class Refused(click.ClickException):
    """Bad input, said in the core's words: exit code 2, as for a usage error."""

    exit_code = 2


URL_HELP = "ask the service at URL (http://host:port) instead of computing here"


def url_param() -> click.Option:
    return click.Option(["--url"], metavar="URL", help=URL_HELP)


def read_json(path: str) -> Any:
    try:
        with open(path, encoding="utf-8") as file:
            return json.load(file)
    except (OSError, ValueError) as e:
        raise Refused(f"{path}: not a readable JSON file: {e}") from None


class _Commands(click.Group):
    """The subcommands, each imported from its module when it runs or help lists it; any
    :class:`PosencError` (a parameter out of range, a cache of the wrong shape) is exit 2."""

    modules: ClassVar[dict[str, str]] = {
        "model": "posenc.cli.model",
        "table": "posenc.cli.table",
        "check": "posenc.cli.check",
        "applied": "posenc.cli.applied",
    }

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.modules)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        module = self.modules.get(cmd_name)
        if module is None:
            return None
        found: click.Command = getattr(importlib.import_module(module), cmd_name)
        return found

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except PosencError as e:
            raise Refused(str(e)) from None

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        """Every error as one line on stderr, ``Error: <what, naming the field>``, exit 2 for
        bad input: click's usage block before a usage error is noise in a CI log."""
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        try:
            code = super().main(args, prog_name, complete_var, False, **extra)
        except click.UsageError as e:
            hint = f" (see {e.ctx.command_path} --help)" if e.ctx is not None else ""
            click.echo(f"Error: {e.format_message()}{hint}", err=True)
            sys.exit(e.exit_code)
        except click.ClickException as e:
            click.echo(f"Error: {e.format_message()}", err=True)
            sys.exit(e.exit_code)
        except click.Abort:
            click.echo("Aborted!", err=True)
            sys.exit(1)
        sys.exit(code if isinstance(code, int) else 0)


@click.group(
    cls=_Commands,
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog="\b\nExample: a model's rope, its exact cache, and yours checked against it\n"
    "  posenc model config.json\n"
    "  posenc table --config config.json --seq-len 8192 -o cos_sin.npy\n"
    "  posenc check my_cache.npy --config config.json",
)
@click.version_option(package_name="posenc", message="%(prog)s %(version)s")
def main() -> None:
    """Positional encodings, correct to the last bit: a model's rope, any scheme's table, and
    the check of a cache against it (exit 0 conforms, 1 does not, 2 bad input)."""

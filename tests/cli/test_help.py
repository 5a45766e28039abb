"""Help that shows how: `posenc --help` and every subcommand's help end with an example, and the
examples of every scheme's `table` and `check` run as printed. Errors are one line."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from posenc.cli import main
from posenc.registry import SCHEMES
from tests.cli.conftest import posenc


def help_of(*command: str) -> str:
    ran = CliRunner().invoke(main, [*command, "--help"], catch_exceptions=False)
    assert ran.exit_code == 0, ran.output
    return ran.stdout


@pytest.mark.parametrize("command", [[], ["model"], ["table"], ["check"]], ids=" ".join)
def test_the_help_ends_with_an_example(command: list[str]) -> None:
    example = help_of(*command).split("\n  Example")[1]
    assert "posenc " in example


@pytest.mark.parametrize("scheme", [s.name for s in SCHEMES])
def test_each_schemes_table_and_check_examples_run_as_printed(
    scheme: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    build = help_of("table", scheme).split("Example:\n")[1].splitlines()[0]
    check = help_of("check", scheme).split("Example:\n")[1].splitlines()
    assert check[0] == build  # the check's help builds the cache it checks
    for line in (build, check[1]):
        ran = CliRunner().invoke(main, shlex.split(line)[1:], catch_exceptions=False)
        assert ran.exit_code == 0, (line, ran.output)


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["table", "rope", "--d-model", "x", "-o", "t.npy"], "'--d-model'"),
        (["table", "rope", "--d-model", "7", "--seq-len", "4", "-o", "t.npy"], "d_model"),
        (["check", "rope"], "'CACHE'"),
        (["frobnicate"], "'frobnicate'"),
    ],
)
def test_an_error_is_one_line_naming_the_field_and_exit_2(
    args: list[str], field: str, tmp_path: Path
) -> None:
    ran = posenc(*args, cwd=tmp_path)
    assert ran.code == 2 and ran.stdout == ""
    assert ran.stderr.startswith("Error: ") and ran.stderr.count("\n") == 1, ran.stderr
    assert field in ran.stderr

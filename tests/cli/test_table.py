"""`posenc table`: every scheme, its options read off its declaration, the core's array in the
service's formats; a table the machine cannot hold is refused before any work."""

from __future__ import annotations

import dataclasses
import io
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from posenc.cli import main
from posenc.cli.schemes import flags
from posenc.registry import SCHEMES, get
from tests.cli.conftest import posenc

EXAMPLES = [(s.name, i) for s in SCHEMES for i in range(len(s.examples))]


def run(*args: str) -> Any:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def core_table(name: str, example: dict[str, Any], count: int, **chosen: str) -> np.ndarray:
    scheme = get(name)
    params = scheme.params(**example)
    dtype = chosen.get("dtype", (scheme.dtypes or ("int32",))[0])
    component = chosen.get("component", (scheme.components or ("",))[0])
    if scheme.rows == "grid":  # every cell, whatever the count
        return scheme.encode(params, np.arange(math.prod(params.grid)), dtype, component)
    if scheme.table is not None:
        return scheme.table(params, count, 3, dtype, component)
    return scheme.encode(params, np.arange(3, 3 + count), dtype, component)


@pytest.mark.parametrize("scheme", [s.name for s in SCHEMES])
def test_every_parameter_of_every_scheme_is_an_option(scheme: str) -> None:
    declared = get(scheme)
    shown = run("table", scheme, "--help").output
    for f in dataclasses.fields(declared.params):
        assert f"--{f.name.replace('_', '-')} " in shown
    assert ("--seq-len" in shown) == (declared.rows == "positions")
    assert ("--component" in shown) == bool(declared.components)
    assert ("--dtype" in shown) == (declared.dtypes is not None)


@pytest.mark.parametrize(("scheme", "example"), EXAMPLES)
def test_every_example_of_every_scheme_is_the_cores_array(
    scheme: str, example: int, tmp_path: Path
) -> None:
    values = get(scheme).examples[example]
    out = tmp_path / "table.npy"
    rows = [] if get(scheme).rows == "grid" else ["--seq-len", "5", "--offset", "3"]
    result = run("table", scheme, *flags(values).split(), *rows, "-o", str(out))
    assert result.exit_code == 0, result.output
    expected = core_table(scheme, values, 5)
    written = np.load(out)
    assert written.dtype == expected.dtype
    np.testing.assert_array_equal(written, expected)


def test_every_format_holds_the_same_values(tmp_path: Path) -> None:
    expected = core_table("rope", {"d_model": 8, "base": 500000.0}, 7, dtype="float16")
    common = ["table", "rope", "--d-model", "8", "--base", "500000", "--dtype", "float16"]
    for name in ("t.npy", "t.bin", "t.csv", "t.raw"):
        assert (
            run(*common, "--seq-len", "7", "--offset", "3", "-o", str(tmp_path / name)).exit_code
            == 0
        )
    np.testing.assert_array_equal(np.load(tmp_path / "t.npy"), expected)
    for raw in ("t.bin", "t.raw"):
        read = np.fromfile(tmp_path / raw, dtype="<f2").reshape(expected.shape)
        np.testing.assert_array_equal(read, expected)
    text = (tmp_path / "t.csv").read_text()
    # As the service writes CSV: a line per index of the first axis (cos, then sin), each float
    # in the shortest digits that read back in its own dtype.
    assert len(text.splitlines()) == 2
    tokens = text.replace("\n", ",").rstrip(",").split(",")
    assert tokens == [str(np.float16(token)) for token in tokens]
    np.testing.assert_array_equal(
        np.loadtxt(io.StringIO(text), delimiter=",", dtype=np.float16).reshape(expected.shape),
        expected,
    )


def test_format_wins_over_the_suffix_and_stdout_takes_the_bytes() -> None:
    result = CliRunner().invoke(
        main, ["table", "t5", "--seq-len", "3", "--format", "csv", "-o", "-"]
    )
    assert result.exit_code == 0
    assert result.stdout_bytes == b"0,17,18\n1,0,17\n2,1,0\n"


def test_a_table_too_large_for_this_machine_is_refused_before_any_work(tmp_path: Path) -> None:
    out = tmp_path / "huge.npy"
    ran = posenc("table", "rope", "--d-model", "128", "--seq-len", str(2**31 - 1), "-o", out)
    assert ran.code == 2
    assert "seq_len: a 2×2147483647×128 float32 table would need" in ran.stderr
    assert "over this machine's budget" in ran.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["rope", "--d-model", "8"], "--seq-len is required"),
        (["rope", "--d-model", "8", "--seq-len", "2", "--offset", str(2**31 - 1)], "2^31"),
        (["rope", "--d-model", "7", "--seq-len", "2"], "d_model: must be even, got 7"),
        (["rope", "--d-model", "8", "--seq-len", "2", "--scaling", "yarn"], "factor"),
        (["sinusoidal2d", "--d-model", "8", "--grid", "2,x"], "comma-separated ints"),
        (["sinusoidal2d", "--d-model", "8", "--grid", "4096,8192"], "grid"),
        (["alibi", "--seq-len", "2", "--d-model", "8"], "No such option '--d-model'"),
        (["fourier", "--seq-len", "2"], "'fourier' is not a scheme: name one of sinusoidal, rope"),
        (["--seq-len", "2"], "'--seq-len' is not a scheme"),
    ],
)
def test_bad_parameters_are_exit_2_naming_them(
    args: list[str], message: str, tmp_path: Path
) -> None:
    result = run("table", *args, "-o", str(tmp_path / "t.npy"))
    assert result.exit_code == 2
    assert message in result.output
    assert list(tmp_path.iterdir()) == []


def test_a_large_table_shows_its_progress_and_a_small_one_nothing(tmp_path: Path) -> None:
    small = posenc("table", "sinusoidal", "--d-model", "64", "--seq-len", "16", "-o", "s.csv",
                   cwd=tmp_path)  # fmt: skip
    large = posenc("table", "sinusoidal", "--d-model", "512", "--seq-len", "4096", "-o", "l.csv",
                   cwd=tmp_path)  # fmt: skip
    assert (small.code, small.stderr) == (0, "")
    assert large.code == 0 and "writing l.csv" in large.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["l.csv", "s.csv"]
    assert len((tmp_path / "l.csv").read_text().splitlines()) == 4096

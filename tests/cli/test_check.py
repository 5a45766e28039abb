"""`posenc check`: exit 0 when a cache conforms, 1 with the diagnosis when it does not, 2 on bad
input — run as a CI step runs it, on the suite's faulty caches."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.cli.conftest import FAULTS, check_args, posenc
from tests.live.conftest import free_port


@pytest.mark.parametrize("name", list(FAULTS))
def test_each_cache_gets_its_exit_code_and_its_findings(caches: Path, name: str) -> None:
    ran = posenc(*check_args(caches, name))
    fault = FAULTS[name]
    assert ran.code == (0 if fault.conforms else 1), ran.stderr
    first, *rest = ran.stdout.splitlines()
    assert first.startswith(f"{caches / name}.npy: ")
    assert ("does not conform" in first) != fault.conforms
    named = [line.split(":")[0].strip() for line in rest if not line.startswith("      ")]
    assert named[1:] == fault.findings  # after the line of the largest error
    assert ("first bad position" in ran.stdout) != fault.conforms


def test_the_report_tells_the_bits_and_where_the_drift_starts(caches: Path) -> None:
    ran = posenc(*check_args(caches, "bfloat16-positions"))
    assert "first bad position 257" in ran.stdout
    assert "first_collapsed_position=257" in ran.stdout


def test_json_is_the_verify_document(caches: Path) -> None:
    ran = posenc(*check_args(caches, "base-500000-as-10000"), "--json")
    assert ran.code == 1
    report = json.loads(ran.stdout)
    assert report["conforms"] is False
    assert report["params"]["d_model"] == 64 and report["params"]["seq_len"] == 64
    (finding,) = report["diagnosis"]
    assert finding["name"] == "base_mismatch"
    assert finding["evidence"]["fitted_base"] == 500000.0
    assert len(report["error_by_position"]) == 64


def test_a_raw_cache_is_read_with_its_shape_and_dtype(caches: Path, tmp_path: Path) -> None:
    values = np.load(caches / "float32-angles.npy")
    raw = tmp_path / "cache.f32"
    values.astype("<f4").tofile(raw)
    ran = posenc("check", "sinusoidal", raw, "--d-model", "64", "--shape", "1024,64")
    assert ran.code == 2 and "--shape and --dtype" in ran.stderr
    ran = posenc(
        "check", "sinusoidal", raw, "--d-model", "64", "--shape", "1024,64", "--dtype", "float32"
    )
    assert ran.code == 1 and "angle_precision" in ran.stdout
    ran = posenc(
        "check", "sinusoidal", raw, "--d-model", "64", "--shape", "1000,64", "--dtype", "float32"
    )
    assert ran.code == 2 and "needs 256000 bytes, not 262144" in ran.stderr


def _write(path: Path, content: bytes) -> Path:
    path.write_bytes(content)
    return path


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--d-model", "0"], "d_model: must be ≥ 1, got 0"),
        (["--d-model", "63"], "expected shape [128, 63]"),
        (["--d-model", "64", "--base", "1"], "base: must be > 1"),
        (["--d-model", "64", "--layout", "diagonal"], "'diagonal' is not one of"),
        (["--d-model", "64", "--scaling", "yarn"], "No such option '--scaling'"),
        (["--base", "100"], "d_model: is required"),
        (["--d-model", "64", "--offset", "2147483600"], "seq_len: offset + seq_len must be ≤ 2^31"),
    ],
)
def test_bad_parameters_are_exit_2_naming_them(caches: Path, args: list[str], message: str) -> None:
    ran = posenc("check", "sinusoidal", caches / "correct-float32.npy", *args)
    assert ran.code == 2
    assert message in ran.stderr
    assert ran.stdout == ""


def test_bad_files_are_exit_2_naming_them(tmp_path: Path) -> None:
    header = b"\x93NUMPY\x01\x00\x10\x00{'descr': 'x'}\n"
    nan = np.ones((4, 8), np.float32)
    nan[2, 3] = np.nan
    np.save(tmp_path / "nan.npy", nan)
    cases = {
        tmp_path / "absent.npy": "does not exist",
        _write(tmp_path / "broken.npy", header): "not a valid .npy file",
        _write(tmp_path / "text.npy", b"hello"): "is not .npy: give its --shape and --dtype",
        tmp_path / "nan.npy": "row 2 holds NaN or infinity",
    }
    for path, message in cases.items():
        ran = posenc("check", "sinusoidal", path, "--d-model", "8")
        assert (ran.code, message in ran.stderr) == (2, True), (path, ran.stderr)


def test_a_models_rope_cache_is_checked_against_its_config(llama3: Path, tmp_path: Path) -> None:
    built = posenc("table", "--config", llama3, "--seq-len", "2048", "-o", "ok.npy", cwd=tmp_path)
    assert built.code == 0, built.stderr
    assert posenc("check", "ok.npy", "--config", llama3, cwd=tmp_path).code == 0
    # Explicit parameters override the config's: the same cache under another base fails.
    ran = posenc("check", "rope", "ok.npy", "--config", llama3, "--base", "10000", cwd=tmp_path)
    assert ran.code == 1 and "base=10000" in ran.stdout


def test_a_cache_from_transformers_float32_recipe_is_named(llama3: Path, tmp_path: Path) -> None:
    build: list[str | Path] = [
        "table",
        "--config",
        llama3,
        "--recipe",
        "framework",
        "--seq-len",
        "4096",
    ]
    posenc(*build, "-o", "fw.npy", cwd=tmp_path)
    ran = posenc("check", "fw.npy", "--config", llama3, cwd=tmp_path)
    assert ran.code == 1
    assert "matches_framework_recipe" in ran.stdout and "angle_precision" in ran.stdout


def test_a_rope_cache_of_later_positions_is_placed(llama3: Path, tmp_path: Path) -> None:
    build: list[str | Path] = ["table", "--config", llama3, "--offset", "100", "--seq-len", "512"]
    posenc(*build, "-o", "late.npy", cwd=tmp_path)
    ran = posenc("check", "late.npy", "--config", llama3, "--component", "cos_sin", cwd=tmp_path)
    assert ran.code == 1 and "offset_mismatch" in ran.stdout and "fitted_offset=100" in ran.stdout
    ran = posenc("check", "late.npy", "--config", llama3, "--offset", "100", cwd=tmp_path)
    assert ran.code == 0, ran.stdout


def test_python_dash_m_is_the_same_command(caches: Path) -> None:
    args = check_args(caches, "sin-cos-swapped")
    module = subprocess.run(
        [sys.executable, "-m", "posenc", *args], capture_output=True, text=True, timeout=120
    )
    script = posenc(*args)
    assert (module.returncode, module.stdout) == (script.code, script.stdout)
    assert script.code == 1
    assert "layout_mismatch" in module.stdout


def test_a_service_that_cannot_be_reached_is_exit_2(caches: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    ran = posenc(*check_args(caches, "correct-float32"), "--url", url)
    assert ran.code == 2
    assert f"cannot reach the service at {url}" in ran.stderr

"""posenc.testing: the assertions a port's own test suite calls, on the same faulty caches —
an AssertionError whose message is the diagnosis, and the very document /verify answers."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from posenc.errors import NotApplicableError, ParameterError
from posenc.registry import get
from posenc.testing import (
    assert_rope_matches,
    assert_table_matches,
    conformance,
    report_text,
)
from tests.cli.conftest import FAULTS, LLAMA3
from tests.conftest import Client


def _offset(name: str) -> int:
    args = FAULTS[name].args
    return int(args[args.index("--offset") + 1]) if "--offset" in args else 0


@pytest.mark.parametrize("name", list(FAULTS))
def test_each_faulty_cache_fails_with_its_diagnosis_as_the_message(name: str) -> None:
    fault = FAULTS[name]
    values = fault.build()
    given = {"d_model": values.shape[1], "offset": _offset(name)}
    if fault.conforms:
        assert_table_matches(values, "sinusoidal", **given)  # raises nothing
        return
    with pytest.raises(AssertionError) as failed:
        assert_table_matches(values, "sinusoidal", **given)
    message = str(failed.value)
    assert message.startswith("does not conform to sinusoidal d_model=")
    assert "first bad position" in message and "ulps of" in message
    for finding in fault.findings:
        assert f"\n  {finding}: " in message


@pytest.mark.parametrize("name", ["float32-angles", "bfloat16-positions", "correct-float16-odd"])
def test_the_document_is_what_the_service_answers(client: Client, name: str) -> None:
    values = FAULTS[name].build()
    buffer = io.BytesIO()
    np.save(buffer, values)
    answer = client.post(
        f"/v1/sinusoidal/verify?d_model={values.shape[1]}",
        content=buffer.getvalue(),
        headers={"Content-Type": "application/x-npy"},
    )
    here = json.loads(json.dumps(conformance(values, "sinusoidal", d_model=values.shape[1])))
    assert here == answer.json()
    assert report_text(here) == report_text(answer.json())


def _rope_cache(count: int = 256, **params: object) -> np.ndarray:
    rope = get("rope")
    stated = rope.params(**{"d_model": 128, "base": 500000.0, **params})
    return rope.encode(stated, np.arange(count), "float32", "cos_sin")


def test_a_rope_cache_matches_its_config_loaded_or_by_path(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps(LLAMA3))
    cache = _rope_cache(
        scaling="llama3",
        factor=8.0,
        original_max_position_embeddings=8192,
    )
    assert_rope_matches(cache, config=LLAMA3)
    assert_rope_matches(cache, config=config)
    assert_rope_matches(cache[0], config=config, component="cos")
    # A parameter given beside the config overrides it.
    with pytest.raises(AssertionError, match="to rope d_model=128 base=10000 layout=split"):
        assert_rope_matches(cache, config=LLAMA3, base=10000.0)


def test_a_cache_built_without_the_models_scaling_is_named() -> None:
    with pytest.raises(AssertionError) as failed:
        assert_rope_matches(_rope_cache(4096), config=LLAMA3)
    assert "scaling_mismatch" in str(failed.value)


def test_a_wrong_shape_or_a_nan_fails_the_assertion() -> None:
    cache = _rope_cache(16)
    with pytest.raises(AssertionError, match=r"expected shape \[2, 16, 64\] for cos_sin"):
        assert_rope_matches(cache, d_model=64)
    broken = cache.copy()
    broken[1, 5, 0] = np.inf
    with pytest.raises(AssertionError, match="row 1 holds NaN or infinity"):
        assert_rope_matches(broken, d_model=128, base=500000.0)
    with pytest.raises(AssertionError, match=r"non-empty, got shape \[2, 0, 128\]"):
        assert_rope_matches(cache[:, :0], d_model=128)
    with pytest.raises(AssertionError, match=r"1-, 2- or 3-D and non-empty, got shape \[\]"):
        assert_rope_matches(np.float32(1.0), d_model=128)


def test_parameters_the_scheme_cannot_take_are_errors_not_failures() -> None:
    cache = _rope_cache(16)
    with pytest.raises(NotApplicableError, match="num_heads: does not apply"):
        assert_rope_matches(cache, d_model=128, num_heads=4)
    with pytest.raises(ParameterError, match="d_model: is required"):
        assert_rope_matches(cache, base=500000.0)
    with pytest.raises(ParameterError, match="scheme: must be one of"):
        assert_table_matches(cache, "fourier", d_model=128)
    with pytest.raises(ParameterError, match="component: must be one of"):
        assert_rope_matches(cache, d_model=128, component="tan")


def test_err_msg_comes_first_as_in_numpy_testing() -> None:
    values = FAULTS["sin-cos-swapped"].build()
    with pytest.raises(AssertionError) as failed:
        assert_table_matches(values, "sinusoidal", d_model=64, err_msg="our kernel, layer 3")
    assert str(failed.value).splitlines()[0] == "our kernel, layer 3"


def test_buckets_match_only_when_equal() -> None:
    exact = get("t5").encode(get("t5").params(), np.arange(40), "int32", "")
    assert_table_matches(exact, "t5")
    off = exact.copy()
    off[3, 30] += 1
    with pytest.raises(AssertionError, match="does not conform to t5 num_buckets=32"):
        assert_table_matches(off, "t5")


def test_importing_the_helper_needs_no_server_and_no_torch() -> None:
    code = (
        "import sys, numpy, posenc.testing as t; "
        "t.assert_table_matches(numpy.zeros((1, 2), numpy.float32) + [0, 1], 'sinusoidal', "
        "d_model=2); "
        "print(sorted(m for m in ('torch', 'fastapi', 'httpx', 'app') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_the_helper_refuses_a_float16_table_it_cannot_measure() -> None:
    """An all-zero float16 angle table at positions past 65504 once passed."""
    from posenc.errors import InconsistentError
    from posenc.testing import assert_table_matches

    with pytest.raises(InconsistentError):
        assert_table_matches(
            np.zeros((3, 2), np.float16), "rope", component="angle", offset=70000, d_model=4
        )

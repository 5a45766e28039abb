"""`posenc model config.json`: the config operation's answer, in a terminal or as JSON, and the
two commands that build and check the model's cache — which work as printed."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from app import settings as settings_module
from app.settings import Settings
from posenc.cli.budget import SERVICE_DEFAULTS
from posenc.registry import get
from tests.cli.conftest import LLAMA3, posenc


def test_the_text_names_every_parameter_of_the_rope(llama3: Path) -> None:
    ran = posenc("model", llama3)
    assert ran.code == 0, ran.stderr
    lines = [line.split() for line in ran.stdout.splitlines()]
    for name, value in [
        ("d_model", "128"),
        ("base", "500000"),
        ("scaling", "llama3"),
        ("factor", "8"),
        ("original_max_position_embeddings", "8192"),
        ("max_position_embeddings", "2048"),
    ]:
        assert [name, value] in lines


def test_json_is_the_config_operations_answer(llama3: Path) -> None:
    ran = posenc("model", llama3, "--json")
    (extra,) = [e for e in get("rope").extras if e.name == "config"]
    expected = json.loads(json.dumps(extra.handle(LLAMA3, SERVICE_DEFAULTS)))
    assert json.loads(ran.stdout) == expected
    assert expected["params"]["scaling"] == "llama3"


def test_the_printed_commands_build_a_cache_that_passes_its_check(
    llama3: Path, tmp_path: Path
) -> None:
    printed = posenc("model", llama3).stdout.split("\ncommands\n")[1].splitlines()
    build, check = (shlex.split(line)[1:] for line in printed)
    assert build[:2] == ["table", "rope"] and check[0] == "check"
    built = posenc(*build, cwd=tmp_path)
    assert built.code == 0, built.stderr
    checked = posenc(*check, cwd=tmp_path)
    assert checked.code == 0, checked.stdout + checked.stderr


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({**LLAMA3, "rope_scaling": {"rope_type": "spiral"}}, "rope_scaling.rope_type: must be"),
        ({"hidden_size": 4096}, "num_attention_heads"),
        ([1, 2], "must be a JSON object"),
    ],
)
def test_a_config_the_service_cannot_honour_is_exit_2_naming_the_field(
    config: object, message: str, tmp_path: Path
) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    ran = posenc("model", path)
    assert ran.code == 2 and message in ran.stderr, ran.stderr


def test_a_file_that_is_not_json_is_exit_2(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text("{not json")
    ran = posenc("model", path)
    assert ran.code == 2 and "not a readable JSON file" in ran.stderr


def test_the_limits_of_a_default_service_are_the_settings_defaults(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fields = Settings.model_fields
    assert SERVICE_DEFAULTS.max_values == fields["max_elements"].default
    assert SERVICE_DEFAULTS.max_work == fields["max_work"].default
    # The memory budget of a service where no container limit is set.
    monkeypatch.setattr(settings_module, "memory_limit", lambda: None)
    monkeypatch.delenv("POSENC_MEMORY_BYTES", raising=False)
    assert SERVICE_DEFAULTS.max_bytes == Settings().memory_bytes

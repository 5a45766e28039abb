"""The architecture table held to the llama.cpp source it was read from (the sdist's
``vendor/llama.cpp``): a row's rope type is ``llama_model_rope_type``'s, its factor tensors are
the ones its ``load_tensors`` creates, its sliding layers, NoPE steps and YaRN keys are in its
``load_arch_hparams``. A llama.cpp update that moves any of them fails here, naming the row."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from posenc.schemes.rope.gguf.arches import ARCHES, LLAMA_CPP_VERSION, Arch
from tests.gguf.sdist import unpacked

pytestmark = pytest.mark.llama_cpp


@pytest.fixture(scope="module")
def src() -> Path:
    return unpacked("vendor/llama.cpp/src")


def _names(src: Path) -> dict[str, str]:
    """``LLM_ARCH_X`` → the name a GGUF's general.architecture holds."""
    text = (src / "llama-arch.cpp").read_text()
    return {name: enum for enum, name in re.findall(r'\{ LLM_ARCH_(\w+),\s*"([^"]+)"\s*\}', text)}


def _rope_types(src: Path) -> dict[str, str]:
    """``llama_model_rope_type``'s answer per ``LLM_ARCH_X``: norm, neox, mrope, imrope, none,
    or "depends" where it reads the file (GLM-4's sections)."""
    text = (src / "llama-model.cpp").read_text()
    body = text[text.index("llama_rope_type llama_model_rope_type") :]
    body = body[: body.index("\n}\n")]
    types: dict[str, str] = {}
    pending: list[str] = []
    for line in body.splitlines():
        case = re.match(r"\s*case LLM_ARCH_(\w+):", line)
        if case:
            pending.append(case.group(1))
        elif "return" in line and pending:
            plain = re.search(r"return LLAMA_ROPE_TYPE_(\w+);", line)
            for enum in pending:
                types[enum] = plain.group(1).lower() if plain else "depends"
            pending = []
    return types


def test_the_sources_version_is_the_tables() -> None:
    changelog = unpacked("CHANGELOG.md").read_text()
    release = changelog[changelog.index("## [0.3.36]") :]
    release = release[: release.index("\n## ", 1)]
    assert f"llama.cpp@{LLAMA_CPP_VERSION[:9]}" in release


@pytest.mark.parametrize("row", ARCHES.values(), ids=lambda row: row.name)
def test_each_row_is_what_its_source_says(src: Path, row: Arch) -> None:
    enum = _names(src).get(row.name)
    assert enum is not None, f"llama.cpp names no architecture {row.name!r}"
    expected = _rope_types(src)[enum]
    assert expected in (row.rope_type, "depends"), f"{row.name}: llama.cpp says {expected}"
    text = (src / row.source).read_text()
    creates = {
        "freqs": "LLM_TENSOR_ROPE_FREQS" in text,
        "long_short": "LLM_TENSOR_ROPE_FACTORS_LONG" in text,
    }
    wanted = {
        "none": (False, False),
        "freqs": (True, False),
        "long_short": (False, True),
        "by_scaling": (True, True),
    }[row.factors]
    assert (creates["freqs"], creates["long_short"]) == wanted, row.name
    assert ("load_swa_pattern" in text) == (row.swa is not None), row.name
    assert ("n_no_rope_layer_step" in text) == (row.nope_step > 0), row.name
    assert ("LLM_KV_ATTENTION_RECURRENT_LAYERS" in text) == row.recurrent, row.name
    reads_yarn = "LLM_KV_ROPE_SCALING_YARN" in text
    assert reads_yarn == (row.yarn_keys or row.deepseek_log_mul), row.name
    assert ("LLM_KV_ROPE_DIMENSION_SECTIONS" in text) == (row.sections != "none") or (
        row.name == "ernie4_5"  # reads them for PaddleOCR, stays NORM
    ), row.name


def test_the_architectures_with_a_rope_and_no_row_are_known(src: Path) -> None:
    names = {enum: name for name, enum in _names(src).items()}
    roped = {names[e] for e, kind in _rope_types(src).items() if kind != "none" and e in names}
    unread = sorted(roped - set(ARCHES))
    assert set(ARCHES) <= roped, set(ARCHES) - roped
    # The others are refused by name until their rows are read: printed, so a new one is seen.
    print(f"{len(roped & set(ARCHES))} of {len(roped)} roped architectures have rows; none: "
          f"{', '.join(unread)}")  # fmt: skip

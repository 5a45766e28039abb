"""The command line as a CI step runs it: the installed ``posenc`` script in a subprocess, on the
faulty caches the suite builds (:mod:`tests.faulty_tables`), written to files."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from tests import faulty_tables as faulty
from tests.hub_configs import llama_31_rope_scaling

# The script `pip install` put beside this interpreter: the entry point itself is under test.
POSENC = str(Path(sys.executable).with_name("posenc"))


@dataclass(frozen=True)
class Ran:
    code: int
    stdout: str
    stderr: str


def posenc(*args: str | Path, cwd: Path | None = None) -> Ran:
    done = subprocess.run(
        [POSENC, *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=300
    )
    return Ran(done.returncode, done.stdout, done.stderr)


@dataclass(frozen=True)
class Fault:
    build: Callable[[], npt.NDArray[np.floating]]
    args: tuple[str, ...]  # beyond --d-model, which is the table's width
    findings: list[str]
    conforms: bool = False


FAULTS: dict[str, Fault] = {
    "float32-angles": Fault(lambda: faulty.float32_angles(64, 1024), (), ["angle_precision"]),
    "bfloat16-frequencies": Fault(
        lambda: faulty.bfloat16_inverse_frequencies(64, 256), (), ["angle_precision"]
    ),
    "bfloat16-positions": Fault(
        lambda: faulty.bfloat16_positions(32, 600), (), ["collapsed_positions"]
    ),
    "split-as-interleaved": Fault(
        lambda: faulty.correct(64, 64, layout="split"), (), ["layout_mismatch"]
    ),
    "sin-cos-swapped": Fault(lambda: faulty.sin_cos_swapped(64, 64), (), ["layout_mismatch"]),
    "base-500000-as-10000": Fault(
        lambda: faulty.correct(64, 64, base=500000.0), (), ["base_mismatch"]
    ),
    "float32-angles-at-a-million": Fault(
        lambda: faulty.float32_angles(32, 64, 10**6), ("--offset", "1000000"), ["angle_precision"]
    ),
    "correct-float32": Fault(lambda: faulty.correct(64, 128), (), ["value_rounding"], True),
    "correct-float16-odd": Fault(
        lambda: faulty.correct(63, 128, "float16"), (), ["value_rounding"], True
    ),
}


@pytest.fixture(scope="session")
def caches(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every fault's cache as ``<name>.npy`` in one directory."""
    folder = tmp_path_factory.mktemp("caches")
    for name, fault in FAULTS.items():
        np.save(folder / f"{name}.npy", fault.build())
    return folder


def check_args(caches: Path, name: str) -> list[str]:
    """``check sinusoidal <cache> --d-model <its width> …`` for the fault called ``name``."""
    path = caches / f"{name}.npy"
    width = np.load(path, mmap_mode="r").shape[1]
    return ["check", "sinusoidal", str(path), "--d-model", str(width), *FAULTS[name].args]


LLAMA3 = {
    "model_type": "llama",
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "max_position_embeddings": 2048,
    "rope_theta": 500000.0,
    "rope_scaling": llama_31_rope_scaling(),
}


@pytest.fixture
def llama3(tmp_path: Path) -> Path:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(LLAMA3))
    return path

"""llama.cpp's own converter (``convert_hf_to_gguf.py`` of the llama-cpp-python 0.3.36 sdist,
llama.cpp 0c1e57098) on tiny random transformers models, for the tests that hold the service's
reading of a GGUF to the file the real converter writes.

The converter comes out of the sdist through :func:`.sdist.unpacked`. It runs in a subprocess
with its own ``gguf-py`` first on the path (``python -m tests.gguf.convert MODEL_DIR OUT``),
since the ``gguf`` the suite imports is PyPI's and may be older.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import subprocess
import sys
from pathlib import Path

from tests.gguf.sdist import unpacked


def convert(pairs: list[tuple[Path, Path]]) -> None:
    """Each ``(model_dir, out)``: a saved transformers model written as the GGUF llama.cpp's
    converter writes (its vision projector, with ``--mmproj``, where ``out`` ends in
    ``.mmproj.gguf``), all in one subprocess (it imports torch and transformers once)."""
    root = unpacked("vendor/llama.cpp")
    here = Path(__file__).resolve().parents[2]
    path = os.pathsep.join([str(root / "gguf-py"), str(root), str(here)])
    arguments = [str(p) for pair in pairs for p in pair]
    done = subprocess.run(
        [sys.executable, "-m", "tests.gguf.convert", *arguments],
        env={**os.environ, "PYTHONPATH": path},
        capture_output=True,
        text=True,
    )
    if done.returncode:
        raise RuntimeError(f"the converter failed:\n{done.stderr[-4000:]}")


def _no_vocabulary(self: object) -> None:
    # A tiny random model has no tokenizer: the converter writes none, and the size llama.cpp
    # checks token_embd against.
    writer = self.gguf_writer  # type: ignore[attr-defined]
    writer.add_tokenizer_model("none")
    writer.add_vocab_size(self.hparams["vocab_size"])  # type: ignore[attr-defined]


def _main(pairs: list[str]) -> None:
    import conversion  # the converter's own package, on PYTHONPATH

    for module in pkgutil.iter_modules(conversion.__path__):
        importlib.import_module(f"conversion.{module.name}")
    pending = [conversion.ModelBase]
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        if "set_vocab" in vars(cls) or cls is conversion.ModelBase:
            cls.set_vocab = _no_vocabulary
    converter = importlib.import_module("convert_hf_to_gguf")
    for model_dir, out in zip(pairs[::2], pairs[1::2], strict=True):
        sys.argv = ["convert_hf_to_gguf.py", model_dir, "--outfile", out, "--outtype", "f32"]
        if out.endswith(".mmproj.gguf"):  # the vision projector, not the text model
            sys.argv.append("--mmproj")
        converter.main()


if __name__ == "__main__":
    _main(sys.argv[1:])

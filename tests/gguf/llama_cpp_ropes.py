"""Every rope node llama.cpp itself builds for a GGUF file, read through its eval callback: the
arguments it hands ``ggml_rope_ext`` (``op_params``) and its factor tensor (``src[2]``).

llama.cpp is the ``vendor/llama.cpp`` of the same llama-cpp-python 0.3.36 sdist the suite reads
(through :func:`.sdist.archive`, the one door), built once as a wheel under ``$POSENC_CACHE``
(``nice``; 10 min on 2 shared cores) and installed beside it, never into the suite's
environment.
Nothing in the suite builds it: the tests read records written with it
(``tests/gguf/records``). Stable interface, for any GGUF::

    from tests.gguf.llama_cpp_ropes import record
    nodes = record([Path("a.gguf")], n_ctx=4096)   # one list of RopeNode dicts per file

    python -m tests.gguf.llama_cpp_ropes [--n-ctx N] FILE.gguf ...   # the same, as JSON

Each file is loaded on the CPU with ``n_ctx`` (default the file's own context), and one token
is decoded at position 0; every ``GGML_OP_ROPE`` node of that graph is a :class:`RopeNode`, in
graph order, named as llama.cpp names it (``Qcur-0``, ``Kcur-0`` …, ``k_pe-0`` for MLA). An
architecture whose graph needs more than token ids (a vision tower) is out of its reach.
"""

from __future__ import annotations

import argparse
import ctypes
import importlib
import importlib.util
import json
import os
import struct
import subprocess
import sys
import types
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypedDict

from tests.gguf.sdist import NAME, VERSION, archive, cache

# The llama.cpp of the sdist (its vendor/llama.cpp commit), as records name it.
LLAMA_CPP = "0c1e57098"
# ggml.h's GGML_OP_ROPE in the bundled ggml; checked against ggml_op_name when llama.cpp loads.
GGML_OP_ROPE = 48


class RopeNode(TypedDict):
    """One ``ggml_rope_ext``/``ggml_rope_multi`` node as llama.cpp built it: ``op_params``
    decoded (int32 ``n_dims`` [1], ``mode`` [2], ``n_ctx_orig`` [4]; float32 ``freq_base`` [5]
    … ``beta_slow`` [10]; int32 ``sections`` [11..14]) and ``factors``, the float32 values of
    ``src[2]`` (or None)."""

    name: str
    n_dims: int
    mode: int
    n_ctx_orig: int
    freq_base: float
    freq_scale: float
    ext_factor: float
    attn_factor: float
    beta_fast: float
    beta_slow: float
    sections: list[int]
    factors: list[float] | None


def built() -> Path:
    """The folder holding llama-cpp-python 0.3.36 built from the sdist (its ``llama_cpp``
    package and ``libllama``), built and installed there on first use."""
    target = cache() / f"{NAME}.built"
    done = target / ".done"
    if done.exists():
        return target
    wheels = cache() / "wheels"
    env = {**os.environ, "CMAKE_BUILD_PARALLEL_LEVEL": str(os.cpu_count() or 1)}
    pip = ["nice", sys.executable, "-m", "pip", "--disable-pip-version-check"]
    subprocess.run(
        [*pip, "wheel", "--no-deps", "--wheel-dir", str(wheels), str(archive())],
        check=True,
        env=env,
    )
    (wheel,) = wheels.glob(f"llama_cpp_python-{VERSION}-*.whl")
    subprocess.run(
        [*pip, "install", "--no-deps", "--upgrade", "--target", str(target), str(wheel)],
        check=True,
    )
    done.touch()
    return target


def record(paths: Sequence[Path], n_ctx: int | None = None) -> list[list[RopeNode]]:
    """Every rope node llama.cpp builds for each GGUF file of ``paths``, loaded with ``n_ctx``
    (None: the file's own context), decoding one token: one list per file, in graph order.

    Runs llama.cpp in a subprocess with the built llama-cpp-python first on its path."""
    here = Path(__file__).resolve().parents[2]
    command = [sys.executable, "-m", "tests.gguf.llama_cpp_ropes", "--inside"]
    command += ["--n-ctx", str(n_ctx or 0), *(str(Path(p).resolve()) for p in paths)]
    path = os.pathsep.join([str(built()), str(here)])
    done = subprocess.run(
        command, env={**os.environ, "PYTHONPATH": path}, capture_output=True, text=True
    )
    if done.returncode:
        raise RuntimeError(f"llama.cpp failed:\n{done.stderr[-4000:]}")
    nodes: list[list[RopeNode]] = json.loads(done.stdout)
    return nodes


class _Tensor(ctypes.Structure):
    # struct ggml_tensor (ggml/include/ggml.h): GGML_MAX_DIMS 4, GGML_MAX_OP_PARAMS 64 bytes,
    # GGML_MAX_SRC 10, GGML_MAX_NAME 64.
    _fields_ = [
        ("type", ctypes.c_int),
        ("buffer", ctypes.c_void_p),
        ("ne", ctypes.c_int64 * 4),
        ("nb", ctypes.c_size_t * 4),
        ("op", ctypes.c_int),
        ("op_params", ctypes.c_int32 * 16),
        ("flags", ctypes.c_int32),
        ("src", ctypes.c_void_p * 10),
        ("view_src", ctypes.c_void_p),
        ("view_offs", ctypes.c_size_t),
        ("data", ctypes.c_void_p),
        ("name", ctypes.c_char * 64),
        ("extra", ctypes.c_void_p),
        ("padding", ctypes.c_char * 8),
    ]


def _node(tensor: _Tensor, base: ctypes.CDLL) -> RopeNode:
    params = bytes(tensor.op_params)
    ints, floats = struct.unpack("<16i", params), struct.unpack("<16f", params)
    factors = None
    if tensor.src[2]:
        source = _Tensor.from_address(tensor.src[2])
        if source.type != 0:  # GGML_TYPE_F32, as every converter writes them
            raise ValueError(f"{tensor.name!r}'s factor tensor is of ggml type {source.type}")
        values = (ctypes.c_float * source.ne[0])()
        base.ggml_backend_tensor_get(ctypes.c_void_p(tensor.src[2]), values, 0, 4 * source.ne[0])
        factors = [float(v) for v in values]
    return RopeNode(
        name=tensor.name.decode(),
        n_dims=ints[1],
        mode=ints[2],
        n_ctx_orig=ints[4],
        freq_base=floats[5],
        freq_scale=floats[6],
        ext_factor=floats[7],
        attn_factor=floats[8],
        beta_fast=floats[9],
        beta_slow=floats[10],
        sections=list(ints[11:15]),
        factors=factors,
    )


def _bindings() -> Any:
    """llama-cpp-python's ctypes bindings (``llama_cpp.llama_cpp``) from the built folder first on
    the path, without its package's ``__init__``, which imports the high-level API and its
    dependencies (diskcache, jinja2 …) that the bindings do not need."""
    spec = importlib.util.find_spec("llama_cpp")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("llama-cpp-python is not on the path")
    package = types.ModuleType("llama_cpp")
    package.__path__ = list(spec.submodule_search_locations)
    sys.modules["llama_cpp"] = package
    return importlib.import_module("llama_cpp.llama_cpp")


def _inside(paths: list[str], n_ctx: int) -> list[list[RopeNode]]:
    """In the subprocess: each file loaded by llama.cpp, one token decoded, its ropes read."""
    llama_cpp = _bindings()
    lib = Path(llama_cpp.__file__).parent / "lib"
    base = ctypes.CDLL(str(lib / "libggml-base.so"))
    base.ggml_op_name.restype = ctypes.c_char_p
    base.ggml_backend_tensor_get.argtypes = [ctypes.c_void_p] * 2 + [ctypes.c_size_t] * 2
    if base.ggml_op_name(GGML_OP_ROPE) != b"ROPE":
        raise RuntimeError(f"op {GGML_OP_ROPE} is {base.ggml_op_name(GGML_OP_ROPE)!r}, not ROPE")
    llama_cpp.llama_backend_init()
    found: list[RopeNode] = []

    def seen(pointer: int, ask: bool, _: object) -> bool:
        tensor = _Tensor.from_address(pointer)
        if tensor.op != GGML_OP_ROPE:
            return not ask
        if not ask:
            found.append(_node(tensor, base))
        return True

    callback = llama_cpp.ggml_backend_sched_eval_callback(seen)
    out = []
    for path in paths:
        found.clear()
        model = llama_cpp.llama_model_load_from_file(
            path.encode(), llama_cpp.llama_model_default_params()
        )
        if not model:
            raise RuntimeError(f"llama.cpp refused {path}")
        params = llama_cpp.llama_context_default_params()
        params.n_ctx, params.n_threads, params.n_threads_batch = n_ctx, 1, 1
        params.cb_eval = callback
        context = llama_cpp.llama_init_from_model(model, params)
        batch = llama_cpp.llama_batch_init(1, 0, 1)
        batch.n_tokens = 1
        batch.token[0], batch.pos[0], batch.n_seq_id[0], batch.logits[0] = 0, 0, 1, True
        batch.seq_id[0][0] = 0
        if llama_cpp.llama_decode(context, batch) != 0:
            raise RuntimeError(f"llama.cpp could not decode a token of {path}")
        llama_cpp.llama_batch_free(batch)
        llama_cpp.llama_free(context)
        llama_cpp.llama_model_free(model)
        out.append(list(found))
    return out


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m tests.gguf.llama_cpp_ropes",
        description="Print, as JSON, every rope node llama.cpp builds for each GGUF file: "
        "a list of RopeNode objects per file.",
    )
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--n-ctx", type=int, default=0, help="the context (0: the file's)")
    parser.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    given = parser.parse_args(argv)
    if given.inside:
        nodes = _inside([str(f) for f in given.files], given.n_ctx)
    else:
        nodes = record(given.files, given.n_ctx or None)
    json.dump(nodes, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()

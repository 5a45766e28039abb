"""Fused multiply-add in float32 for the compiled loops of the runtimes' recipes.

MLX writes ``fma`` in its polynomials, and ggml-cpu built for a processor with FMA lets the
compiler contract ``a·b + c`` (GCC's default ``-ffp-contract=fast``): both round ``a·b + c``
once. numba compiles without contraction, so the loops that repeat those runtimes call this
instead: LLVM's ``llvm.fma.f32``, the processor's instruction or libm's ``fmaf``, exact either
way.
"""

from __future__ import annotations

from typing import Any

from llvmlite import ir
from numba import types
from numba.extending import intrinsic


def _fma32(typingctx: Any, a: Any, b: Any, c: Any) -> Any:
    """``fl32(a·b + c)``, rounded once; callable from numba-compiled code only."""
    signature = types.float32(types.float32, types.float32, types.float32)

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        single = ir.FloatType()
        function = builder.module.declare_intrinsic(
            "llvm.fma", [single], ir.FunctionType(single, [single, single, single])
        )
        return builder.call(function, args)

    return signature, codegen


# Typed as Any: numba's intrinsic wrapper takes the typing context its own signature names.
fma32: Any = intrinsic(_fma32)

"""Which rope a kernel applied, read from what went into it and what came out
(``POST /v1/rope/applied``): for runtimes that never show a cos/sin cache — fused kernels of
vLLM, SGLang, FlashInfer, TensorRT-LLM, candle, a hand-written CUDA or Metal kernel — and for
the faults a right cache cannot catch.

- :mod:`.reader`: the parts' arrays, bounded (``.npy`` headers or part headers, bfloat16);
- :mod:`.expected`: the rope expected, from the query or a layer of the model's config;
- :mod:`.measure` with :mod:`.loops`: every sample of every pair as an angle and a length ratio,
  each held to the resolution of its dtypes;
- :mod:`.structure`: the pairing that keeps lengths, the dimensions that moved;
- :mod:`.angles`: each recipe's rotations (exact, framework, ggml, mlx) held to the cells;
- :mod:`.cache`: the recovered cos/sin as a cache, read and fitted by the cache conformance;
- :mod:`.faults`: the faults that explain what no recipe does;
- :mod:`.answer`, :mod:`.report`, :mod:`.schemas`, :mod:`.operation`: the operation.
"""

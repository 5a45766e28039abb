"""One package per scheme, each declaring itself once in its ``__init__``.

A scheme's package holds its parameters, maths, cost, verify checks, conformance and float32
recipes in modules named for what they hold; :mod:`posenc.registry` lists the declarations.
Schemes import :mod:`posenc.numerics` and the report types beside it, never the reverse.
"""

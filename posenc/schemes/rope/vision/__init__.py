"""The 2-D rope of vision towers (Qwen2-VL and its kin, Kimi K2.5, Pixtral, Llama 4): the
cos/sin each patch of a grid is turned by, in the order the tower's attention sees the patches.

- :mod:`.families`: which towers have one and how it turns, as data;
- :mod:`.config`: a config.json → the family, head width, θ and what orders the patches;
- :mod:`.positions`: a ``[t, h, w]`` grid → each patch's (row, column), in the tower's order;
- :mod:`.tables`: those ids → the cos/sin or angles, exact or framework;
- :mod:`.answer`, :mod:`.schemas`: ``POST /v1/rope/vision``.
"""

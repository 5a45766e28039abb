"""Multimodal rope (M-RoPE): the three position ids (temporal, height, width) a vision-language
model gives each token, from its config and the layout of its sequence.

- :mod:`.families`: how each model type places its tokens, as data;
- :mod:`.config`: a config.json → the family, its sections and its vision merge sizes;
- :mod:`.layout`: segments → runs of tokens, counted before anything is allocated;
- :mod:`.positions`: runs → the ids, as ``get_rope_index`` computes them;
- :mod:`.tables`: the cos/sin the model applies for those ids;
- :mod:`.diagnose`: a client's ids, held to the model's and its faults named;
- :mod:`.answer`: ``POST /v1/rope/positions`` and ``…/positions/verify``;
  :mod:`.schemas`, their bodies and answers.
"""

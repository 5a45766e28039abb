"""A model's ``config.json`` → the rope of every layer, as transformers reads it: the reader
(:mod:`.config`), what each family does differently (:mod:`.families`, as rows), one rope dict's
parameters (:mod:`.params`), the layers and their types (:mod:`.layers`), what
``POST /v1/rope/config`` answers (:mod:`.answer`, :mod:`.urls`), and a runtime's ropes held to
the model's, layer by layer (:mod:`.verdict`)."""

"""What an ONNX Runtime GenAI model applies: a bounded reader of its graph (:mod:`.reader` over
:mod:`.wire`), the operators that take a rope cache as one table (:mod:`.rules`), the rows the
cache holds and the rope they fit (:mod:`.rows`, :mod:`.fit`), the answer, and the verdict
against the model's config.json (:mod:`.conformance`)."""

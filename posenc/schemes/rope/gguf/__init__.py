"""What llama.cpp applies for a GGUF file: a bounded reader of its header (:mod:`.reader`) and
llama.cpp's per-architecture rules as one table (:mod:`.arches`)."""

"""The arithmetic schemes share, importing none of them.

Exact angle reduction (:mod:`.exact`, with :mod:`.doubledouble`), tables by rotation from exact
anchors (:mod:`.rotation`) and their compiled loops (:mod:`.kernels`), torch's float32 operations
for the ``framework`` recipes (:mod:`.float32`), and the cost units (:mod:`.costs`).
"""

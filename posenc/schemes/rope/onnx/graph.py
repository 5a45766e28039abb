"""Where each rope cache a node reads comes from, and when: the graph's uses of the caches.

A node of :data:`.rules.ROPE_OPS` names its ``cos_cache`` and ``sin_cache`` inputs; each name is
followed back through ``Cast`` and ``Identity`` to an initializer or a ``Constant``, and through
an ``If`` into both branches (at any depth), each branch then one alternative chosen by the
``If``'s condition. A concatenated cache (DirectML's: the position ids offset by the short
cache's length once they pass it; WebGPU's and TensorRT-RTX's: the offset in
``genai_config.json``) is two alternatives too, each a range of the tensor's rows. A condition
is read back to the sequence length where the builder's own patterns compute it
(``attention_mask.shape[1]``, ``max(position_ids)``), so each alternative says which lengths it
serves.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from posenc.cancel import checkpoint
from posenc.schemes.rope.onnx import rules
from posenc.schemes.rope.onnx.reader import Graph, Model, Node, Tensor, values
from posenc.schemes.rope.onnx.wire import GraphTooLargeError, ONNXError

# Distinct caches (pairs, alternatives, attributes) one request measures at most: a real model
# reads one to four.
MAX_ROPES = 64
# Nodes' readings of a cache (one per alternative each) at most: 4096 layers of two rotating
# nodes, each reading one of four (LongRoPE's two behind an If, each concatenated).
MAX_USES = 1 << 15
# Layers read at most (numbers 0 … 4095), as the GGUF check reads them.
MAX_LAYERS = 4096
# Nodes followed back from one name at most (a cycle in a hostile graph ends here).
_MOST_STEPS = 64
_COMPARISONS = ("Greater", "GreaterOrEqual", "Less", "LessOrEqual")
# What a comparison's operand may be, read as the sequence length L: the builder compares
# attention_mask's second dimension (L) or the largest position id (L − 1). Data, not branches.
_LENGTHS = {"attention_mask.shape[1]": 0, "max(position_ids)": -1}


@dataclass(frozen=True)
class Cache:
    """A stored cos or sin table, and the rows ``[first, end)`` of it one alternative reads."""

    tensor: Tensor
    source: str  # "initializer" or "constant"
    through: tuple[str, ...]
    rows: tuple[int, int]


@dataclass(frozen=True)
class Choice:
    """What picks an alternative: the node (an ``If``, the ``Add`` that offsets the position
    ids) or the genai_config key, which side of its test this alternative is, and the test."""

    by: str
    node: str
    holds: bool
    test: str
    # The test holds for sequence lengths above this (None: not a test of the length).
    above: int | None


@dataclass(frozen=True)
class Use:
    """One node's reading of one cos/sin pair: the node, its operator's row, its layer."""

    node: Node
    op: rules.RopeOp
    layer: int | None
    cos: Cache
    sin: Cache
    choices: tuple[Choice, ...]


class _Scope:
    """A graph inside the scope around it (None: the model's graph), with the producer of each
    of the graph's names: built once a graph (its inner scopes are kept), however many names
    are looked up, so following a cache costs its own steps, not the graph's size again."""

    __slots__ = ("_inner", "graph", "made", "outer")

    def __init__(self, graph: Graph, outer: _Scope | None) -> None:
        self.graph = graph
        self.outer = outer
        self.made = {out: node for node in graph.nodes for out in node.outputs}
        self._inner: dict[int, _Scope] = {}

    def inner(self, graph: Graph) -> _Scope:
        # By identity: a graph is a node's attribute, read once, alive while the model is.
        scope = self._inner.get(id(graph))
        if scope is None:
            scope = self._inner[id(graph)] = _Scope(graph, self)
        return scope

    def find(self, name: str) -> tuple[Tensor | Node | None, _Scope]:
        """What makes ``name``, innermost graph first, and the scope it is in."""
        scope: _Scope | None = self
        while scope is not None:
            if name in scope.made:
                return scope.made[name], scope
            if name in scope.graph.initializers:
                return scope.graph.initializers[name], scope
            scope = scope.outer
        return None, self


def uses(model: Model, concat_offset: tuple[str, int] | None) -> tuple[list[Use], list[Node]]:
    """Every node's use of a cos/sin pair (one per alternative), and the attention nodes;
    ``concat_offset`` is genai_config.json's (:func:`.genai.read`)."""
    found: list[Use] = []
    distinct: set[tuple[Cache, Cache, tuple[Choice, ...]]] = set()
    attention: list[Node] = []
    offset = _config_offset(concat_offset)
    trace = _Trace(model)
    for node, scope in _nodes(_Scope(model.graph, None)):
        key = (node.domain, node.op_type)
        if key in rules.ATTENTION_OPS:
            layer_of(node.name)
            attention.append(node)
        op = rules.ROPE_OP_OF.get(key)
        if op is None or (op.enabled_by is not None and node.ints.get(op.enabled_by, 0) != 1):
            continue
        if max(op.cos, op.sin) >= len(node.inputs) or not node.inputs[op.cos]:
            raise ONNXError(f"node {node.name!r} ({op.name}) turns q and k but names no cache")
        layer = layer_of(node.name)
        pairs = trace.pairs(node.inputs[op.cos], node.inputs[op.sin], scope)
        shifted = _offset_positions(model, node, op, scope)
        for cos, sin, choices in pairs:
            split = shifted if shifted is not None else offset
            for cos_rows, sin_rows, choice in _split(cos, sin, split):
                use = Use(node, op, layer, cos_rows, sin_rows, (*choices, *choice))
                found.append(use)
                distinct.add((use.cos, use.sin, use.choices))
        _bounded(found, distinct)
    return found, attention


def _bounded(found: list[Use], distinct: set[Any]) -> None:
    """Refuses the walk as it passes what one request measures, not once all is listed."""
    if len(distinct) > MAX_ROPES:
        raise GraphTooLargeError(f"the graph reads more than {MAX_ROPES} distinct rope caches")
    if len(found) > MAX_USES:
        raise GraphTooLargeError(
            f"the graph's nodes read a rope cache more than {MAX_USES} times (a node's "
            "reading of each alternative an If or an offset picks)"
        )


def _nodes(scope: _Scope) -> Iterator[tuple[Node, _Scope]]:
    for node in scope.graph.nodes:
        checkpoint()
        yield node, scope
        for graph in node.graphs.values():
            yield from _nodes(scope.inner(graph))


def layer_of(name: str) -> int | None:
    """The layer a node's name gives (the builder's ``/model/layers.{i}/…``), if it gives one:
    past the last that is read, refused before anything is sized by it."""
    found = rules.LAYER.search(name)
    if found is None:
        return None
    layer = int(found.group(1))
    if layer >= MAX_LAYERS:
        raise ONNXError(
            f"node {name[:200]!r} names layer {layer}: layers 0 to {MAX_LAYERS - 1} are read"
        )
    return layer


# A name followed back: each alternative's cache and the choices that pick it.
_Followed = list[tuple[Cache, tuple[Choice, ...]]]
_Pairs = list[tuple[Cache, Cache, tuple[Choice, ...]]]


class _Trace:
    """Names followed back to their caches, each name of each scope once: a graph's nodes read
    the same pair, and Ifs whose branches name the next If's outputs share their inner ones."""

    def __init__(self, model: Model) -> None:
        self.model = model
        self.followed: dict[tuple[str, _Scope], _Followed] = {}
        self.paired: dict[tuple[str, str, _Scope], _Pairs] = {}

    def pairs(self, cos: str, sin: str, scope: _Scope) -> _Pairs:
        known = self.paired.get((cos, sin, scope))
        if known is not None:
            return known
        coses, sines = self.follow(cos, scope, 0), self.follow(sin, scope, 0)
        by_choice = {choices: cache for cache, choices in sines}
        pairs = []
        for cache, choices in coses:
            if choices not in by_choice:
                raise ONNXError(f"{cos!r} and {sin!r} are not chosen by the same conditions")
            pairs.append((cache, by_choice[choices], choices))
        self.paired[(cos, sin, scope)] = pairs
        return pairs

    def follow(self, name: str, scope: _Scope, steps: int) -> _Followed:
        """``name``'s alternatives, each cache's ``through`` the nodes from ``name`` on."""
        known = self.followed.get((name, scope))
        if known is None:
            known = self.followed[(name, scope)] = self._follow(name, scope, steps)
        return known

    def _follow(self, name: str, scope: _Scope, steps: int) -> _Followed:
        checkpoint()
        # A cycle in a hostile graph is followed (never yet known) until this.
        if steps > _MOST_STEPS:
            raise ONNXError(f"{name!r} is followed back through more than {_MOST_STEPS} nodes")
        made, where = scope.find(name)
        if isinstance(made, Tensor):
            return [(Cache(made, "initializer", (), (0, _rows(made))), ())]
        if made is None:
            raise ONNXError(
                f"the rope cache {name!r} is neither an initializer nor a node's output"
            )
        if made.op_type == "Constant" and made.value is not None:
            value = made.value
            return [(Cache(value, "constant", (), (0, _rows(value))), ())]
        if made.op_type in ("Cast", "Identity") and made.inputs:
            return [
                (Cache(c.tensor, c.source, (made.name, *c.through), c.rows), choices)
                for c, choices in self.follow(made.inputs[0], where, steps + 1)
            ]
        if made.op_type == "If" and {"then_branch", "else_branch"} <= made.graphs.keys():
            return self._branches(name, made, where, steps)
        raise ONNXError(
            f"the rope cache {name!r} is computed by a {made.op_type} node ({made.name!r}): "
            "the reader follows initializers, Constant nodes, Cast, Identity and If"
        )

    def _branches(self, name: str, made: Node, where: _Scope, steps: int) -> _Followed:
        index = made.outputs.index(name)
        test, above = _test(self.model, made.inputs[0] if made.inputs else "", where)
        found = []
        for branch, holds in (("then_branch", True), ("else_branch", False)):
            graph = made.graphs[branch]
            if index >= len(graph.outputs):
                raise ONNXError(f"the {branch} of {made.name!r} has no output {index}")
            choice = Choice("If", made.name, holds, test, above)
            inner = self.follow(graph.outputs[index], where.inner(graph), steps + 1)
            found += [(cache, (choice, *choices)) for cache, choices in inner]
            # Branches that name the next If's outputs double the alternatives at each If:
            # refused as they pass what one request measures, not once all 2^n are listed.
            if len(found) > MAX_ROPES:
                raise GraphTooLargeError(
                    f"the rope cache {name!r} is one of more than {MAX_ROPES} alternatives "
                    f"(the branches of {made.name!r} and the Ifs inside them)"
                )
        return found


def _rows(tensor: Tensor) -> int:
    if len(tensor.dims) != 2 or tensor.dims[0] < 1 or tensor.dims[1] < 1:
        raise ONNXError(
            f"the rope cache {tensor.name!r} has shape {list(tensor.dims)}, not "
            "(cache length, rotary_dim/2)"
        )
    return tensor.dims[0]


def _test(model: Model, name: str, scope: _Scope) -> tuple[str, int | None]:
    """A condition as text, and the sequence length above which it holds (None: it is not a
    test of the sequence length the reader recognises)."""
    made, where = scope.find(name)
    if not isinstance(made, Node) or made.op_type not in _COMPARISONS or len(made.inputs) < 2:
        return _describe(model, name, scope, 0), None
    left = _describe(model, made.inputs[0], where, 0)
    threshold = _integer(model, made.inputs[1], where)
    shown = threshold if threshold is not None else _describe(model, made.inputs[1], where, 0)
    text = f"{left} {_SYMBOLS[made.op_type]} {shown}"
    if threshold is None or left not in _LENGTHS or made.op_type.startswith("Less"):
        return text, None
    # L + shift > t (Greater) or L + shift ≥ t (GreaterOrEqual): L above t − shift (− 1).
    above = threshold - _LENGTHS[left] - (made.op_type == "GreaterOrEqual")
    return text, above


_SYMBOLS = {"Greater": ">", "GreaterOrEqual": ">=", "Less": "<", "LessOrEqual": "<="}


def _describe(model: Model, name: str, scope: _Scope, depth: int) -> str:
    made, where = scope.find(name)
    if depth > 8 or made is None or isinstance(made, Tensor):
        return name
    inputs = made.inputs
    if made.op_type in ("Cast", "Identity") and inputs:
        return _describe(model, inputs[0], where, depth + 1)
    if made.op_type == "ReduceMax" and inputs:
        return f"max({_describe(model, inputs[0], where, depth + 1)})"
    if made.op_type == "Gather" and len(inputs) == 2:
        shape, _ = where.find(inputs[0])
        index = _integer(model, inputs[1], where)
        if isinstance(shape, Node) and shape.op_type == "Shape" and shape.inputs:
            return f"{_describe(model, shape.inputs[0], where, depth + 1)}.shape[{index}]"
    return f"{made.op_type}({', '.join(inputs)})"


def _integer(model: Model, name: str, scope: _Scope) -> int | None:
    """The value of a one-element integer initializer or Constant, else None."""
    made, _ = scope.find(name)
    tensor = made.value if isinstance(made, Node) and made.op_type == "Constant" else made
    if isinstance(made, Node) and made.op_type == "Constant" and "value_int" in made.ints:
        return made.ints["value_int"]
    if (
        not isinstance(tensor, Tensor)
        or tensor.size != 1
        or tensor.data_type not in rules.INT_TYPES
    ):
        return None
    if tensor.external is not None:
        return None
    return int(values(model, tensor, 0, 1)[0])


def _offset_positions(
    model: Model, node: Node, op: rules.RopeOp, scope: _Scope
) -> tuple[int, Choice] | None:
    """DirectML's concatenated cache: the node's position ids are ``position_ids + k·test``
    (``Add`` of a ``Mul`` of the cast test by ``k``): rows from k on serve the test's lengths."""
    if op.position_ids is None or op.position_ids >= len(node.inputs):
        return None
    add, where = scope.find(node.inputs[op.position_ids])
    if not isinstance(add, Node) or add.op_type != "Add" or len(add.inputs) != 2:
        return None
    for term in add.inputs:
        mul, inner = where.find(term)
        if not isinstance(mul, Node) or mul.op_type != "Mul" or len(mul.inputs) != 2:
            continue
        k = next((_integer(model, x, inner) for x in mul.inputs if _integer(model, x, inner)), None)
        flag = next((x for x in mul.inputs if _integer(model, x, inner) is None), None)
        if k is None or flag is None:
            continue
        cast, _ = inner.find(flag)
        tested = cast.inputs[0] if isinstance(cast, Node) and cast.op_type == "Cast" else flag
        test, above = _test(model, tested, inner)
        return k, Choice("position_offset", add.name, True, test, above)
    return None


def _config_offset(concat_offset: tuple[str, int] | None) -> tuple[int, Choice] | None:
    """WebGPU's and TensorRT-RTX's concatenated cache: the row its long part starts at, in
    genai_config.json's provider options (the runtime takes it for lengths above it)."""
    if concat_offset is None:
        return None
    key, offset = concat_offset
    return offset, Choice("genai_config", key, True, f"L > {offset}", offset)


def _split(
    cos: Cache, sin: Cache, offset: tuple[int, Choice] | None
) -> Iterator[tuple[Cache, Cache, tuple[Choice, ...]]]:
    """One pair as read, or a concatenated pair's two parts: rows before the offset for the
    lengths the test refuses, rows from it for those it takes."""
    if offset is None:
        yield cos, sin, ()
        return
    k, choice = offset
    first, end = cos.rows
    if not 0 < k < end - first:
        raise ONNXError(
            f"the cache {cos.tensor.name!r} of {end - first} rows is read from row "
            f"{k} on: not a concatenated cache"
        )
    refused = Choice(choice.by, choice.node, False, choice.test, choice.above)
    for (lo, hi), side in (((first, first + k), refused), ((first + k, end), choice)):
        yield (
            Cache(cos.tensor, cos.source, cos.through, (lo, hi)),
            Cache(sin.tensor, sin.source, sin.through, (lo, hi)),
            (side,),
        )

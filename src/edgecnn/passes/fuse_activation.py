"""Fuse a layer with the activation that alone reads its output, so the activation is applied while
the output is still in cache (seed 004: conv + bias + ReLU as one step); for a pool, as it writes
each pooled value, instead of a second pass over the tensor.

Both sides come from the op definitions: a layer is an op that names the op it becomes with an
activation (``with_activation``: Conv -> FusedConv, Gemm -> FusedGemm, MaxPool -> FusedMaxPool...),
an activation an op that declares a ``FusableActivation`` (Relu, LeakyRelu, Clip with constant
bounds, Sigmoid, HardSwish...), or a gated one written as Mul(x, act(x)) (SiLU: Mul(x, Sigmoid(x))).
The fused node writes the activation's output. Exact for pools too: the activation still follows
the pooling (Caffe's CIFAR-10 nets: conv1, pool1, relu1).
"""

from __future__ import annotations

from dataclasses import fields

from edgecnn.ir.graph import Graph, Node
from edgecnn.ops.fused import FusedActivation
from edgecnn.ops.registry import FusableActivation, find_op, get_op
from edgecnn.passes.base import PassResult

_ACTIVATION_FIELDS = frozenset(f.name for f in fields(FusedActivation))


def _fusable(node: Node, gated: bool) -> FusableActivation | None:
    """The (gated or plain) fusable activation ``node``'s op declares, if any."""
    definition = find_op(node.op)
    if definition is None:
        return None
    return next((a for a in definition.activations if a.gated == gated), None)


def _read(fusable: FusableActivation, graph: Graph, node: Node) -> FusedActivation | None:
    params = fusable.read(node.attrs, node.inputs, graph.initializers)
    return None if params is None else FusedActivation(fusable.name, **params)


def single_activation(graph: Graph, node: Node, x: str) -> FusedActivation | None:
    """The activation ``node`` applies to ``x``, if it is one a fused step can apply."""
    if node.inputs[:1] != [x] or len(node.outputs) != 1:
        return None
    fusable = _fusable(node, gated=False)
    return None if fusable is None else _read(fusable, graph, node)


def gated_pattern(
    graph: Graph, readers: list[Node], consumers: dict[str, list[Node]], x: str
) -> tuple[list[Node], FusedActivation | None]:
    """[gate, Mul] and the activation, when ``readers`` of ``x`` are exactly gate(x) and
    Mul(x, gate(x)) for an op that declares a gated activation (SiLU: Sigmoid)."""
    if len(readers) != 2:
        return [], None
    for gate in readers:
        fusable = _fusable(gate, gated=True)
        if fusable is None or gate.inputs[:1] != [x] or len(gate.outputs) != 1:
            continue
        out = gate.outputs[0]
        mul = next(n for n in readers if n is not gate)
        if mul.op != "Mul" or sorted(mul.inputs) != sorted([x, out]) or len(mul.outputs) != 1:
            continue
        if consumers.get(out) != [mul] or out in graph.outputs:
            continue
        activation = _read(fusable, graph, gate)
        if activation is not None:
            return [gate, mul], activation
    return [], None


def activation_reading(
    graph: Graph, x: str, consumers: dict[str, list[Node]]
) -> tuple[list[Node], FusedActivation | None]:
    """The nodes that, as ``x``'s only readers, apply one fusible activation to it, and which one."""
    if x in graph.outputs:
        return [], None
    readers = consumers.get(x, [])
    if len(readers) == 1:
        return [readers[0]], single_activation(graph, readers[0], x)
    return gated_pattern(graph, readers, consumers, x)


def _fused(node: Node, activation: FusedActivation, output: str) -> Node:
    """``node`` as the op it becomes with ``activation``, writing ``output``."""
    fused_op = get_op(node.op).with_activation
    assert fused_op is not None  # only nodes of ops that declare one are matched
    op = get_op(fused_op)
    settings = {f.name: getattr(activation, f.name) for f in fields(FusedActivation)}
    settings.update(
        {f.name: getattr(node.attrs, f.name) for f in fields(node.attrs) if f.name not in _ACTIVATION_FIELDS}
    )
    return Node(op.name, node.name, list(node.inputs), [output], op.attrs_type(**settings))


def _match(
    graph: Graph, node: Node, consumers: dict[str, list[Node]]
) -> tuple[list[Node], FusedActivation | None]:
    """The activation nodes to absorb into ``node`` and the activation they apply."""
    definition = find_op(node.op)
    if definition is None or definition.with_activation is None or len(node.outputs) != 1:
        return [], None
    if isinstance(node.attrs, FusedActivation) and node.attrs.activation != "none":
        return [], None
    return activation_reading(graph, node.outputs[0], consumers)


def fuse_activation(graph: Graph) -> PassResult:
    result = graph.with_nodes(list(graph.nodes))
    consumers = result.consumers()
    absorbed: set[int] = set()
    changes = []
    nodes = []
    for node in result.nodes:
        if id(node) in absorbed:
            continue
        pattern, activation = _match(result, node, consumers)
        if activation is None:
            nodes.append(node)
            continue
        fused = _fused(node, activation, pattern[-1].outputs[0])
        absorbed.update(id(n) for n in pattern)
        nodes.append(fused)
        parts = " + ".join(str(n) for n in [node, *pattern])
        changes.append(f"fused {parts} -> {fused.op} ({activation.activation})")
    result.nodes = nodes
    return PassResult(result, changes)

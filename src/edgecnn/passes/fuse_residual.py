"""Fuse a residual block's tail, conv -> Add(shortcut) -> activation, into one FusedConvAdd step, so
the sum and its activation are applied while the convolution's output is written, instead of two more
passes over the tensor (onnxruntime's Conv with a "Z" sum input does the same).

A Conv, or a FusedConv without activation, qualifies when the Add is the only reader of its output
(either operand position), the other operand is a variable tensor (not a constant) of exactly the
same dtype and shape, and neither the conv output nor the Add output it replaces is a graph output
that would disappear. An activation that ``fuse_activation`` knows and that alone reads the Add's
output is absorbed too. The fused step takes the Add's place in the node order, which keeps the
order topological: every input it reads exists before the Add.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from edgecnn.errors import EdgeCNNError
from edgecnn.ir.graph import Graph, Node, TensorType
from edgecnn.ops.conv import ConvAttrs
from edgecnn.ops.fused import FusedActivation, FusedConvAttrs
from edgecnn.ops.registry import op_family
from edgecnn.passes.base import PassResult
from edgecnn.passes.fuse_activation import activation_reading
from edgecnn.runtime.shapes import infer_graph


@dataclass(frozen=True)
class Residual:
    """One match: the conv, the Add, the residual operand, and the activation nodes absorbed."""

    conv: Node
    add: Node
    residual: str
    activation_nodes: tuple[Node, ...]
    activation: FusedActivation


def tensor_types(graph: Graph) -> dict[str, TensorType]:
    """Every tensor's type from the declared input shapes (empty if inference fails: no fusion)."""
    declared = {s.name: s.type for s in graph.inputs if s.name not in graph.initializers}
    try:
        return infer_graph(graph, declared, fold=False).types
    except EdgeCNNError:
        return {}


def same_known_type(a: TensorType | None, b: TensorType | None) -> bool:
    """Equal dtype and shape, every dimension known (a size or the same symbol)."""
    if a is None or b is None or a.shape is None or a.dtype != b.dtype:
        return False
    return a.shape == b.shape and all(d is not None for d in a.shape)


def _fusible_conv(graph: Graph, conv: Node | None, output: str, readers: list[Node]) -> bool:
    """A Conv/FusedConv without activation writing ``output``, which only the Add reads (once)."""
    if conv is None or op_family(conv.op) != "Conv" or conv.outputs != [output] or len(conv.inputs) > 3:
        return False
    if isinstance(conv.attrs, FusedActivation) and conv.attrs.activation != "none":
        return False
    return len(readers) == 1 and output not in graph.outputs


def _activation_after(
    graph: Graph, add: Node, consumers: dict[str, list[Node]]
) -> tuple[tuple[Node, ...], FusedActivation]:
    """The activation nodes that alone read the Add's output, and what they apply (none if any
    other node reads it, or it is a graph output)."""
    nodes, activation = activation_reading(graph, add.outputs[0], consumers)
    return (tuple(nodes), activation) if activation is not None else ((), FusedActivation())


def _match(
    graph: Graph,
    add: Node,
    types: dict[str, TensorType],
    producers: dict[str, Node],
    consumers: dict[str, list[Node]],
    order: dict[int, int],
) -> Residual | None:
    if add.op != "Add" or len(add.inputs) != 2 or len(add.outputs) != 1 or not all(add.inputs):
        return None
    a, b = add.inputs
    if a == b:
        return None
    candidates = []
    for conv_output, residual in ((a, b), (b, a)):
        conv = producers.get(conv_output)
        if conv is None or not _fusible_conv(graph, conv, conv_output, consumers.get(conv_output, [])):
            continue
        # The Add is the conv output's only reader, so the residual cannot depend on it; a constant
        # residual (a bias in disguise) stays an Add: fold_channel_affine's business.
        if residual in graph.initializers or not same_known_type(types.get(conv_output), types.get(residual)):
            continue
        candidates.append((order[id(conv)], conv, residual))
    if not candidates:
        return None
    _, conv, residual = max(candidates, key=lambda c: c[0])  # the later conv: no lifetime grows
    nodes, activation = _activation_after(graph, add, consumers)
    return Residual(conv, add, residual, nodes, activation)


def _fused(match: Residual) -> Node:
    """The FusedConvAdd node: the conv's settings, the absorbed activation, the last output's name."""
    conv = match.conv
    settings = {f.name: getattr(match.activation, f.name) for f in fields(FusedActivation)}
    settings.update({f.name: getattr(conv.attrs, f.name) for f in fields(ConvAttrs)})
    inputs = list(conv.inputs) + [""] * (3 - len(conv.inputs))
    last = match.activation_nodes[-1] if match.activation_nodes else match.add
    return Node(
        "FusedConvAdd", conv.name, [*inputs, match.residual], [last.outputs[0]], FusedConvAttrs(**settings)
    )


def fuse_residual(graph: Graph) -> PassResult:
    result = graph.with_nodes(list(graph.nodes))
    producers = result.producers()
    consumers = result.consumers()
    adds = [n for n in result.nodes if n.op == "Add" and len(n.inputs) == 2]
    if not any(
        _fusible_conv(result, producers.get(x), x, consumers.get(x, [])) for add in adds for x in add.inputs
    ):
        return PassResult(result, [])  # no candidate: skip the whole-graph shape inference
    types = tensor_types(result)
    order = {id(n): i for i, n in enumerate(result.nodes)}
    replacement: dict[int, Node] = {}
    absorbed: set[int] = set()
    changes = []
    for node in result.nodes:
        match = _match(result, node, types, producers, consumers, order)
        if match is None:
            continue
        fused = _fused(match)
        replacement[id(match.add)] = fused
        absorbed.update(id(n) for n in (match.conv, *match.activation_nodes))
        parts = " + ".join(str(n) for n in (match.conv, match.add, *match.activation_nodes))
        changes.append(f"fused {parts} -> {fused.op} ({match.activation.activation})")
    result.nodes = [replacement.get(id(n), n) for n in result.nodes if id(n) not in absorbed]
    return PassResult(result, changes)

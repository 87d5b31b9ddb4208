"""Fuse an int8 residual block's tail, QLinearConv -> QLinearAdd(shortcut) [-> ReLU clamp], into one
QLinearConvAdd (edgecnn.ops.quant_residual), so that the shortcut is added while the convolution's
8-bit output is written: one pass over the block's output instead of three (the convolution's
store, the Add's two reads and its store).

Runs after fold_qdq_ops, which made the QDQ Add of a ResNet block a QLinearAdd. A QLinearConv
qualifies when the Add is the only reader of its output (which is no graph output), its attributes
carry no activation, and the other operand is a variable tensor of exactly the convolution's output
type and shape (the compiled Add takes no broadcasting). Where both operands are such convolutions
(a downsampling block), the later one in node order is fused, so that the shortcut is computed
before the fused node, which takes the Add's place in the node order; the shortcut is then one of
its inputs, so the buffer planner keeps it alive until the fused step has run.
"""

from __future__ import annotations

from edgecnn.ir.graph import Graph, Node, TensorType
from edgecnn.ops.conv import ConvAttrs
from edgecnn.ops.quant_residual import CONV_INPUTS, QLinearConvAddAttrs
from edgecnn.passes.base import PassResult
from edgecnn.passes.fuse_residual import same_known_type, tensor_types

A, B = 0, 3
"""QLinearAdd's operand positions (each followed by its scale and zero point)."""


def _plain_conv(graph: Graph, conv: Node | None, output: str, readers: list[Node]) -> bool:
    """A QLinearConv with an output zero point and no activation, whose output only the Add reads."""
    if (
        conv is None
        or conv.op != "QLinearConv"
        or conv.outputs != [output]
        or type(conv.attrs) is not ConvAttrs
    ):
        return False
    given = len(conv.inputs) >= CONV_INPUTS - 1 and all(conv.inputs[: CONV_INPUTS - 1])
    return given and len(readers) == 1 and output not in graph.outputs


def _fused(
    graph: Graph,
    add: Node,
    types: dict[str, TensorType],
    producers: dict[str, Node],
    consumers: dict[str, list[Node]],
    order: dict[int, int],
) -> Node | None:
    """The QLinearConvAdd replacing ``add`` and the convolution it reads, or None."""
    if len(add.inputs) != 8 or len(add.outputs) != 1 or not add.inputs[A] or add.inputs[A] == add.inputs[B]:
        return None
    candidates = []
    for own, other in ((A, B), (B, A)):
        conv = producers.get(add.inputs[own])
        if not _plain_conv(graph, conv, add.inputs[own], consumers.get(add.inputs[own], [])):
            continue
        shortcut = add.inputs[other]
        if shortcut in graph.initializers or not same_known_type(
            types.get(add.inputs[own]), types.get(shortcut)
        ):
            continue
        assert conv is not None
        candidates.append((order[id(conv)], own, conv))
    if not candidates:
        return None
    _, own, conv = max(candidates, key=lambda c: c[0])
    other = B if own == A else A
    inputs = [*conv.inputs, *[""] * (CONV_INPUTS - len(conv.inputs))]
    inputs += [*add.inputs[other : other + 3], *add.inputs[own + 1 : own + 3], *add.inputs[6:8]]
    attrs = QLinearConvAddAttrs(**vars(conv.attrs), relu=add.attrs.activation == "relu", conv_first=own == A)
    return Node("QLinearConvAdd", conv.name, inputs, list(add.outputs), attrs)


def fuse_int8_residual(graph: Graph) -> PassResult:
    """Replace each QLinearConv -> QLinearAdd pair that qualifies by one QLinearConvAdd."""
    result = graph.with_nodes(list(graph.nodes))
    if not any(n.op == "QLinearAdd" for n in result.nodes):
        return PassResult(result, [])  # no candidate: skip the whole-graph shape inference
    types = tensor_types(result)
    order = {id(n): i for i, n in enumerate(result.nodes)}
    producers, consumers = result.producers(), result.consumers()
    replacement: dict[int, Node] = {}
    absorbed: set[int] = set()
    changes = []
    for node in result.nodes:
        fused = _fused(result, node, types, producers, consumers, order) if node.op == "QLinearAdd" else None
        if fused is None:
            continue
        conv = producers[node.inputs[A if fused.attrs.conv_first else B]]
        replacement[id(node)] = fused
        absorbed.add(id(conv))
        changes.append(f"fused {conv} + {node} -> QLinearConvAdd")
    result.nodes = [replacement.get(id(n), n) for n in result.nodes if id(n) not in absorbed]
    return PassResult(result, changes)

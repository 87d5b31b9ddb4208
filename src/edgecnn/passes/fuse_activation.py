"""Fuse a convolution or dense layer with the activation that alone reads its output, so the
activation is applied while the output is still in cache (seed 004: conv + bias + ReLU as one step).

Recognised: Relu, LeakyRelu, Clip with constant bounds (ReLU6), Sigmoid, HardSwish, and SiLU
written as Mul(x, Sigmoid(x)). The result is a FusedConv/FusedGemm writing the activation's output.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import fields

from edgecnn.ir.graph import Graph, Node
from edgecnn.ops.conv import ConvAttrs
from edgecnn.ops.dense import GemmAttrs
from edgecnn.ops.fused import FusedActivation, FusedConvAttrs, FusedGemmAttrs
from edgecnn.passes.base import PassResult

FUSIBLE = {
    "Conv": ("FusedConv", ConvAttrs, FusedConvAttrs),
    "FusedConv": ("FusedConv", ConvAttrs, FusedConvAttrs),
    "Gemm": ("FusedGemm", GemmAttrs, FusedGemmAttrs),
    "FusedGemm": ("FusedGemm", GemmAttrs, FusedGemmAttrs),
}
UNARY = {"Relu": "relu", "Sigmoid": "sigmoid", "HardSwish": "hard_swish"}


def _clip_bound(graph: Graph, node: Node, index: int, default: float) -> float | None:
    """A Clip bound as a float: ``default`` when omitted, None when it is not a scalar constant."""
    name = node.inputs[index] if len(node.inputs) > index else ""
    if not name:
        return default
    value = graph.initializers.get(name)
    if value is None or value.size != 1 or value.dtype.kind != "f":
        return None
    return float(value.reshape(()))


def single_activation(graph: Graph, node: Node, x: str) -> FusedActivation | None:
    """The activation ``node`` applies to ``x``, if it is one a fused step can apply."""
    if node.inputs[:1] != [x] or len(node.outputs) != 1:
        return None
    if node.op in UNARY and len(node.inputs) == 1:
        return FusedActivation(UNARY[node.op])
    if node.op == "LeakyRelu" and len(node.inputs) == 1:
        return FusedActivation("leaky_relu", negative_slope=float(node.attrs.alpha))
    if node.op == "Clip" and x not in node.inputs[1:]:
        low, high = _clip_bound(graph, node, 1, -math.inf), _clip_bound(graph, node, 2, math.inf)
        if low is not None and high is not None:
            return FusedActivation("clip", low=low, high=high)
    return None


def silu_pattern(graph: Graph, readers: list[Node], consumers: dict[str, list[Node]], x: str) -> list[Node]:
    """[Sigmoid, Mul] when ``readers`` of ``x`` are exactly Sigmoid(x) and Mul(x, that sigmoid)."""
    sigmoids = [n for n in readers if n.op == "Sigmoid" and n.inputs == [x] and len(n.outputs) == 1]
    if len(readers) != 2 or len(sigmoids) != 1:
        return []
    sigmoid = sigmoids[0]
    gate = sigmoid.outputs[0]
    mul = next(n for n in readers if n is not sigmoid)
    if mul.op != "Mul" or sorted(mul.inputs) != sorted([x, gate]) or len(mul.outputs) != 1:
        return []
    if consumers.get(gate) != [mul] or gate in graph.outputs:
        return []
    return [sigmoid, mul]


def _fused(node: Node, activation: FusedActivation, output: str) -> Node:
    """``node`` as its fused op with ``activation``; the layer's own settings win a name clash."""
    op, base, attrs_type = FUSIBLE[node.op]
    settings = {f.name: getattr(activation, f.name) for f in fields(FusedActivation)}
    settings.update({f.name: getattr(node.attrs, f.name) for f in fields(base)})
    return Node(op, node.name, list(node.inputs), [output], attrs_type(**settings))


Matcher = Callable[[Graph, Node, dict[str, list[Node]]], tuple[list[Node], FusedActivation | None]]
Fuser = Callable[[Node, FusedActivation, str], Node]


def fuse_producers(graph: Graph, match: Matcher, fuse: Fuser) -> PassResult:
    """Replace every node that ``match`` pairs with the activation nodes reading it by ``fuse``'s
    single node, which writes the last activation's output; the shared loop of the fusion passes."""
    result = graph.copy()
    consumers = result.consumers()
    absorbed: set[int] = set()
    changes = []
    nodes = []
    for node in result.nodes:
        if id(node) in absorbed:
            continue
        pattern, activation = match(result, node, consumers)
        if activation is None:
            nodes.append(node)
            continue
        fused = fuse(node, activation, pattern[-1].outputs[0])
        absorbed.update(id(n) for n in pattern)
        nodes.append(fused)
        parts = " + ".join(str(n) for n in [node, *pattern])
        changes.append(f"fused {parts} -> {fused.op} ({activation.activation})")
    result.nodes = nodes
    return PassResult(result, changes)


def activation_reading(
    graph: Graph, x: str, consumers: dict[str, list[Node]]
) -> tuple[list[Node], FusedActivation | None]:
    """The nodes that, as ``x``'s only readers, apply one fusible activation to it, and which one."""
    if x in graph.outputs:
        return [], None
    readers = consumers.get(x, [])
    if len(readers) == 1:
        return [readers[0]], single_activation(graph, readers[0], x)
    pattern = silu_pattern(graph, readers, consumers, x)
    return pattern, (FusedActivation("silu") if pattern else None)


def fuse_activation(graph: Graph) -> PassResult:
    return fuse_producers(graph, _match, _fused)


def _match(
    graph: Graph, node: Node, consumers: dict[str, list[Node]]
) -> tuple[list[Node], FusedActivation | None]:
    """The activation nodes to absorb into ``node`` and the activation they apply."""
    if node.op not in FUSIBLE or not node.outputs:
        return [], None
    if isinstance(node.attrs, FusedActivation) and node.attrs.activation != "none":
        return [], None
    return activation_reading(graph, node.outputs[0], consumers)

"""Rewrite GELU in the Erf form that exporters write below opset 20 into one Gelu node: five
elementwise passes over the tensor (Div or Mul by a constant, Erf, Add one, two Mul) become one.

    y = x * (erf(x / sqrt(2)) + 1) * 0.5        (either order of the two products, x * 0.5 first
                                                  or last; x * (1 / sqrt(2)) for the division)

Every intermediate tensor must be read only by the next node of the pattern and not be a graph
output; the constants must be scalars equal to theirs to float32 precision.
"""

from __future__ import annotations

import math

from edgecnn.ir.graph import Graph, Node
from edgecnn.ops.activation import GeluAttrs
from edgecnn.passes.base import PassResult


def _scalar(graph: Graph, name: str, value: float) -> bool:
    """Whether ``name`` is a constant float scalar equal to ``value`` (float32 rounding allowed)."""
    constant = graph.initializers.get(name)
    if constant is None or constant.size != 1 or constant.dtype.kind != "f":
        return False
    return math.isclose(float(constant.reshape(())), value, rel_tol=1e-6)


def _other(node: Node, x: str) -> str | None:
    """The input of the two-input ``node`` that is not ``x``, or None if ``x`` is not one of them."""
    if len(node.inputs) != 2 or x not in node.inputs:
        return None
    return node.inputs[1] if node.inputs[0] == x else node.inputs[0]


class _Matcher:
    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.producers = graph.producers()
        self.consumers = graph.consumers()

    def only_reader(self, tensor: str) -> Node | None:
        """The one node that reads ``tensor``, which is not a graph output."""
        readers = self.consumers.get(tensor, [])
        if len(readers) != 1 or tensor in self.graph.outputs or len(readers[0].outputs) != 1:
            return None
        return readers[0]

    def scaled(self, erf: Node) -> tuple[str, Node] | None:
        """(x, the node dividing x by sqrt(2)) feeding ``erf``."""
        node = self.producers.get(erf.inputs[0])
        if node is None or self.only_reader(erf.inputs[0]) is not erf or len(node.inputs) != 2:
            return None
        x, c = node.inputs
        if node.op == "Div" and _scalar(self.graph, c, math.sqrt(2.0)):
            return x, node
        if node.op == "Mul":
            for x, c in (node.inputs, node.inputs[::-1]):
                if _scalar(self.graph, c, math.sqrt(0.5)):
                    return x, node
        return None

    def match(self, erf: Node) -> tuple[str, list[Node]] | None:
        """(x, the pattern's nodes, the last one writing y) for the pattern around ``erf``."""
        scaled = self.scaled(erf)
        plus = self.only_reader(erf.outputs[0])
        if scaled is None or plus is None or plus.op != "Add":
            return None
        x, divide = scaled
        one = _other(plus, erf.outputs[0])
        if one is None or not _scalar(self.graph, one, 1.0):
            return None
        product = self.only_reader(plus.outputs[0])
        if product is None or product.op != "Mul":
            return None
        factor = _other(product, plus.outputs[0])
        if factor == x:  # x * (erf + 1), then * 0.5
            last = self.only_reader(product.outputs[0])
            if last is None or last.op != "Mul":
                return None
            half = _other(last, product.outputs[0])
            if half is None or not _scalar(self.graph, half, 0.5):
                return None
            return x, [divide, erf, plus, product, last]
        halving = self.producers.get(factor or "")
        if halving is None or halving.op != "Mul" or self.only_reader(halving.outputs[0]) is not product:
            return None
        half = _other(halving, x)
        if half is None or not _scalar(self.graph, half, 0.5):
            return None
        return x, [divide, erf, plus, halving, product]


def fuse_gelu(graph: Graph) -> PassResult:
    result = graph.with_nodes(list(graph.nodes))
    matcher = _Matcher(result)
    position = {id(n): i for i, n in enumerate(result.nodes)}
    replaced: dict[int, Node] = {}  # id of a pattern's last node -> its Gelu
    absorbed: set[int] = set()
    changes = []
    for node in result.nodes:
        if node.op != "Erf" or id(node) in absorbed:
            continue
        found = matcher.match(node)
        if found is None:
            continue
        x, pattern = found
        ids = {id(n) for n in pattern}
        if ids & absorbed:
            continue
        last = max(pattern, key=lambda n: position[id(n)])
        gelu = Node("Gelu", f"{node.name}_gelu", [x], list(last.outputs), GeluAttrs())
        absorbed |= ids
        replaced[id(last)] = gelu
        changes.append(f"fused {' + '.join(str(n) for n in pattern)} -> Gelu")
    result.nodes = [
        replaced.get(id(n), n) for n in result.nodes if id(n) not in absorbed or id(n) in replaced
    ]
    return PassResult(result, changes)

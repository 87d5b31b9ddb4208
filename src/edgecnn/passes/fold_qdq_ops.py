"""Fold the QDQ-format Add, pooling, Concat and reshaping layers between a QDQ model's integer
layers, so that the model runs on 8-bit tensors from its first QuantizeLinear to its last
DequantizeLinear instead of returning to float32 around each of them.

Runs after fold_qdq (which made the convolutions and products integer operators). Each rewrite is
made only where the integer operator onnxruntime fuses the same QDQ pattern into says the same
thing, with every activation quantised per tensor with a given zero point and one 8-bit type:

- Q(Add(DQ(a), DQ(b))), optionally with a Relu before the Q -> QLinearAdd (the Relu clamps at the
  output's zero point);
- Q(GlobalAveragePool(DQ(x))) -> QLinearGlobalAveragePool; Q(LeakyRelu(DQ(x))) -> QLinearLeakyRelu;
  Q(AveragePool(DQ(x))) -> QLinearAveragePool (2-D, no dilations: onnxruntime's definition);
  Q(LRN(DQ(x))) -> QLinearLRN (edgecnn's own: the float LRN on the dequantised values, quantised);
- Q(Concat(DQ(x1), DQ(x2), ...)) -> Concat of the 8-bit inputs where every input shares the output's
  scale and zero point (a copy the arena can make a view of), QLinearConcat otherwise;
- Q(op(DQ(x))) for op in MaxPool, Flatten, Reshape with equal input and output parameters -> op on
  the 8-bit data: these ops only select or move values, and Q(DQ(v)) = v.

Q(MaxPool(y)) is MaxPool(Q(y)) (the max commutes with the monotone quantisation), so where a MaxPool
sits between one of those ops and its QuantizeLinear (GoogLeNet's second LRN), the QuantizeLinear is
moved before the MaxPool first; the op then folds and the pool runs on 8-bit data.

The integer Add and averages round differently from the float32 graph in rare ties; onnxruntime
(x86) fuses them for uint8 activations only and runs int8 ones as that float32 graph, so int8 ones
are left alone (Concat, LeakyRelu and the pass-through ops compute the float graph exactly).
"""

from __future__ import annotations

import numpy as np

from edgecnn.ir.graph import Graph, Node
from edgecnn.ops.quant import QLinearAddAttrs
from edgecnn.passes.base import PassResult
from edgecnn.passes.fold_qdq import Dequantized, QdqFolder, rewrite_layers

PASS_THROUGH = ("MaxPool", "Flatten", "Reshape")
"""Ops that only select or move values: on 8-bit data where input and output share parameters."""
QLINEAR_UNARY = {
    "GlobalAveragePool": "QLinearGlobalAveragePool",
    "AveragePool": "QLinearAveragePool",
    "LeakyRelu": "QLinearLeakyRelu",
    "LRN": "QLinearLRN",
}
"""One-input ops and their integer forms (X, its scale and zero point, Y's; the op's attributes)."""
UINT8_ONLY = ("Add", "AveragePool", "GlobalAveragePool")
"""Ops whose integer forms differ from the float32 graph in rare ties: folded where onnxruntime
folds them, for uint8 activations."""


def plain_average_pool(node: Node) -> bool:
    """A 2-D AveragePool without dilations: what QLinearAveragePool defines."""
    attrs = node.attrs
    return len(attrs.kernel_shape) == 2 and all(d == 1 for d in attrs.dilations)


class QdqOpFolder(QdqFolder):
    """Finds the QDQ patterns of this module in one graph and builds their 8-bit replacements."""

    def quantized_output(self, node: Node) -> list[Node] | None:
        """[the QuantizeLinear reading ``node``'s output] or [a Relu that alone reads it, the
        QuantizeLinear reading the Relu's]."""
        q = self.output(node)
        if q is not None:
            return [q]
        readers = self.consumers.get(node.outputs[0], []) if len(node.outputs) == 1 else []
        if len(readers) != 1 or readers[0].op != "Relu" or node.outputs[0] in self.graph.outputs:
            return None
        q = self.output(readers[0])
        return [readers[0], q] if q is not None else None

    def inputs(self, node: Node, q: Node, tensors: list[str]) -> list[Dequantized] | None:
        """The dequantised activations behind ``tensors``, all of the type of ``q``'s output."""
        found = [self.activation(t) for t in tensors]
        zero = self.constant(q.inputs[2])
        assert zero is not None
        if any(x is None or x.zero_value is None or x.zero_value.dtype != zero.dtype for x in found):
            return None
        return [x for x in found if x is not None]

    def same_parameters(self, x: Dequantized, q: Node) -> bool:
        """Whether ``x`` was dequantised with exactly the scale and zero point ``q`` quantises with."""
        scale, zero = self.constant(q.inputs[1]), self.constant(q.inputs[2])
        assert scale is not None and zero is not None and x.zero_value is not None
        same_scale = np.float32(x.scale_value.reshape(())) == np.float32(scale.reshape(()))
        return bool(same_scale and int(x.zero_value.reshape(())) == int(zero.reshape(())))

    def fold(self, node: Node) -> tuple[Node, list[Node]] | None:
        """(the 8-bit node replacing ``node``, [the Relu and] the QuantizeLinear it absorbs), or None."""
        if node.op not in (*PASS_THROUGH, *QLINEAR_UNARY, "Add", "Concat") or not node.inputs:
            return None
        taken = self.quantized_output(node)
        if taken is None or (len(taken) > 1 and node.op != "Add"):
            return None
        q = taken[-1]
        zero = self.constant(q.inputs[2])
        if node.op in UINT8_ONLY and (zero is None or zero.dtype != np.uint8):
            return None
        y_params = [q.inputs[1], q.inputs[2]]
        if node.op == "Add":
            pair = self.inputs(node, q, node.inputs[:2]) if len(node.inputs) == 2 else None
            if pair is None:
                return None
            a, b = pair
            inputs = [a.data, a.scale, a.zero_point, b.data, b.scale, b.zero_point, *y_params]
            return Node(
                "QLinearAdd",
                node.name,
                inputs,
                list(q.outputs),
                QLinearAddAttrs("relu" if len(taken) > 1 else "none"),
            ), taken
        if node.op == "Concat":
            parts = self.inputs(node, q, list(node.inputs))
            if parts is None:
                return None
            if all(self.same_parameters(x, q) for x in parts):
                return Node("Concat", node.name, [x.data for x in parts], list(q.outputs), node.attrs), taken
            triples = [name for x in parts for name in (x.data, x.scale, x.zero_point)]
            return Node("QLinearConcat", node.name, [*y_params, *triples], list(q.outputs), node.attrs), taken
        single = self.inputs(node, q, node.inputs[:1])
        if single is None:
            return None
        (x,) = single
        if node.op == "AveragePool" and not plain_average_pool(node):
            return None
        if node.op in QLINEAR_UNARY:
            inputs = [x.data, x.scale, x.zero_point, *y_params]
            return Node(QLINEAR_UNARY[node.op], node.name, inputs, list(q.outputs), node.attrs), taken
        if len(node.outputs) != 1 or not self.same_parameters(x, q):
            return None
        return Node(node.op, node.name, [x.data, *node.inputs[1:]], list(q.outputs), node.attrs), taken


def quantize_before_max_pool(graph: Graph) -> PassResult:
    """A copy of ``graph`` in which each DQ -> op -> MaxPool -> Q, op one of QLINEAR_UNARY's, reads
    DQ -> op -> Q -> MaxPool, the MaxPool on the 8-bit codes; exact, as max commutes with Q."""
    folder = QdqOpFolder(graph)
    moves: dict[int, tuple[Node, Node]] = {}  # id of the MaxPool -> (its QuantizeLinear, the op before it)
    for pool in graph.nodes:
        q = folder.output(pool) if pool.op == "MaxPool" and len(pool.inputs) == 1 else None
        op = folder.producers.get(pool.inputs[0]) if q is not None else None
        if q is None or op is None or op.op not in QLINEAR_UNARY or len(op.outputs) != 1:
            continue
        zero = folder.constant(q.inputs[2])
        readers = folder.consumers.get(op.outputs[0], [])
        if len(readers) != 1 or op.outputs[0] in graph.outputs or not op.inputs:
            continue
        if folder.inputs(op, q, op.inputs[:1]) is None or (
            op.op in UINT8_ONLY and (zero is None or zero.dtype != np.uint8)
        ):
            continue
        moves[id(pool)] = (q, op)
    if not moves:
        return PassResult(graph)
    absorbed = {id(q) for q, _ in moves.values()}
    nodes: list[Node] = []
    changes = []
    for node in graph.nodes:
        if id(node) in absorbed:
            continue
        if id(node) not in moves:
            nodes.append(node)
            continue
        q, op = moves[id(node)]
        codes = folder.fresh(f"{op.outputs[0]}_quantized")
        nodes.append(Node(q.op, q.name, [op.outputs[0], *q.inputs[1:]], [codes], q.attrs))
        nodes.append(Node(node.op, node.name, [codes], list(q.outputs), node.attrs))
        changes.append(f"{q} moved before {node}, which now pools 8-bit data")
    return PassResult(graph.with_nodes(nodes), changes)


def fold_qdq_ops(graph: Graph) -> PassResult:
    """Replace the DQ -> Add/pooling/Concat/reshape/LRN -> Q layers by their 8-bit forms."""
    moved = quantize_before_max_pool(graph)
    folded = rewrite_layers(moved.graph, QdqOpFolder, "on 8-bit data")
    return PassResult(folded.graph, moved.changes + folded.changes)

"""Fold QDQ-format layers into edgecnn's integer operators, so that int8 models written by
onnxruntime.quantization (QuantFormat.QDQ) run on the int8 kernels instead of in float32.

A QDQ layer is a float Conv/Gemm/MatMul whose inputs come from DequantizeLinear nodes and whose
output alone feeds a QuantizeLinear:

    Q(op(DQ(x_q, xs, xzp), DQ(w_q, ws, wzp), DQ(b_q, bs, 0)), ys, yzp)

By the definitions of the ONNX integer operators this is QLinearConv / QLinearMatMul (for Gemm,
edgecnn's Int8Gemm, which takes the int32 bias of the same definition) over the same integers, so
the rewrite is made only where those definitions say the same thing:

- x is quantised per tensor (scalar scale and zero point), its zero point given (it fixes the type);
- w is a constant 8-bit tensor, per tensor or per output channel (Conv: axis 0; MatMul: the columns
  of a 2-D B; Gemm: B's output axis);
- the bias, if any, is an int32 constant with zero point 0 and scale xs * ws (equal up to float32
  rounding of the product: onnxruntime writes it so); a float bias is not rounded into integers;
- the output goes only to one per-tensor QuantizeLinear with a given zero point;
- Gemm: alpha = 1, beta = 1 (or no C), A not transposed.

The pass runs before fold_constants, which would otherwise turn the weights' DequantizeLinear into
float constants; it removes the DequantizeLinear nodes that the folded layers leave unread (the
constant-folding would only compute their float weights for eliminate_dead to drop).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from edgecnn.ir.graph import Graph, Node
from edgecnn.ops.quant import QUANT_DTYPES, Int8GemmAttrs
from edgecnn.ops.registry import NoAttrs
from edgecnn.passes.base import PassResult, fresh_name

FOLDED_OP = {"Conv": "QLinearConv", "MatMul": "QLinearMatMul", "Gemm": "Int8Gemm"}
BIAS_RTOL = 4 * float(np.finfo(np.float32).eps)
"""How far a bias scale may be from xs * ws: a few float32 roundings of the product."""


@dataclass(frozen=True)
class Dequantized:
    """A DequantizeLinear's operands (tensor names; "" for an omitted zero point) and constants."""

    node: Node
    data: str
    scale: str
    zero_point: str
    scale_value: np.ndarray
    zero_value: np.ndarray | None

    @property
    def per_tensor(self) -> bool:
        return self.scale_value.size == 1 and (self.zero_value is None or self.zero_value.size == 1)

    def axis(self, rank: int) -> int:
        axis = int(self.node.attrs.axis)
        return axis + rank if axis < 0 else axis


class QdqFolder:
    """Finds QDQ layers in one graph being rewritten and replaces each with its integer operator."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.producers = graph.producers()
        self.consumers = graph.consumers()
        self.taken = set(graph.initializers) | set(graph.input_names) | set(self.producers)

    def constant(self, name: str) -> np.ndarray | None:
        return self.graph.initializers.get(name) if name else None

    def dequantized(self, tensor: str) -> Dequantized | None:
        """The DequantizeLinear writing ``tensor``, if its scale and zero point are constants."""
        node = self.producers.get(tensor)
        if node is None or node.op != "DequantizeLinear" or node.attrs.block_size:
            return None
        if node.attrs.output_dtype not in ("", "float32"):
            return None
        scale_name = node.inputs[1]
        zero_name = node.inputs[2] if len(node.inputs) > 2 else ""
        scale, zero = self.constant(scale_name), self.constant(zero_name)
        if scale is None or scale.dtype != np.float32 or (zero_name and zero is None):
            return None
        if scale.ndim > 1 or (zero is not None and (zero.ndim > 1 or zero.size != scale.size)):
            return None
        return Dequantized(node, node.inputs[0], scale_name, zero_name, scale, zero)

    def activation(self, tensor: str) -> Dequantized | None:
        """A per-tensor dequantised 8-bit activation whose zero point (hence type) is given."""
        dq = self.dequantized(tensor)
        if dq is None or not dq.per_tensor or dq.zero_value is None:
            return None
        return dq if dq.zero_value.dtype.name in QUANT_DTYPES else None

    def weights(self, tensor: str, rank: int, axis: int, channels: int) -> Dequantized | None:
        """Dequantised constant 8-bit weights of ``rank``, per tensor or per ``axis`` (``channels``)."""
        dq = self.dequantized(tensor)
        if dq is None:
            return None
        w = self.constant(dq.data)
        if w is None or w.dtype.name not in QUANT_DTYPES or w.ndim != rank:
            return None
        if dq.zero_value is not None and dq.zero_value.dtype != w.dtype:
            return None
        if dq.per_tensor:
            return dq
        return dq if dq.axis(rank) == axis and dq.scale_value.size == channels == w.shape[axis] else None

    def bias(self, tensor: str, x: Dequantized, w: Dequantized, channels: int) -> str | None:
        """The int32 bias constant behind ``tensor`` when its grid is exactly x's times w's."""
        dq = self.dequantized(tensor)
        b = None if dq is None else self.constant(dq.data)
        if dq is None or b is None or b.dtype != np.int32 or b.shape not in ((channels,), (1, channels)):
            return None
        if dq.zero_value is not None and np.any(dq.zero_value != 0):
            return None
        if not dq.per_tensor and (dq.axis(b.ndim) != b.ndim - 1 or dq.scale_value.size != channels):
            return None
        expected = np.float32(x.scale_value.reshape(())) * w.scale_value.reshape(-1).astype(np.float32)
        got = np.broadcast_to(dq.scale_value.reshape(-1), (channels,))
        if not np.allclose(got, expected, rtol=BIAS_RTOL, atol=0.0):
            return None
        if b.ndim == 1:
            return dq.data
        name = self.fresh(f"{dq.data}.vector")
        self.graph.initializers[name] = b.reshape(-1)
        return name

    def output(self, node: Node) -> Node | None:
        """The per-tensor QuantizeLinear that alone reads the layer's output."""
        tensor = node.outputs[0]
        readers = self.consumers.get(tensor, [])
        if len(node.outputs) != 1 or len(readers) != 1 or tensor in self.graph.outputs:
            return None
        q = readers[0]
        if q.op != "QuantizeLinear" or q.inputs[0] != tensor or len(q.outputs) != 1 or q.attrs.block_size:
            return None
        scale = self.constant(q.inputs[1])
        zero = self.constant(q.inputs[2] if len(q.inputs) > 2 else "")
        if scale is None or zero is None or scale.size != 1 or zero.size != 1 or scale.dtype != np.float32:
            return None
        if zero.dtype.name not in QUANT_DTYPES or q.attrs.output_dtype not in ("", zero.dtype.name):
            return None
        return q

    def zero_point(self, dq: Dequantized, dtype: np.dtype) -> str:
        """The zero point's name; an omitted one becomes a zero constant (QLinear ops require it)."""
        if dq.zero_point:
            return dq.zero_point
        name = self.fresh(f"{dq.data}.zero_point")
        self.graph.initializers[name] = np.zeros(dq.scale_value.shape, dtype=dtype)
        return name

    def fresh(self, base: str) -> str:
        return fresh_name(self.taken, base)

    def fold(self, node: Node) -> tuple[Node, list[Node]] | None:
        """(the integer node replacing ``node``, [the QuantizeLinear it absorbs]), or None."""
        q = self.output(node) if node.op in FOLDED_OP else None
        x = self.activation(node.inputs[0]) if q is not None and len(node.inputs) > 1 else None
        if q is None or x is None:
            return None
        if node.op == "Conv":
            w_value = self.constant(getattr(self.dequantized(node.inputs[1]), "data", ""))
            if w_value is None or w_value.ndim < 3:
                return None
            w = self.weights(node.inputs[1], w_value.ndim, 0, w_value.shape[0])
            attrs: object = node.attrs
        elif node.op == "MatMul":
            w = self.weights(node.inputs[1], 2, 1, self._columns(node.inputs[1], 1))
            attrs = NoAttrs()
        else:
            a = node.attrs
            if a.alpha != 1.0 or a.trans_a or (len(node.inputs) > 2 and node.inputs[2] and a.beta != 1.0):
                return None
            out_axis = 0 if a.trans_b else 1
            w = self.weights(node.inputs[1], 2, out_axis, self._columns(node.inputs[1], out_axis))
            attrs = Int8GemmAttrs(trans_b=a.trans_b)
        if w is None:
            return None
        w_value = self.constant(w.data)
        assert w_value is not None
        inputs = [x.data, x.scale, x.zero_point, w.data, w.scale, self.zero_point(w, w_value.dtype)]
        inputs += [q.inputs[1], q.inputs[2]]
        if len(node.inputs) > 2 and node.inputs[2]:
            if node.op == "MatMul":
                return None
            by_rows = node.op == "Conv" or (isinstance(attrs, Int8GemmAttrs) and attrs.trans_b)
            channels = w_value.shape[0] if by_rows else w_value.shape[1]
            bias = self.bias(node.inputs[2], x, w, channels)
            if bias is None:
                return None
            inputs.append(bias)
        return Node(FOLDED_OP[node.op], node.name, inputs, list(q.outputs), attrs), [q]

    def _columns(self, tensor: str, axis: int) -> int:
        dq = self.dequantized(tensor)
        w = self.constant(dq.data) if dq is not None else None
        return int(w.shape[axis]) if w is not None and w.ndim > axis else -1


def fold_qdq(graph: Graph) -> PassResult:
    """Replace each DQ -> Conv/Gemm/MatMul -> Q layer by QLinearConv / Int8Gemm / QLinearMatMul."""
    return rewrite_layers(graph, QdqFolder, "(int8 in, int8 out)")


def rewrite_layers(graph: Graph, folder_type: type[QdqFolder], note: str) -> PassResult:
    """A copy of ``graph`` with each node that ``folder_type(graph).fold`` folds replaced, the nodes
    it absorbs removed, and the DequantizeLinear nodes left unread dropped."""
    result = graph.with_nodes(list(graph.nodes))
    folder = folder_type(result)
    absorbed: set[int] = set()
    nodes: list[Node] = []
    changes = []
    for node in result.nodes:
        if id(node) in absorbed:
            continue
        folded = folder.fold(node)
        if folded is None:
            nodes.append(node)
            continue
        replacement, taken = folded
        absorbed.update(id(n) for n in taken)
        nodes.append(replacement)
        names = " + ".join(n.name or n.op for n in taken)
        changes.append(f"{node} + {names} -> {replacement.op} {note}")
    result.nodes = nodes
    if changes:
        unread = drop_unread_dequantize(result)
        if unread:
            changes.append(f"removed {unread} DequantizeLinear node(s) nothing reads any more")
    return PassResult(result, changes)


def drop_unread_dequantize(graph: Graph) -> int:
    """Remove (in place) DequantizeLinear nodes whose output no node reads and the graph does not return."""
    read = {x for node in graph.nodes for x in node.inputs if x} | set(graph.outputs)
    kept = [n for n in graph.nodes if n.op != "DequantizeLinear" or any(o in read for o in n.outputs if o)]
    dropped = len(graph.nodes) - len(kept)
    graph.nodes = kept
    return dropped

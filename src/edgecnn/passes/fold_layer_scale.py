"""Fold a per-column scale (ConvNeXt's layer scale) into the linear layer before it:

    Mul(Add(MatMul(x, W), b), s) -> Add(MatMul(x, W * s), b * s)      (or without the Add)

with W a constant (K, N) matrix, b and s constants of one value or one per column (shape (), (1,)
or (N,), so that broadcasting them changes no shape), and the MatMul's and Add's outputs read only
by the next node of the pattern and not graph outputs. One elementwise pass over the layer's output
goes; the products w * s are rounded once, as ``fold_channel_affine`` rounds a folded Conv's.
"""

from __future__ import annotations

import numpy as np

from edgecnn.ir.graph import Graph, Node
from edgecnn.passes.base import PassResult, fresh_name


class _Folder:
    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.producers = graph.producers()
        self.consumers = graph.consumers()
        self.taken = set(graph.initializers) | set(graph.input_names) | set(self.producers)

    def column_constant(self, name: str, columns: int, dtype: np.dtype) -> np.ndarray | None:
        """The constant ``name`` if it is of ``dtype`` with one value or one per column."""
        value = self.graph.initializers.get(name)
        if value is None or value.dtype != dtype or value.ndim > 1 or value.size not in (1, columns):
            return None
        return value

    def feeding(self, tensor: str, reader: Node, op: str) -> Node | None:
        """The ``op`` node writing ``tensor`` when ``reader`` is its only reader."""
        node = self.producers.get(tensor)
        readers = self.consumers.get(tensor, [])
        if node is None or node.op != op or len(node.outputs) != 1 or tensor in self.graph.outputs:
            return None
        return node if readers == [reader] else None

    def split(self, node: Node) -> tuple[str, str] | None:
        """(data input, constant input) of a two-input node with exactly one constant input."""
        if len(node.inputs) != 2 or len(node.outputs) != 1:
            return None
        a, b = node.inputs
        if b in self.graph.initializers and a not in self.graph.initializers:
            return a, b
        if a in self.graph.initializers and b not in self.graph.initializers:
            return b, a
        return None

    def fresh(self, base: str, value: np.ndarray) -> str:
        """A new constant ``value`` under an unused name derived from ``base``."""
        name = fresh_name(self.taken, base)
        self.graph.initializers[name] = value
        return name

    def fold(self, mul: Node) -> list[tuple[Node, Node | None]] | None:
        """[(old node, its replacement or None to drop)] for the pattern ending at ``mul``."""
        parts = self.split(mul)
        if mul.op != "Mul" or parts is None:
            return None
        data, scale_name = parts
        add = self.feeding(data, mul, "Add")
        bias_name = ""
        if add is not None:
            add_parts = self.split(add)
            if add_parts is None:
                return None
            data, bias_name = add_parts
        matmul = self.feeding(data, add if add is not None else mul, "MatMul")
        if matmul is None or len(matmul.inputs) != 2:
            return None
        weights = self.graph.initializers.get(matmul.inputs[1])
        if weights is None or weights.ndim != 2 or weights.dtype.kind != "f" or matmul.inputs[0] == "":
            return None
        columns = weights.shape[1]
        scale = self.column_constant(scale_name, columns, weights.dtype)
        bias = self.column_constant(bias_name, columns, weights.dtype) if bias_name else None
        if scale is None or (bias_name and bias is None):
            return None
        base = matmul.name or matmul.outputs[0]
        new_weights = self.fresh(f"{base}.weights.scaled", weights * scale.reshape(1, -1))
        if add is None:
            inputs = [matmul.inputs[0], new_weights]
            return [(matmul, None), (mul, Node("MatMul", matmul.name, inputs, list(mul.outputs)))]
        assert bias is not None
        new_bias = self.fresh(f"{base}.bias.scaled", (bias * scale).reshape(-1))
        scaled = Node("MatMul", matmul.name, [matmul.inputs[0], new_weights], list(matmul.outputs))
        shifted = Node("Add", add.name, [matmul.outputs[0], new_bias], list(mul.outputs))
        return [(matmul, scaled), (add, None), (mul, shifted)]


def fold_layer_scale(graph: Graph) -> PassResult:
    result = graph.with_nodes(list(graph.nodes))
    folder = _Folder(result)
    replaced: dict[int, Node | None] = {}
    changes = []
    for node in result.nodes:
        if node.op != "Mul":
            continue
        found = folder.fold(node)
        if found is None or any(id(old) in replaced for old, _ in found):
            continue
        replaced.update((id(old), new) for old, new in found)
        changes.append(f"folded {' + '.join(str(old) for old, _ in found)} into the MatMul's weights")
    nodes = [replaced.get(id(n), n) for n in result.nodes]
    result.nodes = [n for n in nodes if n is not None]
    return PassResult(result, changes)
